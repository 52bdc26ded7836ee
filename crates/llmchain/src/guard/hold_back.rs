//! The hold-back buffer: streamed text kept from a terminal, a served page or a span
//! until the guards have passed it.
//!
//! Text is released a piece at a time, each piece checked by the guards before anyone
//! sees it. A piece ends where no personal datum or key can straddle the cut: at a line
//! end, or at a space after punctuation (`. `, `, `, `: `…) once [`SOFT`] bytes wait;
//! beyond [`HARD`] bytes, at the last space (numbers and keys written with spaces are
//! shorter than the [`TAIL`] kept back). So the delay is bounded: the text waits for the
//! end of its line, at most [`HARD`] bytes.

use super::{Guards, Point, Verdict};

/// Bytes that may wait before a cut after punctuation is taken.
pub const SOFT: usize = 256;
/// Bytes that may wait at most (then the cut is at the last space before the tail).
pub const HARD: usize = 1024;
/// Bytes always kept back from a forced cut: longer than any spaced card number, IBAN
/// or phone number.
pub const TAIL: usize = 64;

/// What the buffer made of what arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Released {
    /// Text the guards passed (or rewrote): show it.
    Text(String),
    /// A guard blocked or tripped: show nothing more; the run stops (or the answer is
    /// withheld) with this guard's verdict.
    Stopped(String, Verdict),
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct HoldBack {
    pending: String,
    /// Bytes released so far (the delay is measured against it by the caller).
    released: usize,
    stopped: bool,
}

impl HoldBack {
    /// Takes `text`; what may be shown now, checked by `guards`.
    pub fn push(&mut self, guards: &Guards, text: &str) -> Option<Released> {
        if self.stopped {
            return None;
        }
        self.pending.push_str(text);
        let cut = self.cut()?;
        let piece: String = self.pending.drain(..cut).collect();
        self.check(guards, &piece)
    }

    /// The end of the stream: the rest, checked.
    pub fn finish(&mut self, guards: &Guards) -> Option<Released> {
        if self.stopped || self.pending.is_empty() {
            return None;
        }
        let piece = std::mem::take(&mut self.pending);
        self.check(guards, &piece)
    }

    /// Bytes waiting.
    pub fn waiting(&self) -> usize {
        self.pending.len()
    }

    /// Bytes released.
    pub fn released(&self) -> usize {
        self.released
    }

    fn check(&mut self, guards: &Guards, piece: &str) -> Option<Released> {
        let checked = guards.check(Point::ModelOutput, piece);
        if let Some((guard, verdict)) = checked.stop {
            self.stopped = true;
            self.pending.clear();
            return Some(Released::Stopped(guard, verdict));
        }
        self.released += piece.len();
        Some(Released::Text(checked.text.into_owned()))
    }

    /// Where the waiting text may be cut (exclusive), if anywhere yet.
    fn cut(&self) -> Option<usize> {
        let p = &self.pending;
        if let Some(nl) = p.rfind('\n') {
            return Some(nl + 1);
        }
        if p.len() >= SOFT {
            let b = p.as_bytes();
            if let Some(i) = (1..b.len()).rev().find(|&i| {
                b[i] == b' ' && matches!(b[i - 1], b'.' | b',' | b';' | b':' | b'!' | b'?' | b')')
            }) {
                return Some(i + 1);
            }
        }
        if p.len() >= HARD {
            let limit = p.len() - TAIL;
            let at = p[..limit].rfind([' ', '\t']).map_or(limit, |i| i + 1);
            // On a char boundary (a cut inside a long word without spaces).
            let at = (0..=at).rev().find(|&i| p.is_char_boundary(i)).unwrap_or(0);
            return (at > 0).then_some(at);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::Pii;
    use proptest::prelude::*;
    use std::sync::Arc;

    fn guards() -> Guards {
        let mut g = Guards::default();
        g.push(Arc::new(Pii::default()));
        g
    }

    fn shown(chunks: &[&str]) -> String {
        let g = guards();
        let mut h = HoldBack::default();
        let mut out = String::new();
        for c in chunks {
            if let Some(Released::Text(t)) = h.push(&g, c) {
                out.push_str(&t);
            }
        }
        if let Some(Released::Text(t)) = h.finish(&g) {
            out.push_str(&t);
        }
        out
    }

    #[test]
    fn a_datum_split_across_chunks_never_shows() {
        let out = shown(&[
            "Mail bob",
            "@exam",
            "ple.com or pay 4111 1111 ",
            "1111 1111.\nThanks",
        ]);
        assert_eq!(out, "Mail [redacted email] or pay [redacted card].\nThanks");
    }

    #[test]
    fn the_delay_is_bounded() {
        let g = guards();
        let mut h = HoldBack::default();
        let word = "lorem ";
        for _ in 0..1000 {
            h.push(&g, word);
            assert!(h.waiting() < HARD + word.len(), "{}", h.waiting());
        }
    }

    proptest! {
        /// Whatever the chunking, a card number in the text is never shown, and the
        /// text shown is the text that arrived, redacted.
        #[test]
        fn any_chunking_hides_the_card(cuts in proptest::collection::vec(1usize..40, 0..12),
                                       filler in "[a-z ,.]{0,300}") {
            let text = format!("{filler} card 4111 1111 1111 1111, {filler}\nend {filler}");
            let mut chunks = Vec::new();
            let mut rest = text.as_str();
            for c in cuts {
                if rest.is_empty() { break; }
                let at = c.min(rest.len());
                chunks.push(&rest[..at]);
                rest = &rest[at..];
            }
            chunks.push(rest);
            let out = shown(&chunks);
            prop_assert!(!out.contains("4111 1111"), "{}", out);
            prop_assert!(out.contains("[redacted card]"));
        }
    }
}

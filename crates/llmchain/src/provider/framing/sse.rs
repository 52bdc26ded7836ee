//! An incremental Server-Sent Events framer following the WHATWG HTML "event stream
//! interpretation" rules.

use crate::provider::DecodeError;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// One dispatched SSE event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseEvent<'a> {
    /// The `event:` field, if the event had one (not validated as UTF-8 by the framer;
    /// invalid UTF-8 gives `None`).
    pub event: Option<&'a str>,
    /// The data: the `data:` lines joined with `\n` (no trailing newline). Borrowed from
    /// the fed chunk when the event has one data line inside one chunk.
    pub data: &'a [u8],
}

/// An incremental SSE framer.
///
/// Feed it byte chunks of any size with [`feed`](Self::feed); it calls back once per
/// dispatched event. The events are the same for every chunking of the same stream.
///
/// Rules (WHATWG): lines end with LF, CRLF or CR (a CR at the end of one chunk and an LF
/// at the start of the next count as one line end); a leading UTF-8 BOM is dropped; a
/// line starting with `:` is a comment; `field:value` drops one space after the colon; a
/// line without a colon is a field with an empty value; `data` lines are joined with
/// `\n`; `event` sets the event type; `id`, `retry` and unknown fields are ignored; an
/// empty line dispatches the event if it has data. Lenient at the end: [`finish`](Self::finish)
/// treats an unterminated last line as a line and dispatches a pending event, so a body
/// that lacks the final blank line is not lost.
///
/// ```
/// use llmchain::provider::framing::SseFramer;
/// let mut framer = SseFramer::new(1 << 20);
/// let mut got = Vec::new();
/// for chunk in [&b"event: ping\r\ndata:{\"a\""[..], b":1}\r", b"\n\r\ndata: [DONE]\n\n"] {
///     framer
///         .feed(chunk, &mut |ev| {
///             got.push((ev.event.map(str::to_owned), ev.data.to_vec()));
///             Ok(())
///         })
///         .unwrap();
/// }
/// assert_eq!(got[0], (Some("ping".to_owned()), b"{\"a\":1}".to_vec()));
/// assert_eq!(got[1], (None, b"[DONE]".to_vec()));
/// ```
#[derive(Debug, Clone)]
pub struct SseFramer {
    max_event_bytes: usize,
    /// An unterminated line carried over from the previous chunk.
    partial: Vec<u8>,
    /// The current event's data when it could not stay borrowed.
    data: Vec<u8>,
    has_data: bool,
    event: Vec<u8>,
    has_event: bool,
    /// The previous chunk ended with a CR: an LF at the start of the next one is part
    /// of the same line end.
    skip_lf: bool,
    /// The stream start has been checked for a BOM.
    bom_done: bool,
    /// Report `event:` names (decoders that ignore them skip the work).
    names: bool,
}

/// Borrowed field values of the current event, from the chunk being framed: moved into
/// the framer's own buffers only when the event continues past the chunk.
#[derive(Default)]
struct Pending<'c> {
    data: Option<&'c [u8]>,
    event: Option<&'c [u8]>,
}

impl SseFramer {
    /// A framer that fails with [`DecodeError::LineTooLong`] when a line or an event's
    /// data exceeds `max_event_bytes`.
    pub fn new(max_event_bytes: usize) -> Self {
        SseFramer {
            max_event_bytes,
            partial: Vec::new(),
            data: Vec::new(),
            has_data: false,
            event: Vec::new(),
            has_event: false,
            skip_lf: false,
            bom_done: false,
            names: true,
        }
    }

    /// A framer whose events never carry the `event:` name (always `None`), for callers
    /// that only read the data.
    pub(crate) fn data_only(max_event_bytes: usize) -> Self {
        SseFramer {
            names: false,
            ..SseFramer::new(max_event_bytes)
        }
    }

    /// Feeds a chunk; calls `on_event` for every event completed by it. An error from the
    /// callback stops framing and is returned.
    pub fn feed<F>(&mut self, chunk: &[u8], on_event: &mut F) -> Result<(), DecodeError>
    where
        F: FnMut(SseEvent<'_>) -> Result<(), DecodeError> + ?Sized,
    {
        let mut rest = chunk;
        while !rest.is_empty() {
            let n = self.feed_event(rest, on_event)?;
            rest = &rest[n..];
        }
        Ok(())
    }

    /// Frames the front of `chunk` through the end of the first event it completes,
    /// calling `on_event` for that event, and returns how many bytes it framed: through
    /// that event's blank line, or all of `chunk` when it completes none (never 0 for a
    /// non-empty chunk). Feeding the rest afterwards gives the same events as
    /// [`feed`](Self::feed)ing the chunk whole; in between, the caller may look at the
    /// framer's state ([`between_events`](Self::between_events)).
    pub fn feed_event<F>(&mut self, chunk: &[u8], on_event: &mut F) -> Result<usize, DecodeError>
    where
        F: FnMut(SseEvent<'_>) -> Result<(), DecodeError> + ?Sized,
    {
        if self.bom_done {
            return self.feed_lines(chunk, on_event);
        }
        // The usual first chunk decides at once, and its lines are framed in place.
        if self.partial.is_empty()
            && (chunk.len() >= BOM.len() || chunk.first().is_some_and(|&b| b != BOM[0]))
        {
            self.bom_done = true;
            let start = if chunk.starts_with(BOM) { BOM.len() } else { 0 };
            return Ok(start + self.feed_lines(&chunk[start..], on_event)?);
        }
        // Gather up to three bytes to decide whether the stream starts with a BOM.
        let need = BOM.len() - self.partial.len();
        let take = need.min(chunk.len());
        self.partial.extend_from_slice(&chunk[..take]);
        if self.partial.len() < BOM.len() && BOM.starts_with(&self.partial) {
            return Ok(take); // still undecided
        }
        self.bom_done = true;
        let mut head = std::mem::take(&mut self.partial);
        let start = if head.starts_with(BOM) { BOM.len() } else { 0 };
        // Three bytes at most: too short to complete an event (`data` alone is four),
        // so they are framed whole.
        let result = self.feed_lines(&head[start..], on_event);
        head.clear();
        if self.partial.is_empty() {
            self.partial = head; // keep the allocation
        }
        result?;
        Ok(take)
    }

    /// True when the framer stands between events: the stream start has been read, and
    /// no line, no `data:` and no `event:` field of an event is pending, so the next
    /// byte fed starts a new line of a new event.
    #[inline]
    pub fn between_events(&self) -> bool {
        self.bom_done
            && self.partial.is_empty()
            && !self.has_data
            && !self.has_event
            && !self.skip_lf
    }

    /// Ends the stream: an unterminated last line is taken as a line, and a pending event
    /// is dispatched. The framer is reset and can frame a new stream.
    pub fn finish<F>(&mut self, on_event: &mut F) -> Result<(), DecodeError>
    where
        F: FnMut(SseEvent<'_>) -> Result<(), DecodeError> + ?Sized,
    {
        if !self.bom_done {
            self.bom_done = true;
            let head = std::mem::take(&mut self.partial);
            // Three bytes at most: no event in them.
            self.feed_lines(&head, on_event)?;
        }
        let result = (|| {
            if !self.partial.is_empty() {
                let line = std::mem::take(&mut self.partial);
                let mut pending = Pending::default();
                self.line(&line, &mut pending, on_event)?;
                self.keep_pending(pending);
            }
            if self.has_data {
                self.dispatch(Pending::default(), on_event)?;
            }
            Ok(())
        })();
        *self = SseFramer {
            names: self.names,
            ..SseFramer::new(self.max_event_bytes)
        };
        result
    }

    /// Frames the lines of `chunk` through the first event dispatched (see
    /// [`feed_event`](Self::feed_event)); returns the bytes framed.
    fn feed_lines<F>(&mut self, chunk: &[u8], on_event: &mut F) -> Result<usize, DecodeError>
    where
        F: FnMut(SseEvent<'_>) -> Result<(), DecodeError> + ?Sized,
    {
        let mut rest = chunk;
        if rest.is_empty() {
            return Ok(0);
        }
        if self.skip_lf {
            self.skip_lf = false;
            if rest[0] == b'\n' {
                rest = &rest[1..];
            }
        }
        let line_end = |b: &[u8]| memchr::memchr2(b'\n', b'\r', b);
        // Complete a line begun in an earlier chunk (a non-empty line: it dispatches
        // nothing).
        if !self.partial.is_empty() {
            match line_end(rest) {
                None => {
                    self.grow_partial(rest)?;
                    return Ok(chunk.len());
                }
                Some(i) => {
                    self.grow_partial(&rest[..i])?;
                    rest = self.after_line_end(rest, i);
                    let mut line = std::mem::take(&mut self.partial);
                    let mut pending = Pending::default();
                    let result = self.line(&line, &mut pending, on_event);
                    if result.is_ok() {
                        self.keep_pending(pending);
                    }
                    line.clear();
                    self.partial = line;
                    result?;
                }
            }
        }
        // Lines wholly inside this chunk: field values stay borrowed until dispatch.
        let mut pending = Pending::default();
        loop {
            let i = match rest.first() {
                None => break,
                // A blank line (the end of an event) needs no search.
                Some(b'\n' | b'\r') => 0,
                Some(_) => match line_end(rest) {
                    Some(i) => i,
                    None => break,
                },
            };
            let line = &rest[..i];
            rest = self.after_line_end(rest, i);
            if self.line(line, &mut pending, on_event)? {
                // Dispatched: `pending` was taken whole.
                return Ok(chunk.len() - rest.len());
            }
        }
        self.keep_pending(pending);
        self.grow_partial(rest)?;
        Ok(chunk.len())
    }

    /// Skips the line end at `rest[i]` (CR, LF or CRLF) and returns what follows.
    #[inline]
    fn after_line_end<'c>(&mut self, rest: &'c [u8], i: usize) -> &'c [u8] {
        let mut next = i + 1;
        if rest[i] == b'\r' {
            if next == rest.len() {
                self.skip_lf = true;
            } else if rest[next] == b'\n' {
                next += 1;
            }
        }
        &rest[next..]
    }

    fn grow_partial(&mut self, bytes: &[u8]) -> Result<(), DecodeError> {
        if self.partial.len() + bytes.len() > self.max_event_bytes {
            return Err(DecodeError::LineTooLong {
                limit: self.max_event_bytes,
            });
        }
        self.partial.extend_from_slice(bytes);
        Ok(())
    }

    /// Moves borrowed field values into the owned buffers (end of a chunk).
    fn keep_pending(&mut self, pending: Pending<'_>) {
        if let Some(p) = pending.data {
            self.data.clear();
            self.data.extend_from_slice(p);
        }
        if let Some(e) = pending.event.filter(|_| self.names) {
            self.event.clear();
            self.event.extend_from_slice(e);
        }
    }

    /// Frames one line; true when it dispatched an event.
    #[inline]
    fn line<'c, F>(
        &mut self,
        line: &'c [u8],
        pending: &mut Pending<'c>,
        on_event: &mut F,
    ) -> Result<bool, DecodeError>
    where
        F: FnMut(SseEvent<'_>) -> Result<(), DecodeError> + ?Sized,
    {
        if line.len() > self.max_event_bytes {
            return Err(DecodeError::LineTooLong {
                limit: self.max_event_bytes,
            });
        }
        if line.is_empty() {
            if self.has_data {
                self.dispatch(std::mem::take(pending), on_event)?;
                return Ok(true);
            }
            pending.event = None;
            self.event.clear();
            self.has_event = false;
            return Ok(false);
        }
        // The two fields that matter, spelled the usual way, skip the colon search.
        let (name, value): (&[u8], &[u8]) = if let Some(v) = line.strip_prefix(b"data:") {
            (b"data", v)
        } else if let Some(v) = line.strip_prefix(b"event:") {
            (b"event", v)
        } else if line[0] == b':' {
            return Ok(false); // a comment
        } else {
            match memchr::memchr(b':', line) {
                Some(c) => (&line[..c], &line[c + 1..]),
                None => (line, &line[line.len()..]),
            }
        };
        let value = value.strip_prefix(b" ").unwrap_or(value);
        match name {
            b"data" => {
                if !self.has_data {
                    self.has_data = true;
                    self.data.clear();
                    pending.data = Some(value);
                } else {
                    if let Some(p) = pending.data.take() {
                        self.data.clear();
                        self.data.extend_from_slice(p);
                    }
                    if self.data.len() + 1 + value.len() > self.max_event_bytes {
                        return Err(DecodeError::LineTooLong {
                            limit: self.max_event_bytes,
                        });
                    }
                    self.data.push(b'\n');
                    self.data.extend_from_slice(value);
                }
            }
            b"event" => {
                pending.event = Some(value);
                self.has_event = true;
            }
            _ => {} // id, retry and unknown fields are ignored
        }
        Ok(false)
    }

    #[inline]
    fn dispatch<F>(&mut self, pending: Pending<'_>, on_event: &mut F) -> Result<(), DecodeError>
    where
        F: FnMut(SseEvent<'_>) -> Result<(), DecodeError> + ?Sized,
    {
        let data = pending.data.unwrap_or(&self.data);
        let event = if self.has_event && self.names {
            std::str::from_utf8(pending.event.unwrap_or(&self.event)).ok()
        } else {
            None
        };
        let result = on_event(SseEvent { event, data });
        self.has_data = false;
        self.data.clear();
        self.has_event = false;
        self.event.clear();
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    type Ev = (Option<String>, Vec<u8>);

    fn frame_chunks(chunks: &[&[u8]], max: usize) -> Result<Vec<Ev>, DecodeError> {
        let mut f = SseFramer::new(max);
        let mut out = Vec::new();
        let mut cb = |e: SseEvent<'_>| {
            out.push((e.event.map(str::to_owned), e.data.to_vec()));
            Ok(())
        };
        for c in chunks {
            f.feed(c, &mut cb)?;
        }
        f.finish(&mut cb)?;
        Ok(out)
    }

    fn frame(body: &[u8]) -> Vec<Ev> {
        frame_chunks(&[body], 1 << 20).unwrap()
    }

    fn ev(event: Option<&str>, data: &str) -> Ev {
        (event.map(str::to_owned), data.as_bytes().to_vec())
    }

    #[test]
    fn line_endings_and_data_prefixes() {
        let body = b"data: a\n\ndata:b\r\n\r\ndata: c\r\rdata:  d\n\n";
        assert_eq!(
            frame(body),
            vec![ev(None, "a"), ev(None, "b"), ev(None, "c"), ev(None, " d")]
        );
    }

    #[test]
    fn multi_line_data_comments_event_id_retry() {
        let body = b": OPENROUTER PROCESSING\n\nevent: message_start\nid: 7\nretry: 100\ndata: {\"a\":\ndata: 1}\n\n";
        assert_eq!(frame(body), vec![ev(Some("message_start"), "{\"a\":\n1}")]);
    }

    #[test]
    fn bom_is_dropped_even_when_split() {
        let body = b"\xEF\xBB\xBFdata: x\n\n";
        assert_eq!(frame(body), vec![ev(None, "x")]);
        let split = frame_chunks(&[b"\xEF", b"\xBB", b"\xBFdata: x\n", b"\n"], 100).unwrap();
        assert_eq!(split, vec![ev(None, "x")]);
        // Only a leading BOM is dropped.
        assert_eq!(
            frame(b"data: \xEF\xBB\xBFx\n\n"),
            vec![(None, b"\xEF\xBB\xBFx".to_vec())]
        );
    }

    #[test]
    fn cr_at_chunk_end_then_lf() {
        let got = frame_chunks(&[b"data: a\r", b"\n\r", b"\ndata: b\r", b"\r"], 100).unwrap();
        assert_eq!(got, vec![ev(None, "a"), ev(None, "b")]);
    }

    #[test]
    fn empty_data_and_no_colon_lines() {
        // `data` without colon is a data field with an empty value.
        assert_eq!(frame(b"data\n\n"), vec![ev(None, "")]);
        assert_eq!(frame(b"data:\ndata:\n\n"), vec![ev(None, "\n")]);
        // No data: no dispatch, and the event type is reset.
        assert_eq!(frame(b"event: x\n\ndata: y\n\n"), vec![ev(None, "y")]);
    }

    #[test]
    fn finish_flushes_unterminated_event() {
        assert_eq!(frame(b"data: [DONE]"), vec![ev(None, "[DONE]")]);
        assert_eq!(frame(b"data: a\n"), vec![ev(None, "a")]);
        assert_eq!(frame(b""), vec![]);
        assert_eq!(frame(b"\xEF\xBB"), vec![]);
    }

    #[test]
    fn cap_on_line_and_event() {
        let long = format!("data: {}\n\n", "x".repeat(200));
        assert_eq!(
            frame_chunks(&[long.as_bytes()], 100),
            Err(DecodeError::LineTooLong { limit: 100 })
        );
        let (a, b) = long.as_bytes().split_at(50);
        assert_eq!(
            frame_chunks(&[a, b], 100),
            Err(DecodeError::LineTooLong { limit: 100 })
        );
        let many = "data: xxxxxxxxxx\n".repeat(20) + "\n";
        assert_eq!(
            frame_chunks(&[many.as_bytes()], 100),
            Err(DecodeError::LineTooLong { limit: 100 })
        );
    }

    #[test]
    fn single_line_data_is_borrowed_from_the_chunk() {
        let body = b"data: hello\n\n";
        let mut f = SseFramer::new(100);
        let mut ptr = std::ptr::null();
        // The first bytes of a stream are held back to check for a BOM.
        f.feed(b": hi\n", &mut |_| Ok(())).unwrap();
        f.feed(body, &mut |e| {
            ptr = e.data.as_ptr();
            Ok(())
        })
        .unwrap();
        assert_eq!(ptr, body[6..].as_ptr());
    }

    #[test]
    fn data_only_framer_gives_the_same_data_without_names() {
        let body = b"event: a\ndata: 1\n\nevent: b\r\ndata: 2\r\n\r\ndata: 3\n\n";
        let named = frame(body);
        for size in [1, 3, body.len()] {
            let mut f = SseFramer::data_only(100);
            let mut got = Vec::new();
            let mut cb = |e: SseEvent<'_>| {
                got.push((e.event.map(str::to_owned), e.data.to_vec()));
                Ok(())
            };
            for c in body.chunks(size) {
                f.feed(c, &mut cb).unwrap();
            }
            f.finish(&mut cb).unwrap();
            let want: Vec<Ev> = named.iter().map(|(_, d)| (None, d.clone())).collect();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn between_events_only_at_a_fresh_line_with_no_field_pending() {
        let mut f = SseFramer::new(100);
        assert!(!f.between_events(), "the stream start is not read yet");
        let mut n = 0;
        let mut count = |_: SseEvent<'_>| {
            n += 1;
            Ok(())
        };
        let body = b"event: a\ndata: x\n\ndata: y\n\n";
        let first = f.feed_event(body, &mut count).unwrap();
        assert_eq!(first, b"event: a\ndata: x\n\n".len());
        assert!(f.between_events());
        f.feed(b"event: b\n", &mut count).unwrap();
        assert!(!f.between_events(), "an event: field is pending");
        f.feed(b"data: z", &mut count).unwrap();
        assert!(!f.between_events(), "a line is pending");
        f.feed(b"\n\r", &mut count).unwrap();
        assert!(!f.between_events(), "a CR whose LF may follow");
        f.feed(b"\n", &mut count).unwrap();
        assert!(f.between_events());
        assert_eq!(n, 2);
    }

    #[test]
    fn callback_error_stops_framing() {
        let mut f = SseFramer::new(100);
        let mut n = 0;
        let r = f.feed(b"data: a\n\ndata: b\n\n", &mut |_| {
            n += 1;
            Err(DecodeError::LineTooLong { limit: 1 })
        });
        assert!(r.is_err());
        assert_eq!(n, 1);
    }

    fn arb_stream() -> impl Strategy<Value = Vec<u8>> {
        let field = prop_oneof![
            "[a-z{}\":, \\[\\]é]{0,12}".prop_map(|v| format!("data: {v}")),
            "[a-z]{0,6}".prop_map(|v| format!("data:{v}")),
            "[a-z._]{1,10}".prop_map(|v| format!("event: {v}")),
            Just(": comment".to_owned()),
            Just("id: 1".to_owned()),
            Just("retry: 5".to_owned()),
            Just(String::new()),
        ];
        let eol = prop_oneof![Just("\n"), Just("\r\n"), Just("\r")];
        (
            any::<bool>(),
            proptest::collection::vec((field, eol), 0..24),
        )
            .prop_map(|(bom, lines)| {
                let mut s = if bom {
                    "\u{feff}".to_owned()
                } else {
                    String::new()
                };
                for (l, e) in lines {
                    s.push_str(&l);
                    s.push_str(e);
                }
                s.into_bytes()
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn any_chunking_gives_the_same_events(
            body in arb_stream(),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
        ) {
            let whole = frame(&body);
            let mut points: Vec<usize> = cuts.iter().map(|c| c.index(body.len() + 1)).collect();
            points.sort_unstable();
            let mut chunks = Vec::new();
            let mut last = 0;
            for p in points {
                chunks.push(&body[last..p]);
                last = p;
            }
            chunks.push(&body[last..]);
            prop_assert_eq!(&frame_chunks(&chunks, 1 << 20).unwrap(), &whole);
            let bytes: Vec<&[u8]> = body.chunks(1).collect();
            prop_assert_eq!(&frame_chunks(&bytes, 1 << 20).unwrap(), &whole);
        }

        /// `feed_event` frames through one event at a time, never stalls, and gives
        /// the events of `feed`; between two events the framer says it stands between
        /// events, and framing again from there gives the same events.
        #[test]
        fn event_at_a_time_gives_the_same_events(
            body in arb_stream(),
            cut in any::<prop::sample::Index>(),
        ) {
            let whole = frame(&body);
            let at = cut.index(body.len() + 1);
            let mut f = SseFramer::new(1 << 20);
            let mut out: Vec<Ev> = Vec::new();
            for chunk in [&body[..at], &body[at..]] {
                let mut rest = chunk;
                while !rest.is_empty() {
                    let before = out.len();
                    let n = f
                        .feed_event(rest, &mut |e| {
                            out.push((e.event.map(str::to_owned), e.data.to_vec()));
                            Ok(())
                        })
                        .unwrap();
                    prop_assert!(n > 0 && n <= rest.len());
                    prop_assert!(out.len() - before <= 1);
                    if out.len() > before && n < rest.len() {
                        // Just after a blank line that ended an event: a new one starts,
                        // unless that blank line was a CR whose LF may follow.
                        let cr = rest[n - 1] == b'\r';
                        prop_assert_eq!(f.between_events(), !cr || rest[n] != b'\n');
                    }
                    rest = &rest[n..];
                }
            }
            f.finish(&mut |e| {
                out.push((e.event.map(str::to_owned), e.data.to_vec()));
                Ok(())
            })
            .unwrap();
            prop_assert_eq!(out, whole);
        }
    }
}

//! Helpers shared by the codec integration tests (the one helper module): decode a body
//! with any chunking and summarise the events so chunkings can be compared; fixtures
//! and chunked decoding ([`chunked`]); generated stream pieces ([`pieces`]).
#![allow(dead_code)]

pub(crate) mod chunked;
pub(crate) mod pieces;

#[allow(unused_imports)] // not every test binary uses every helper
pub(crate) use chunked::*;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use llmchain::provider::{Codec, DecodeOutcome, DecoderConfig, StreamEvent};

/// What the events of a decode add up to (independent of chunking).
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct EventSummary {
    pub text: BTreeMap<usize, String>,
    pub reasoning: BTreeMap<usize, String>,
    pub started: Vec<(u32, Option<String>, String)>,
    pub arguments: BTreeMap<u32, String>,
    pub finished: Vec<u32>,
    pub stops: Vec<String>,
    pub errors: Vec<(String, String)>,
    pub usage_events: usize,
}

impl EventSummary {
    pub(crate) fn add(&mut self, e: StreamEvent<'_>) {
        match e {
            StreamEvent::TextDelta { index, text } => {
                self.text.entry(index).or_default().push_str(&text)
            }
            StreamEvent::ReasoningDelta { index, text } => {
                self.reasoning.entry(index).or_default().push_str(&text)
            }
            StreamEvent::ReasoningSignature { .. } => {}
            StreamEvent::ToolCallStarted {
                index,
                call_id,
                name,
            } => self
                .started
                .push((index, call_id.map(|c| c.into_owned()), name.into_owned())),
            StreamEvent::ToolCallArguments { index, fragment } => {
                self.arguments.entry(index).or_default().push_str(&fragment)
            }
            StreamEvent::ToolCallFinished { index } => self.finished.push(index),
            StreamEvent::Usage(_) => self.usage_events += 1,
            StreamEvent::Stop { reason, raw } => self.stops.push(format!("{reason:?}:{raw}")),
            StreamEvent::Error { kind, message } => {
                self.errors.push((kind.into_owned(), message.into_owned()))
            }
            // A kind added later must be summarised here before its tests can pass.
            other => panic!("an event kind the summary does not know: {other:?}"),
        }
    }
}

/// Streams `body` through the codec's decoder cut at `cuts` (sorted byte offsets).
pub(crate) fn stream_with_cuts(
    codec: &dyn Codec,
    body: &[u8],
    cuts: &[usize],
) -> (Result<DecodeOutcome, String>, EventSummary) {
    stream_with_cuts_config(codec, body, cuts, DecoderConfig::default())
}

/// [`stream_with_cuts`] with a decoder configuration.
pub(crate) fn stream_with_cuts_config(
    codec: &dyn Codec,
    body: &[u8],
    cuts: &[usize],
    config: DecoderConfig,
) -> (Result<DecodeOutcome, String>, EventSummary) {
    let mut dec = codec.stream_decoder(config);
    let mut summary = EventSummary::default();
    let mut last = 0;
    let mut bounds: Vec<usize> = cuts.iter().copied().filter(|&c| c <= body.len()).collect();
    bounds.sort_unstable();
    bounds.push(body.len());
    for b in bounds {
        if let Err(e) = dec.feed(&body[last..b], &mut |e| summary.add(e)) {
            return (Err(e.to_string()), summary);
        }
        last = b;
    }
    let out = dec
        .finish(&mut |e| summary.add(e))
        .map_err(|e| e.to_string());
    (out, summary)
}

/// Decodes `body` whole (where a decoder takes what it can in bulk), one byte at a time
/// (never in bulk) and cut at `cuts`; the three must give the same result and events.
/// Returns the whole-body decode, or what differed (for `prop_assert`-style tests).
pub(crate) fn decode_three_ways(
    codec: &dyn Codec,
    body: &[u8],
    cuts: &[usize],
    config: DecoderConfig,
) -> Result<(Result<DecodeOutcome, String>, EventSummary), String> {
    let whole = stream_with_cuts_config(codec, body, &[], config);
    let bytes = stream_with_cuts_config(codec, body, &one_byte_cuts(body), config);
    let mixed = stream_with_cuts_config(codec, body, cuts, config);
    if whole != bytes {
        return Err(format!("whole {whole:?}\n1-byte {bytes:?}"));
    }
    if whole != mixed {
        return Err(format!("whole {whole:?}\ncut at {cuts:?}: {mixed:?}"));
    }
    Ok(whole)
}

pub(crate) fn one_byte_cuts(body: &[u8]) -> Vec<usize> {
    (1..body.len()).collect()
}

pub(crate) fn fixtures(dir: &str) -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir);
    let mut v: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), p))
        .collect();
    v.sort();
    v
}

pub(crate) fn read(dir: &str, name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(dir)
            .join(name),
    )
    .unwrap()
}

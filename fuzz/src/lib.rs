//! The one driver of llmchain's fuzz targets (`fuzz_targets/*.rs`, each a thin
//! `fuzz_target!` over a function here or its own checks).
//!
//! Every stream decoder runs through [`stream_decoder`]: the first input byte picks a
//! cut, the rest is the body, decoded whole, split at the cut, a byte at a time, and
//! with fragments joined. All must give the same outcome and the same text and
//! arguments (compared concatenated: joining changes how they are cut, never what they
//! say). Any panic, hang or unbounded allocation is a bug.

mod fragments;
mod schemas;

use std::collections::BTreeMap;

pub use fragments::fragments;
pub use schemas::{schema_from, schema_rewrites};
use llmchain::message::MessageStatus;
use llmchain::provider::{DecoderConfig, Format, StreamEvent};

/// The argument cap of every fuzzed decoder: small, so hostile input that could grow a
/// call without bound is caught.
pub const MAX_ARGUMENT_BYTES: usize = 1024;

/// What one decode of a body gave: its outcome, then every event (arguments and text
/// concatenated per index, other events in order).
type Decoded = (Result<String, String>, Vec<String>);

fn decode(format: Format, chunks: &[&[u8]], join: bool) -> Decoded {
    let config = DecoderConfig {
        max_argument_bytes: MAX_ARGUMENT_BYTES,
        max_line_bytes: 8192,
        join_fragments: join,
    };
    let mut dec = format.codec().stream_decoder(config);
    let mut events = Vec::new();
    let mut args = BTreeMap::<u32, String>::new();
    let mut text = BTreeMap::<usize, String>::new();
    let mut on = |e: StreamEvent<'_>| match e {
        StreamEvent::ToolCallArguments { index, fragment } => {
            args.entry(index).or_default().push_str(&fragment)
        }
        StreamEvent::TextDelta { index, text: t }
        | StreamEvent::ReasoningDelta { index, text: t } => {
            text.entry(index).or_default().push_str(&t)
        }
        other => events.push(format!("{other:?}")),
    };
    for c in chunks {
        if let Err(e) = dec.feed(c, &mut on) {
            return (Err(e.to_string()), events);
        }
    }
    let out = dec.finish(&mut on);
    for a in args.values() {
        assert!(a.len() <= MAX_ARGUMENT_BYTES, "the argument cap held");
    }
    if let Ok(o) = &out {
        // Reports of any outcome are well-formed; a complete message's calls are
        // complete, or reported invalid.
        let _ = o.report();
        assert!(
            o.message.status != MessageStatus::Complete
                || o.message.tool_calls.iter().all(|c| c.is_complete()
                    || o.invalid_tool_calls
                        .iter()
                        .any(|i| i.position as u32 == c.index.unwrap_or(u32::MAX)))
        );
    }
    events.push(format!("{args:?}{text:?}"));
    (
        out.map(|o| format!("{o:?}")).map_err(|e| e.to_string()),
        events,
    )
}

/// Runs one fuzz input against `format`'s stream decoder (and its whole-response
/// decoder, which must not panic either).
pub fn stream_decoder(format: Format, data: &[u8]) {
    let Some((&cut, body)) = data.split_first() else {
        return;
    };
    let at = usize::from(cut).min(body.len());
    let whole = decode(format, &[body], false);
    assert_eq!(
        whole,
        decode(format, &[&body[..at], &body[at..]], false),
        "split at {at}"
    );
    let bytes: Vec<&[u8]> = body.chunks(1).collect();
    assert_eq!(whole, decode(format, &bytes, false), "byte by byte");
    assert_eq!(whole, decode(format, &[body], true), "fragments joined");
    assert_eq!(
        whole,
        decode(format, &[&body[..at], &body[at..]], true),
        "joined, split at {at}"
    );
    let _ = format.codec().decode_response(
        body,
        DecoderConfig {
            max_argument_bytes: MAX_ARGUMENT_BYTES,
            max_line_bytes: 8192,
            join_fragments: false,
        },
    );
}

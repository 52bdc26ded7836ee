//! Shared driver of the provider-decoder fuzz targets.
//!
//! The first byte of the input picks a chunk size; the rest is the body. Each target
//! decodes the body whole and chunked and checks that both give the same outcome (the
//! decoders' central promise), and runs the non-streaming decoder too. Any panic, hang
//! or unbounded allocation is a bug.

use llmchain::provider::{Codec, DecodeError, DecodeOutcome, DecoderConfig, StreamEvent};

fn config() -> DecoderConfig {
    DecoderConfig {
        max_argument_bytes: 4096,
        max_line_bytes: 1 << 16,
        // Events are compared one by one across chunkings.
        join_fragments: false,
    }
}

fn stream(codec: &dyn Codec, body: &[u8], size: usize) -> (Vec<String>, Result<DecodeOutcome, DecodeError>) {
    let mut events = Vec::new();
    let mut d = codec.stream_decoder(config());
    let mut on = |e: StreamEvent<'_>| events.push(format!("{e:?}"));
    for chunk in body.chunks(size.max(1)) {
        if let Err(e) = d.feed(chunk, &mut on) {
            return (events, Err(e));
        }
    }
    let out = d.finish(&mut on);
    (events, out)
}

/// Runs one fuzz input against `codec`.
pub fn run(codec: &dyn Codec, data: &[u8]) {
    let Some((&first, body)) = data.split_first() else {
        return;
    };
    let size = usize::from(first % 32) + 1;
    let whole = stream(codec, body, body.len());
    let chunked = stream(codec, body, size);
    assert_eq!(whole, chunked, "chunking changed the result (chunk size {size})");
    let _ = codec.decode_response(body, config());
    if let Ok(out) = &whole.1 {
        // Reports and messages of any outcome are well-formed.
        let _ = out.report();
        assert!(out.message.status != llmchain::message::MessageStatus::Complete
            || out.message.tool_calls.iter().all(|c| c.is_complete()
                || out.invalid_tool_calls.iter().any(|i| i.position as u32 == c.index.unwrap_or(u32::MAX))));
    }
}

//! Arbitrary bytes as the captured body of `llmchain decode`: the first byte picks the
//! format (mod the number of formats) and a chunk size; `Codec::decode_body` (stream or whole document, as
//! the CLI calls it) never panics, gives the same result fed whole and chunked, and its
//! report serializes. `decode_response` is run on every body too, which is the only
//! fuzzing the non-streaming OpenAI Chat and Responses decoders get.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llmchain::provider::{DecoderConfig, Format};

fn config() -> DecoderConfig {
    DecoderConfig {
        max_argument_bytes: 4096,
        max_line_bytes: 1 << 16,
        // Events are compared one by one across chunkings.
        join_fragments: false,
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, body)) = data.split_first() else {
        return;
    };
    let format = Format::ALL[usize::from(first) % Format::ALL.len()];
    let chunk = usize::from(first / 5 % 32) + 1;
    let codec = format.codec();
    let whole = codec.decode_body(body, 0, config());
    let chunked = codec.decode_body(body, chunk, config());
    assert_eq!(
        whole, chunked,
        "{format}: chunk size {chunk} changed the result"
    );
    match &whole {
        Ok(out) => {
            serde_json::to_string(&out.report()).expect("a report serializes");
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    if let Ok(out) = codec.decode_response(body, config()) {
        serde_json::to_string(&out.report()).expect("a report serializes");
    }
});

//! The Anthropic decoder's byte-level paths (a canonical `input_json_delta` event read
//! by a strict scan, and runs of such events taken in bulk without line framing) give
//! the same events, outcome and errors as the full path on generated streams that mix
//! them with every variant that must leave them.
//!
//! Feeding one byte at a time never offers the bulk path more than one byte, so the
//! 1-byte decode is the framed path; a whole-body decode takes every run in bulk; random
//! chunkings mix the two.

mod codec_support;

use codec_support::pieces::{Piece, piece};
use codec_support::*;
use llmchain::provider::{Codec, DecoderConfig, Format};
use proptest::prelude::*;

fn anthropic() -> &'static dyn Codec {
    Format::ANTHROPIC.codec()
}

fn event(name: &str, data: &str) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// Writes a stream: block 0 is text, blocks 1 and 2 are tool calls, and fragments for
/// block 3 name a block that was never started.
fn stream(pieces: &[Piece]) -> Vec<u8> {
    let mut s = event(
        "message_start",
        // Short opening events, so that a line cap can fall among the fragment lines.
        r#"{"type":"message_start","message":{"id":"m","role":"assistant","content":[],"usage":{"input_tokens":5}}}"#,
    );
    s.push_str(&event(
        "content_block_start",
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
    ));
    for i in 1..3 {
        s.push_str(&event(
            "content_block_start",
            &format!(
                r#"{{"type":"content_block_start","index":{i},"content_block":{{"type":"tool_use","id":"t{i}","name":"f"}}}}"#
            ),
        ));
    }
    for p in pieces {
        match p {
            Piece::Fragment {
                index,
                text,
                variant,
            } => {
                let lit = serde_json::to_string(text).unwrap();
                let data = format!(
                    r#"{{"type":"content_block_delta","index":{index},"delta":{{"type":"input_json_delta","partial_json":{lit}}}}}"#
                );
                s.push_str(&match variant {
                    0..=4 => event("content_block_delta", &data),
                    5 => format!("data: {data}\n\n"),
                    6 => format!("event: content_block_delta\r\ndata: {data}\r\n\r\n"),
                    7 => format!("event: content_block_delta\ndata:{data}\n\n"),
                    8 => format!("event: content_block_delta\ndata: {data} \n\n"),
                    // Spaces in the envelope: the full path only.
                    _ => event(
                        "content_block_delta",
                        &format!(
                            r#"{{"type": "content_block_delta", "index": {index}, "delta": {{"type": "input_json_delta", "partial_json": {lit}}}}}"#
                        ),
                    ),
                });
            }
            Piece::Noise(0) => s.push_str(&event("ping", r#"{"type":"ping"}"#)),
            Piece::Noise(1) => s.push_str(": keep-alive\n\n"),
            Piece::Noise(_) => s.push('\n'),
        }
    }
    for i in 0..3 {
        s.push_str(&event(
            "content_block_stop",
            &format!(r#"{{"type":"content_block_stop","index":{i}}}"#),
        ));
    }
    s.push_str(&event(
        "message_delta",
        r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}"#,
    ));
    s.push_str(&event("message_stop", r#"{"type":"message_stop"}"#));
    s.into_bytes()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn bulk_and_framed_paths_agree_for_any_chunking(
        pieces in proptest::collection::vec(piece(4, 10), 0..60),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let body = stream(&pieces);
        let cuts: Vec<usize> = cuts.iter().map(|c| c.index(body.len() + 1)).collect();
        let (whole, ew) = decode_three_ways(anthropic(), &body, &cuts, DecoderConfig::default())
            .map_err(TestCaseError::fail)?;
        prop_assert!(whole.is_ok(), "{:?}", whole);
        // The tool blocks' fragments add up to each call's streamed text.
        let mut expected = [String::new(), String::new()];
        for p in &pieces {
            if let Piece::Fragment { index: i @ 1..=2, text, .. } = p {
                expected[usize::from(*i) - 1].push_str(text);
            }
        }
        for (pos, text) in expected.iter().enumerate() {
            let got = ew.arguments.get(&(pos as u32)).map_or("", String::as_str);
            prop_assert_eq!(got, text.as_str(), "call {}", pos);
        }
    }

    #[test]
    fn caps_fail_the_same_for_any_chunking(
        pieces in proptest::collection::vec(piece(4, 10), 1..40),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
        line in any::<prop::sample::Index>(),
        args in 0usize..64,
    ) {
        let body = stream(&pieces);
        let cuts: Vec<usize> = cuts.iter().map(|c| c.index(body.len() + 1)).collect();
        // A line cap between the fragment lines' lengths and the longest line.
        let hi = body.split(|&b| b == b'\n').map(<[u8]>::len).max().unwrap_or(90);
        let line = 90 + line.index(hi.saturating_sub(90) + 1);
        for config in [
            DecoderConfig { max_line_bytes: line, ..DecoderConfig::default() },
            DecoderConfig { max_argument_bytes: args, ..DecoderConfig::default() },
        ] {
            // Errors included: all three chunkings fail the same way, or none does.
            let _same = decode_three_ways(anthropic(), &body, &cuts, config).map_err(TestCaseError::fail)?;
        }
    }
}

//! The OpenAI Chat decoder's byte-level fast paths (a fragment-only chunk recognised by
//! its exact shape, and runs of such events taken in bulk without line framing) give
//! the same events, outcome and errors as the full path on generated streams that mix
//! them with everything that must leave them: other shapes, line-end and field
//! variants, escapes and non-ASCII in fragments, interleaved calls, caps.
//!
//! Feeding one byte at a time never offers the bulk path more than one byte, so the
//! 1-byte decode is the framed path; a whole-body decode takes every run in bulk; random
//! chunkings mix the two.

mod codec_support;

use codec_support::pieces::{Piece, piece};
use codec_support::*;
use llmchain::provider::{Codec, DecoderConfig, Format};
use proptest::prelude::*;

fn chat() -> &'static dyn Codec {
    Format::OPENAI_CHAT.codec()
}

const HEAD: &str = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":"#;

/// Writes a stream: three calls opened, the pieces, a finish chunk and `[DONE]`. With
/// `obfuscate`, fragment chunks close with an `obfuscation` string that differs from
/// one to the next, as OpenAI's do by default.
fn stream(pieces: &[Piece], obfuscate: bool) -> Vec<u8> {
    let mut s = String::new();
    // Each call opened by its own event, shorter than the fragment events, so that a
    // line cap can fall between the lengths of the fragment events.
    for i in 0..3 {
        s.push_str(&format!(
            "data: {HEAD}[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":{i},\"id\":\"c{i}\",\"function\":{{\"name\":\"f\",\"arguments\":\"\"}}}}]}}}}]}}\n\n"
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
                let mut body = format!(
                    r#"[{{"index":0,"delta":{{"tool_calls":[{{"index":{index},"function":{{"arguments":{lit}}}}}]}},"logprobs":null,"finish_reason":null}}]}}"#
                );
                if obfuscate && *variant < 11 {
                    body.pop();
                    let n = text.len() % 7;
                    body.push_str(&format!(r#","obfuscation":"{}"}}"#, "Zq9".repeat(n)));
                }
                let event = match variant {
                    // The usual shape (most events, so that runs form).
                    0..=5 => format!("data: {HEAD}{body}\n\n"),
                    // Another prefix: a new shape to learn.
                    6 => format!("data: {}{body}\n\n", HEAD.replace("gpt-4o", "gpt-4o-mini")),
                    7 => format!("data: {HEAD}{body}\r\n\r\n"),
                    8 => format!("data:{HEAD}{body}\n\n"),
                    9 => format!("data: {HEAD}{body} \n\n"),
                    10 => format!("event: chunk\ndata: {HEAD}{body}\n\n"),
                    // OpenAI's `obfuscation`: a string that differs in every chunk
                    // (the fast path, never a bulk run), after a null `usage` or not;
                    // with an escape, the full path only.
                    11..=13 => {
                        let value = match variant {
                            11 => format!("\"o{}\"", text.len()),
                            12 => format!("\"{}\"", "x".repeat(text.len() % 5)),
                            _ => r#""a\"b""#.to_owned(),
                        };
                        let usage = if *variant == 12 {
                            r#","usage":null"#
                        } else {
                            ""
                        };
                        let body = &body[..body.len() - 1];
                        format!("data: {HEAD}{body}{usage},\"obfuscation\":{value}}}\n\n")
                    }
                    // vLLM: a null `stop_reason` in every choice.
                    14 => format!(
                        "data: {HEAD}{}\n\n",
                        body.replacen(
                            r#""finish_reason":null"#,
                            r#""finish_reason":null,"stop_reason":null"#,
                            1
                        )
                    ),
                    // A gateway's role in every delta.
                    15 => format!(
                        "data: {HEAD}{}\n\n",
                        body.replacen(r#""delta":{"#, r#""delta":{"role":"assistant","#, 1)
                    ),
                    // Spaces inside the JSON: the full path only.
                    _ => format!("data: {}\n\n", HEAD.replace(":", ": ") + &body),
                };
                s.push_str(&event);
            }
            Piece::Noise(0) => s.push_str(": keep-alive\n\n"),
            Piece::Noise(1) => s.push_str("id: 7\n"),
            Piece::Noise(_) => s.push('\n'),
        }
    }
    s.push_str(&format!(
        "data: {HEAD}[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"tool_calls\"}}]}}\n\ndata: [DONE]\n\n"
    ));
    s.into_bytes()
}

/// The argument text each call should end with.
fn expected_arguments(pieces: &[Piece]) -> [String; 3] {
    let mut out: [String; 3] = Default::default();
    for p in pieces {
        if let Piece::Fragment { index, text, .. } = p {
            out[*index as usize].push_str(text);
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn bulk_and_framed_paths_agree_for_any_chunking(
        pieces in proptest::collection::vec(piece(3, 17), 0..60),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
        obfuscate in any::<bool>(),
    ) {
        let body = stream(&pieces, obfuscate);
        let cuts: Vec<usize> = cuts.iter().map(|c| c.index(body.len() + 1)).collect();
        let (whole, ew) = decode_three_ways(chat(), &body, &cuts, DecoderConfig::default())
            .map_err(TestCaseError::fail)?;
        let outcome = whole.unwrap();
        prop_assert_eq!(outcome.message.tool_calls.len(), 3);
        // The streamed fragments add up to each call's text (the outcome holds it
        // parsed, or reported invalid: the codec tests cover that).
        for (i, text) in expected_arguments(&pieces).iter().enumerate() {
            let got = ew.arguments.get(&(i as u32)).map_or("", String::as_str);
            prop_assert_eq!(got, text.as_str(), "call {}", i);
        }
    }

    #[test]
    fn caps_fail_the_same_for_any_chunking(
        pieces in proptest::collection::vec(piece(3, 17), 1..40),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
        line in any::<prop::sample::Index>(),
        args in 0usize..64,
        obfuscate in any::<bool>(),
    ) {
        let body = stream(&pieces, obfuscate);
        // A line cap between the shortest and the longest line of the body.
        let lens: Vec<usize> = body.split(|&b| b == b'\n').map(<[u8]>::len).collect();
        let (lo, hi) = (150, lens.iter().copied().max().unwrap_or(150));
        let line = lo + line.index(hi.saturating_sub(lo) + 1);
        let cuts: Vec<usize> = cuts.iter().map(|c| c.index(body.len() + 1)).collect();
        for config in [
            DecoderConfig { max_line_bytes: line, ..DecoderConfig::default() },
            DecoderConfig { max_argument_bytes: args, ..DecoderConfig::default() },
        ] {
            // Errors included: all three chunkings fail the same way, or none does.
            let _same = decode_three_ways(chat(), &body, &cuts, config).map_err(TestCaseError::fail)?;
        }
    }
}

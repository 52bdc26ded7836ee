//! One turn with many calls, in every format: decode a stream carrying N calls, and
//! encode a conversation whose one assistant message makes N calls answered by one tool
//! message. N = 10⁴ and 10⁵: each path must be linear (10× the calls at most ~12× the
//! time). Hostile servers send such turns; lookups by list made them quadratic. Decoding
//! reports bytes per second, so the formats compare per byte.
//!
//! `cargo bench -p llmchain --bench many_calls`

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use llmchain::conversation::Conversation;
use llmchain::message::{Message, ToolCall, ToolResult};
use llmchain::provider::render::{ResponseScript, render_stream};
use llmchain::provider::{DecoderConfig, Format, RequestOptions, StreamEvent};
use serde_json::json;

const SIZES: [usize; 2] = [10_000, 100_000];

fn stream(format: Format, n: usize) -> Vec<u8> {
    let mut script = ResponseScript::default();
    for i in 0..n {
        script = script.with_call(format!("call_{i}"), "f", format!("{{\"i\":{i}}}"));
    }
    render_stream(format, &script).unwrap()
}

fn conversation(n: usize) -> Conversation {
    let mut c = Conversation::new();
    c.messages.push(Message::user("go"));
    let calls: Vec<ToolCall> = (0..n)
        .map(|i| ToolCall::function(format!("call_{i}"), "f", json!({ "i": i })).unwrap())
        .collect();
    c.messages.push(Message::assistant_with_calls("", calls));
    // Results in reverse order: the encoder must find each one's call.
    let results: Vec<ToolResult> = (0..n)
        .rev()
        .map(|i| ToolResult::text(format!("call_{i}"), "ok").with_name("f"))
        .collect();
    c.messages.push(Message::tool(results));
    c
}

fn bench(c: &mut Criterion) {
    let config = DecoderConfig {
        max_argument_bytes: 64 << 20,
        ..DecoderConfig::default()
    };
    let mut g = c.benchmark_group("many_calls_decode");
    g.sample_size(10);
    for &format in Format::ALL {
        for n in SIZES {
            let body = stream(format, n);
            // Per byte too: every decoder within 1.5x of OpenAI Chat's speed per byte.
            g.throughput(Throughput::Bytes(body.len() as u64));
            g.bench_with_input(BenchmarkId::new(format.as_str(), n), &body, |b, body| {
                b.iter(|| {
                    let mut dec = format.codec().stream_decoder(config);
                    let mut sink = |e: StreamEvent<'_>| {
                        black_box(&e);
                    };
                    for chunk in body.chunks(4096) {
                        dec.feed(chunk, &mut sink).unwrap();
                    }
                    let out = dec.finish(&mut sink).unwrap();
                    assert_eq!(out.message.tool_calls.len(), n);
                })
            });
        }
    }
    g.finish();

    let opts = RequestOptions {
        model: "m".into(),
        ..Default::default()
    };
    let mut g = c.benchmark_group("many_calls_encode");
    g.sample_size(10);
    for n in SIZES {
        let conv = conversation(n);
        for &format in Format::ALL {
            g.bench_with_input(BenchmarkId::new(format.as_str(), n), &conv, |b, conv| {
                b.iter(|| black_box(format.codec().encode(conv, &opts).unwrap()))
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

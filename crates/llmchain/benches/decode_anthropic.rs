//! Anthropic stream decode: one tool call of S bytes of arguments streamed in 8-byte
//! `input_json_delta` fragments (64 KiB, 1 MiB, 8 MiB), from raw SSE bytes to the parsed
//! call. Measured against a baseline decoder in the same run: split lines, deserialize
//! each event with serde_json into borrowed typed structs, `push_str` the fragments,
//! parse once.

use std::borrow::Cow;
use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use llmchain::provider::{AnthropicCodec, Codec, DecoderConfig};
use serde::Deserialize;
use serde_json::{Map, Value};

fn arguments(size: usize) -> String {
    // A realistic "write a file" argument: {"path": "...", "content": "<escaped text>"}.
    let mut s = String::from("{\"path\": \"src/lib.rs\", \"content\": \"");
    let line = "fn main() { println!(\\\"hello\\\"); }\\n";
    while s.len() + line.len() + 2 < size {
        s.push_str(line);
    }
    while s.len() + 2 < size {
        s.push('x');
    }
    s.push_str("\"}");
    s
}

fn stream(size: usize) -> Vec<u8> {
    let args = arguments(size);
    let mut out = String::with_capacity(size / 8 * 150 + 2048);
    out.push_str("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":472,\"output_tokens\":2}}}\n\n");
    out.push_str("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_01\",\"name\":\"write_file\",\"input\":{}}}\n\n");
    let mut i = 0;
    while i < args.len() {
        let mut j = (i + 8).min(args.len());
        while !args.is_char_boundary(j) {
            j += 1;
        }
        let frag = serde_json::to_string(&args[i..j]).unwrap();
        out.push_str("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":");
        out.push_str(&frag);
        out.push_str("}}\n\n");
        i = j;
    }
    out.push_str(
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    );
    out.push_str("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":89}}\n\n");
    out.push_str("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    out.into_bytes()
}

#[derive(Deserialize)]
struct BDelta<'a> {
    #[serde(rename = "type", default, borrow)]
    ty: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    partial_json: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct BEvent<'a> {
    #[serde(rename = "type", borrow)]
    ty: Cow<'a, str>,
    #[serde(default)]
    index: Option<u64>,
    #[serde(default, borrow)]
    delta: Option<BDelta<'a>>,
}

/// The baseline: split lines, serde each event, push_str, parse once.
fn baseline(body: &[u8]) -> Map<String, Value> {
    let text = std::str::from_utf8(body).unwrap();
    let mut args = String::new();
    for line in text.split('\n') {
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        let ev: BEvent<'_> = serde_json::from_str(data).unwrap();
        if ev.ty == "content_block_delta"
            && ev.index == Some(0)
            && let Some(d) = ev.delta
            && d.ty.as_deref() == Some("input_json_delta")
            && let Some(p) = d.partial_json
        {
            args.push_str(&p);
        }
    }
    serde_json::from_str(&args).unwrap()
}

/// Ours: the streaming decoder fed 64 KiB network reads, to the parsed call.
fn ours(body: &[u8]) -> Map<String, Value> {
    let mut d = AnthropicCodec.stream_decoder(DecoderConfig::default());
    let mut sink = |_: llmchain::provider::StreamEvent<'_>| {};
    for chunk in body.chunks(64 * 1024) {
        d.feed(chunk, &mut sink).unwrap();
    }
    let out = d.finish(&mut sink).unwrap();
    let mut m = out.message;
    match m.tool_calls.pop().and_then(|c| c.arguments) {
        Some(llmchain::message::Arguments::Object(o)) => o,
        other => panic!("not parsed: {:?}", other.map(|_| ())),
    }
}

#[path = "support/cpu_time.rs"]
mod cpu_time;
use cpu_time::cpu_ms_per_iter;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("decode_anthropic");
    g.sample_size(10);
    for (label, size) in [("64KiB", 64 << 10), ("1MiB", 1 << 20), ("8MiB", 8 << 20)] {
        let body = stream(size);
        assert_eq!(baseline(&body), ours(&body));
        // Enough runs that the smallest size spans many scheduler ticks.
        let n = (48 << 20) / size as u32;
        if let (Some(base), Some(our)) = (
            cpu_ms_per_iter(n, || {
                black_box(baseline(&body));
            }),
            cpu_ms_per_iter(n, || {
                black_box(ours(&body));
            }),
        ) {
            eprintln!(
                "{label}: CPU time per decode: baseline {base:.2} ms ({:.0} MB/s), ours {our:.2} ms ({:.0} MB/s), {:.2}x",
                body.len() as f64 / base / 1e3,
                body.len() as f64 / our / 1e3,
                base / our
            );
        }
        g.throughput(Throughput::Bytes(body.len() as u64));
        g.bench_with_input(BenchmarkId::new("baseline", label), &body, |b, body| {
            b.iter(|| black_box(baseline(black_box(body))))
        });
        g.bench_with_input(BenchmarkId::new("llmchain", label), &body, |b, body| {
            b.iter(|| black_box(ours(black_box(body))))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

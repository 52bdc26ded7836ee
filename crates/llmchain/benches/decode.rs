//! Streaming decode cost, bytes → parsed call: an OpenAI Chat stream carrying one tool
//! call of S bytes of arguments in 8-byte fragments (~280-byte realistic chunks), at
//! S = 1 KiB (where the per-stream cost weighs: opening and closing chunks, the
//! outcome), 64 KiB, 1 MiB and 8 MiB. Measured beside a **baseline decoder** in the same run:
//! split lines, serde_json each chunk into borrowed typed structs, `push_str` the
//! fragments, parse once.

use std::borrow::Cow;
use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use llmchain::message::Arguments;
use llmchain::provider::{Codec, DecoderConfig, Format, StreamEvent};
use serde::Deserialize;
use serde_json::{Map, Value};

#[path = "support/chat_stream.rs"]
mod chat_stream;
use chat_stream::{arguments, fragments, stream};

// ----- baseline -----

#[derive(Deserialize)]
#[allow(dead_code)]
struct BChunk<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    #[serde(borrow)]
    object: Cow<'a, str>,
    created: u64,
    #[serde(borrow)]
    model: Cow<'a, str>,
    #[serde(borrow, default)]
    system_fingerprint: Option<Cow<'a, str>>,
    #[serde(borrow)]
    choices: Vec<BChoice<'a>>,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct BChoice<'a> {
    index: u32,
    #[serde(borrow)]
    delta: BDelta<'a>,
    #[serde(default)]
    logprobs: Option<Value>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct BDelta<'a> {
    #[serde(borrow, default)]
    role: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<BCall<'a>>>,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct BCall<'a> {
    index: u32,
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    function: Option<BFunction<'a>>,
}

#[derive(Deserialize)]
struct BFunction<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<Cow<'a, str>>,
}

/// The baseline: split lines, deserialize each chunk, push_str, parse once.
fn baseline(body: &[u8]) -> Map<String, Value> {
    let text = std::str::from_utf8(body).unwrap();
    let mut name = String::new();
    let mut args = String::new();
    for line in text.lines() {
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        if data == "[DONE]" {
            break;
        }
        let chunk: BChunk<'_> = serde_json::from_str(data).unwrap();
        for choice in chunk.choices {
            for call in choice.delta.tool_calls.into_iter().flatten() {
                if let Some(f) = call.function {
                    if let Some(n) = f.name {
                        name.push_str(&n);
                    }
                    if let Some(a) = f.arguments {
                        args.push_str(&a);
                    }
                }
            }
        }
    }
    black_box(&name);
    serde_json::from_str(&args).unwrap()
}

/// Ours: the real streaming decoder, fed `chunk` bytes at a time, to the parsed call.
fn ours(codec: &dyn Codec, body: &[u8], chunk: usize) -> Map<String, Value> {
    let config = DecoderConfig {
        max_argument_bytes: 64 << 20,
        ..DecoderConfig::default()
    };
    let mut dec = codec.stream_decoder(config);
    let mut sink = |e: StreamEvent<'_>| {
        black_box(&e);
    };
    for c in body.chunks(chunk) {
        dec.feed(c, &mut sink).unwrap();
    }
    let mut out = dec.finish(&mut sink).unwrap();
    let call = out.message.tool_calls.pop().unwrap();
    assert!(call.is_complete());
    match call.arguments {
        Some(Arguments::Object(m)) => m,
        _ => panic!("not parsed"),
    }
}

#[path = "support/cpu_time.rs"]
mod cpu_time;
use cpu_time::cpu_ms_per_iter;

fn bench(c: &mut Criterion) {
    let chat = Format::OPENAI_CHAT.codec();
    let mut g = c.benchmark_group("decode_openai_chat_1_call_8_byte_fragments");
    for (label, size) in [
        ("1KiB", 1 << 10),
        ("64KiB", 64 << 10),
        ("1MiB", 1 << 20),
        ("8MiB", 8 << 20),
    ] {
        let args = arguments(size);
        let body = stream(&args);
        let expect: Map<String, Value> = serde_json::from_str(&args).unwrap();
        assert_eq!(baseline(&body), expect);
        assert_eq!(ours(chat, &body, body.len()), expect);
        assert_eq!(ours(chat, &body, 16 << 10), expect);
        assert_eq!(ours(chat, &body, 1500), expect);
        eprintln!(
            "{label}: {} chunks, {:.1} MB of SSE, {:.0} bytes/chunk",
            fragments(&args).len() + 3,
            body.len() as f64 / 1e6,
            body.len() as f64 / (fragments(&args).len() + 3) as f64
        );
        let n = match size {
            s if s >= 8 << 20 => 2,
            s if s <= 1 << 10 => 2_000,
            _ => 5,
        };
        if let (Some(base), Some(our)) = (
            cpu_ms_per_iter(n, || {
                black_box(baseline(&body));
            }),
            cpu_ms_per_iter(n, || {
                black_box(ours(chat, &body, 16 << 10));
            }),
        ) {
            eprintln!(
                "{label}: CPU time per decode: baseline {base:.4} ms ({:.0} MB/s), ours {our:.4} ms ({:.0} MB/s), {:.1}x",
                body.len() as f64 / base / 1e3,
                body.len() as f64 / our / 1e3,
                base / our
            );
        }
        g.throughput(Throughput::Bytes(body.len() as u64));
        if size >= 8 << 20 {
            g.sample_size(10);
        } else {
            g.sample_size(20);
        }
        g.bench_with_input(BenchmarkId::new("baseline", label), &body, |b, body| {
            b.iter(|| baseline(black_box(body)))
        });
        g.bench_with_input(
            BenchmarkId::new("ours_whole_body", label),
            &body,
            |b, body| b.iter(|| ours(chat, black_box(body), body.len())),
        );
        g.bench_with_input(
            BenchmarkId::new("ours_16KiB_reads", label),
            &body,
            |b, body| b.iter(|| ours(chat, black_box(body), 16 << 10)),
        );
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! A whole chain turn, the path users run: `LLMChain::run(Mode::Single)` on a
//! `ScriptedModel` replaying an OpenAI Chat stream that carries one `write_file` call
//! of S bytes of arguments in 8-byte fragments, read 16 KiB at a time like a network
//! body. Beside it, in the same run, the two layers below it on the same bytes:
//! - `decoder`: the streaming decoder alone, fed the same 16 KiB reads;
//! - `model_stream`: `ScriptedModel::stream` drained by `collect_stream`.
//!
//! The headline is `turn / decoder`: what the chain adds on top of decoding.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use llmchain::chain::{ChatModel, LLMChain, Mode, ScriptedModel, collect_stream};
use llmchain::conversation::Conversation;
use llmchain::message::{Message, MessageStatus};
use llmchain::provider::{Codec, DecoderConfig, Format, StreamEvent};
use llmchain::tool::{Tool, ToolOutput};
use serde_json::json;

#[path = "support/chat_stream.rs"]
mod chat_stream;
use chat_stream::{arguments, stream};

#[path = "support/cpu_time.rs"]
mod cpu_time;
use cpu_time::cpu_ms_per_iter;

const READ: usize = 16 << 10;

fn decoder(chat: &dyn Codec, body: &[u8]) {
    let mut dec = chat.stream_decoder(DecoderConfig::default());
    let mut sink = |e: StreamEvent<'_>| {
        black_box(&e);
    };
    for c in body.chunks(READ) {
        dec.feed(c, &mut sink).unwrap();
    }
    let out = dec.finish(&mut sink).unwrap();
    assert!(out.message.tool_calls[0].is_complete());
}

fn scripted(body: &Arc<[u8]>) -> ScriptedModel {
    ScriptedModel::new(Format::OPENAI_CHAT)
        .chunk_size(READ)
        .respond_bytes(body.clone())
}

fn model_stream(rt: &tokio::runtime::Runtime, model: ScriptedModel, conv: &Conversation) {
    let out = rt
        .block_on(collect_stream(model.stream(conv), |e| {
            black_box(e);
        }))
        .unwrap();
    assert!(out.message.tool_calls[0].is_complete());
}

fn write_file() -> Tool {
    Tool::builder("write_file")
        .schema(json!({"type": "object", "properties": {
            "path": {"type": "string"}, "content": {"type": "string"}}}))
        .handler(|_, _| async { ToolOutput::text("written") })
        .build()
        .unwrap()
}

async fn chain_for(model: ScriptedModel) -> LLMChain {
    let mut chain = LLMChain::new(Arc::new(model)).with_tool(write_file());
    chain
        .add_message(Message::user("write src/lib.rs"))
        .await
        .unwrap();
    chain
}

fn turn(rt: &tokio::runtime::Runtime, chain: &mut LLMChain) {
    rt.block_on(chain.run(Mode::Single)).unwrap();
    let m = chain.last_message().unwrap();
    assert_eq!(m.status, MessageStatus::Complete);
    assert!(m.tool_calls[0].is_complete());
}

fn bench(c: &mut Criterion) {
    let chat = Format::OPENAI_CHAT.codec();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mut conv = Conversation::new();
    conv.messages.push(Message::user("write src/lib.rs"));
    let mut g = c.benchmark_group("turn_openai_chat_1_call_8_byte_fragments");
    for (label, size) in [
        ("1KiB", 1 << 10),
        ("64KiB", 64 << 10),
        ("1MiB", 1 << 20),
        ("8MiB", 8 << 20),
    ] {
        let body: Arc<[u8]> = stream(&arguments(size)).into();
        let n = match size {
            s if s >= 8 << 20 => 2,
            s if s <= 1 << 10 => 2_000,
            _ => 5,
        };
        let cpu = (
            cpu_ms_per_iter(n, || decoder(chat, &body)),
            cpu_ms_per_iter(n, || model_stream(&rt, scripted(&body), &conv)),
            cpu_ms_per_iter(n, || {
                let mut chain = rt.block_on(chain_for(scripted(&body)));
                turn(&rt, &mut chain)
            }),
        );
        if let (Some(d), Some(m), Some(t)) = cpu {
            eprintln!(
                "{label}: CPU time per turn: decoder {d:.4} ms, model stream {m:.4} ms ({:.2}x), \
                 whole turn {t:.4} ms ({:.2}x the decoder; setup included)",
                m / d,
                t / d
            );
        }
        g.throughput(Throughput::Bytes(body.len() as u64));
        g.sample_size(if size >= 8 << 20 { 10 } else { 20 });
        g.bench_with_input(BenchmarkId::new("decoder", label), &body, |b, body| {
            b.iter(|| decoder(chat, black_box(body)))
        });
        g.bench_with_input(BenchmarkId::new("model_stream", label), &body, |b, body| {
            b.iter_batched(
                || scripted(body),
                |m| model_stream(&rt, m, &conv),
                BatchSize::PerIteration,
            )
        });
        g.bench_with_input(BenchmarkId::new("chain_turn", label), &body, |b, body| {
            b.iter_batched(
                || rt.block_on(chain_for(scripted(body))),
                |mut chain| turn(&rt, &mut chain),
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

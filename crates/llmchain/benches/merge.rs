//! Delta merge cost: one tool call of S bytes of arguments streamed in 8-byte fragments
//! through `MessageDelta`, then `to_message`. The per-fragment cost must not grow with S.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use llmchain::message::{DeltaStatus, MessageDelta, ToolCall};
use std::hint::black_box;

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

fn fragments(args: &str) -> Vec<&str> {
    let mut out = Vec::with_capacity(args.len() / 8 + 1);
    let mut i = 0;
    while i < args.len() {
        let mut j = (i + 8).min(args.len());
        while !args.is_char_boundary(j) {
            j += 1;
        }
        out.push(&args[i..j]);
        i = j;
    }
    out
}

fn bench_merge(c: &mut Criterion) {
    let mut group = c.benchmark_group("delta_merge_8_byte_fragments");
    for size in [1024usize, 64 * 1024, 1024 * 1024] {
        let args = arguments(size);
        let frags = fragments(&args);
        group.throughput(Throughput::Elements(frags.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(size), &frags, |b, frags| {
            b.iter(|| {
                let mut acc = MessageDelta::default();
                acc.merge(MessageDelta::tool_call_fragment(ToolCall {
                    index: Some(0),
                    call_id: Some("call_1".into()),
                    name: Some("write_file".into()),
                    ..Default::default()
                }))
                .unwrap();
                for f in frags {
                    acc.merge(MessageDelta::tool_call_fragment(ToolCall {
                        index: Some(0),
                        arguments: Some((*f).into()),
                        ..Default::default()
                    }))
                    .unwrap();
                }
                acc.merge(MessageDelta::status_fragment(DeltaStatus::Complete))
                    .unwrap();
                black_box(acc.to_message().unwrap())
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_merge);
criterion_main!(benches);

//! Dispatch cost: a batch of 1,000 calls to a no-op tool, with the required-key check
//! and full JSON Schema validation, through `ToolExecutor::execute` (status updates,
//! context, permits, result mapping). Target: under 5 µs per call.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use llmchain::message::ToolCall;
use llmchain::tool::{Tool, ToolExecutor};
use serde_json::json;
use std::hint::black_box;

const BATCH: usize = 1000;

fn executor() -> ToolExecutor {
    let noop = Tool::builder("noop")
        .description("Does nothing.")
        .schema(json!({
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 100},
                "days": {"type": "integer", "minimum": 1, "maximum": 14},
                "unit": {"enum": ["celsius", "fahrenheit"]}
            },
            "required": ["city", "days"],
            "additionalProperties": false
        }))
        .handler(|_, _| async { "ok" })
        .build()
        .expect("valid tool");
    ToolExecutor::new([noop])
        .expect("one tool")
        .with_max_concurrency(BATCH)
        .expect("non-zero")
}

fn calls() -> Vec<ToolCall> {
    (0..BATCH)
        .map(|i| {
            ToolCall::function(
                format!("call_{i}"),
                "noop",
                json!({"city": "Paris", "days": 1 + i % 14, "unit": "celsius"}),
            )
            .expect("valid call")
        })
        .collect()
}

fn dispatch(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let ex = executor();
    let template = calls();
    let mut g = c.benchmark_group("dispatch");
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function("batch_1000_noop_with_schema", |b| {
        b.iter_batched(
            || template.clone(),
            |mut calls| {
                let results = rt.block_on(ex.execute(&mut calls));
                black_box(results)
            },
            criterion::BatchSize::LargeInput,
        );
    });
    g.finish();
}

criterion_group!(benches, dispatch);
criterion_main!(benches);

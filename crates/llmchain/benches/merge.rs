//! Delta merge cost: one tool call of S bytes of arguments streamed in 8-byte fragments
//! through `MessageDelta`, then `to_message`. The per-fragment cost must not grow with S.
//!
//! Each fragment is built inside the timed loop (what a codec does: a `String`, a
//! `ToolCall`, a `MessageDelta`), then merged, as in a real stream. Times are on-CPU
//! time of the benchmark thread, so a busy shared machine does not inflate them.

#![allow(unsafe_code)] // clock_gettime, for the thread's CPU time

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use llmchain::message::{DeltaStatus, MessageDelta, ToolCall};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// On-CPU time of this thread in nanoseconds (`CLOCK_THREAD_CPUTIME_ID`), so figures
/// do not depend on how loaded a shared machine is; `None` where unavailable.
fn thread_cpu_ns() -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// Times `iters` runs of `f` in on-CPU time (wall time when unavailable).
fn cpu_time(iters: u64, mut f: impl FnMut()) -> Duration {
    let wall = Instant::now();
    let start = thread_cpu_ns();
    for _ in 0..iters {
        f();
    }
    match (start, thread_cpu_ns()) {
        (Some(a), Some(b)) => Duration::from_nanos(b.saturating_sub(a)),
        _ => wall.elapsed(),
    }
}

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

#[path = "support/chat_stream.rs"]
mod chat_stream;
use chat_stream::fragments;

fn header() -> MessageDelta {
    MessageDelta::tool_call_fragment(ToolCall {
        index: Some(0),
        call_id: Some("call_1".into()),
        name: Some("write_file".into()),
        ..Default::default()
    })
}

fn fragment(f: &str) -> MessageDelta {
    MessageDelta::tool_call_fragment(ToolCall {
        index: Some(0),
        arguments: Some(f.into()),
        ..Default::default()
    })
}

fn bench_merge(c: &mut Criterion) {
    let mut group = c.benchmark_group("delta_merge_8_byte_fragments");
    for size in [1024usize, 64 * 1024, 1024 * 1024] {
        let args = arguments(size);
        let frags = fragments(&args);
        group.throughput(Throughput::Elements(frags.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(size), &frags, |b, frags| {
            b.iter_custom(|iters| {
                cpu_time(iters, || {
                    let mut acc = MessageDelta::default();
                    acc.merge(header()).unwrap();
                    for f in frags {
                        acc.merge(fragment(f)).unwrap();
                    }
                    acc.merge(MessageDelta::status_fragment(DeltaStatus::Complete))
                        .unwrap();
                    black_box(acc.to_message().unwrap());
                })
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_merge);
criterion_main!(benches);

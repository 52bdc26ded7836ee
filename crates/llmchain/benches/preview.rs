//! Live argument preview cost: 1 MiB of tool-call arguments fed to `ArgumentPreview` in
//! 8-byte fragments, collecting every event. Must stay linear (under 20 ms for 1 MiB).

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use llmchain::provider::preview::ArgumentPreview;
use std::hint::black_box;

fn arguments(size: usize) -> String {
    // A realistic "write a file" argument: {"path": "...", "content": "<escaped text>"}.
    let mut s = String::from("{\"path\": \"src/lib.rs\", \"content\": \"");
    let line = "fn main() { println!(\\\"h\\u00e9llo\\\"); }\\n";
    while s.len() + line.len() + 2 < size {
        s.push_str(line);
    }
    while s.len() + 2 < size {
        s.push('x');
    }
    s.push_str("\"}");
    s
}

fn bench_preview(c: &mut Criterion) {
    let mut group = c.benchmark_group("preview_8_byte_fragments");
    for size in [1024usize, 64 * 1024, 1024 * 1024] {
        let args = arguments(size);
        let frags: Vec<&[u8]> = args.as_bytes().chunks(8).collect();
        group.throughput(Throughput::Elements(frags.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(size), &frags, |b, frags| {
            b.iter(|| {
                let mut p = ArgumentPreview::new();
                let mut events = Vec::new();
                for f in frags {
                    p.feed_bytes(f, &mut events);
                }
                events.extend(p.finish());
                assert!(p.is_done());
                black_box(events)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_preview);
criterion_main!(benches);

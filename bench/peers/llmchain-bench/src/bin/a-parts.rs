//! `a-parts DATA/A_<S>.sse`: where a workload-A stream's time goes, by decoding parts of
//! the body — nothing, the `[DONE]` line alone, the closing chunk, the opening chunk, the
//! opening and closing chunks, those with one whole fragment between, and the whole body.
//! The differences give the per-stream cost of each chunk kind and, with the whole body,
//! the cost per fragment event. Each line is the fastest of SAMPLES (default 300) batches
//! of 2,000 decodes, so the host's noise weighs less than in a median.
//!
//! `ONLY=<part>` runs one part (with `SAMPLES=1` and `SAMPLES=2` under
//! `valgrind --tool=cachegrind`, the difference of the two instruction counts over 4,000
//! is the part's instruction count per decode, which does not move with the host).

use std::time::Instant;

use llmchain::provider::{DecoderConfig, Format, StreamEvent};

/// Fastest time per decode of `body`, in nanoseconds.
fn fastest_ns(body: &[u8], config: DecoderConfig, samples: usize) -> f64 {
    const BATCH: usize = 2_000;
    let mut best = f64::INFINITY;
    for _ in 0..samples {
        let t = Instant::now();
        for _ in 0..BATCH {
            let mut dec = Format::OPENAI_CHAT.codec().stream_decoder(config);
            let mut sink = |_: StreamEvent<'_>| {};
            dec.feed(body, &mut sink).expect("feeds");
            let outcome = dec.finish(&mut sink).expect("finishes");
            std::hint::black_box(&outcome);
        }
        best = best.min(t.elapsed().as_secs_f64() / BATCH as f64);
    }
    best * 1e9
}

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: a-parts DATA/A_<S>.sse");
    let text = std::fs::read_to_string(&path).expect("the body, as text");
    let samples: usize = std::env::var("SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let only = std::env::var("ONLY").ok();
    let config = DecoderConfig {
        max_argument_bytes: 64 << 20,
        ..DecoderConfig::default()
    };
    // Events: the opening chunk, the fragments, the closing chunk, `[DONE]`.
    let events: Vec<&str> = text.split_inclusive("\n\n").collect();
    let n = events.len();
    assert!(n >= 4, "a workload-A body has at least four events");
    let (open, finish, done) = (events[0], events[n - 2], events[n - 1]);
    // One fragment event that carries whole arguments, so that the stream completes.
    let whole = events[1].replace(r#"{\"conten"#, r#"{\"content\":\"x\"}"#);
    let parts: Vec<(&str, String)> = vec![
        ("empty", String::new()),
        ("done", done.to_owned()),
        ("finish+done", [finish, done].concat()),
        ("open", open.to_owned()),
        ("open+finish+done", [open, finish, done].concat()),
        ("open+fragment+finish+done", [open, &whole, finish, done].concat()),
        ("full", text.clone()),
    ];
    for (name, body) in &parts {
        if only.as_deref().is_some_and(|o| o != *name) {
            continue;
        }
        let ns = fastest_ns(body.as_bytes(), config, samples);
        println!("{name:28} {ns:>9.0} ns");
    }
}

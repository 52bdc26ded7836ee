//! `a-ratio DATA/A_<S>.sse SAMPLES`: llmchain's cost over the floor on one workload-A
//! body, with the two timed alternately (sample by sample) so that the machine's drift
//! weighs on both alike. Each sample runs about 2 MB of body. Prints the medians, the
//! cost per SSE event and the ratio. A quick check while working on the decoder; the
//! table comes from `run.sh`.

use std::time::Instant;

use llmchain::provider::{DecoderConfig, Format, StreamEvent};
use serde_json::Value;

#[path = "../workload.rs"]
mod workload;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: a-ratio DATA/A_<S>.sse SAMPLES");
    let samples: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(50);
    let body = std::fs::read(&path).expect("the body");
    let arguments = workload::args_of(&body);
    let events = memchr::memmem::find_iter(&body, b"\n\n").count();
    let config = DecoderConfig {
        max_argument_bytes: 64 << 20,
        ..DecoderConfig::default()
    };
    let batch = (2_000_000 / body.len()).max(1);
    let (mut decode, mut floor) = (Vec::new(), Vec::new());
    for _ in 0..samples {
        let t = Instant::now();
        for _ in 0..batch {
            let mut dec = Format::OPENAI_CHAT.codec().stream_decoder(config);
            let mut sink = |_: StreamEvent<'_>| {};
            for chunk in body.chunks(64 * 1024) {
                dec.feed(chunk, &mut sink).expect("feeds");
            }
            let outcome = dec.finish(&mut sink).expect("finishes");
            assert!(outcome.message.tool_calls[0].is_complete());
        }
        decode.push(t.elapsed().as_secs_f64() / batch as f64);
        let t = Instant::now();
        for _ in 0..batch {
            let lines = memchr::memchr_iter(b'\n', &body).count();
            let v: Value = serde_json::from_str(&arguments).expect("arguments");
            assert!(lines > 0 && v.is_object());
        }
        floor.push(t.elapsed().as_secs_f64() / batch as f64);
    }
    decode.sort_by(f64::total_cmp);
    floor.sort_by(f64::total_cmp);
    let (d, f) = (decode[samples / 2], floor[samples / 2]);
    println!(
        "{path}: llmchain {:.2} us ({:.1} ns per event, {events} events), floor {:.2} us, ratio {:.2}",
        d * 1e6,
        d * 1e9 / events as f64,
        f * 1e6,
        d / f
    );
}

//! Load: many concurrent chains against a local mock provider (`ScriptedModel`, which
//! replays real wire bytes through the real decoders), reporting p50/p99 latency of one
//! whole chain run (model → tool → model) and peak RSS (`VmHWM` from /proc/self/status).
//!
//! ```text
//! cargo bench -p llmchain --bench load                 # 1,000 concurrent chains
//! cargo bench -p llmchain --bench load -- --chains 5000 --chunk-delay-us 200
//! cargo bench -p llmchain --bench load -- --soak 600   # 10-minute soak
//! ```
//!
//! Soak mode runs waves of `--chains` concurrent chains until the duration has passed and
//! prints RSS after every wave, so a leak shows as RSS growing wave over wave. The
//! latencies of the whole run go into fixed-size histograms (3 significant digits), so
//! the harness itself does not grow with the run's length.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use llmchain::chain::{LLMChain, Mode, RunOutcome, ScriptedModel};
use llmchain::message::Message;
use llmchain::provider::Format;
use llmchain::provider::render::ResponseScript;
use llmchain::tool::{Tool, ToolOutput};
use serde_json::json;

struct Args {
    chains: usize,
    soak: Option<Duration>,
    chunk_delay: Option<Duration>,
}

fn args() -> Args {
    let mut out = Args {
        chains: 1000,
        soak: None,
        chunk_delay: None,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        // `cargo bench` passes `--bench` to every bench program.
        if argv[i] == "--bench" {
            i += 1;
            continue;
        }
        let value = argv.get(i + 1).and_then(|v| v.parse::<u64>().ok());
        match (argv[i].as_str(), value) {
            ("--chains", Some(n)) => out.chains = n as usize,
            ("--soak", Some(s)) => out.soak = Some(Duration::from_secs(s)),
            ("--chunk-delay-us", Some(us)) => out.chunk_delay = Some(Duration::from_micros(us)),
            (other, _) => {
                eprintln!("unknown or incomplete argument {other}; see the program's doc comment");
                std::process::exit(2);
            }
        }
        i += 2;
    }
    out
}

/// `VmHWM` / `VmRSS` in KiB from /proc/self/status (0 where unavailable).
fn proc_status_kib(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn calculator() -> Tool {
    Tool::builder("calculator")
        .description("Adds a and b")
        .schema(json!({"type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"]}))
        .handler(|args, _| async move {
            let sum = args["a"].as_f64().unwrap_or(0.0) + args["b"].as_f64().unwrap_or(0.0);
            ToolOutput::text(format!("{sum}"))
        })
        .build()
        .expect("a valid tool")
}

/// One chain: user → tool call → tool result → answer. Returns (latency since the wave
/// issued it, including time queued behind the other chains; time running once started).
async fn one_chain(i: usize, delay: Option<Duration>, issued: Instant) -> (Duration, Duration) {
    let format = if i.is_multiple_of(2) {
        Format::OPENAI_CHAT
    } else {
        Format::ANTHROPIC
    };
    let mut model = ScriptedModel::new(format)
        .chunk_size(64)
        .respond(
            ResponseScript::tool_call(format!("call_{i}"), "calculator", r#"{"a": 2, "b": 3}"#)
                .with_text("Let me add."),
        )
        .expect("renders")
        .respond(ResponseScript::text("2 + 3 = 5"))
        .expect("renders");
    if let Some(d) = delay {
        model = model.chunk_delay(d);
    }
    let start = Instant::now();
    let mut chain = LLMChain::new(Arc::new(model)).with_tool(calculator());
    chain
        .add_message(Message::user("What is 2 + 3?"))
        .await
        .expect("adds");
    let outcome = chain
        .run(Mode::while_needs_response())
        .await
        .expect("the chain completes");
    assert_eq!(outcome, RunOutcome::Done);
    assert_eq!(chain.messages().len(), 4, "a lost message");
    (issued.elapsed(), start.elapsed())
}

async fn wave(n: usize, delay: Option<Duration>) -> Vec<(Duration, Duration)> {
    let issued = Instant::now();
    let handles: Vec<_> = (0..n)
        .map(|i| tokio::spawn(one_chain(i, delay, issued)))
        .collect();
    let mut out = Vec::with_capacity(n);
    for h in handles {
        out.push(h.await.expect("a chain task panicked"));
    }
    out
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// A histogram of durations in microseconds, 1 µs to 1 h, 3 significant digits.
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds")
}

/// Adds each duration (in µs, clamped into the histogram's range).
fn record(h: &mut Histogram<u64>, samples: &[Duration]) {
    for d in samples {
        h.saturating_record(d.as_micros().max(1) as u64);
    }
}

/// The `q` quantile of `h` in ms.
fn quantile_ms(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1e3
}

fn main() {
    let args = args();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let started = Instant::now();
        let mut waves = 0usize;
        let mut all = histogram();
        let mut all_service = histogram();
        loop {
            let t = Instant::now();
            let pairs = wave(args.chains, args.chunk_delay).await;
            waves += 1;
            let mut lat: Vec<Duration> = pairs.iter().map(|p| p.0).collect();
            let mut service: Vec<Duration> = pairs.iter().map(|p| p.1).collect();
            lat.sort();
            service.sort();
            let elapsed = t.elapsed();
            println!(
                "wave {waves} (t = {:.1} s): {} chains in {:.3} s; latency since issued p50 {:.3} ms, p99 {:.3} ms; \
                 running time p50 {:.3} ms, p99 {:.3} ms; RSS {} KiB, peak RSS {} KiB",
                started.elapsed().as_secs_f64(),
                args.chains,
                elapsed.as_secs_f64(),
                percentile(&lat, 0.50).as_secs_f64() * 1e3,
                percentile(&lat, 0.99).as_secs_f64() * 1e3,
                percentile(&service, 0.50).as_secs_f64() * 1e3,
                percentile(&service, 0.99).as_secs_f64() * 1e3,
                proc_status_kib("VmRSS:"),
                proc_status_kib("VmHWM:"),
            );
            record(&mut all, &lat);
            record(&mut all_service, &service);
            match args.soak {
                Some(d) if started.elapsed() < d => continue,
                _ => break,
            }
        }
        println!(
            "total: {} chains in {waves} wave(s) over {:.1} s; latency since issued p50 {:.3} ms, \
             p99 {:.3} ms; running time p50 {:.3} ms, p99 {:.3} ms; peak RSS (VmHWM) {} KiB",
            all.len(),
            started.elapsed().as_secs_f64(),
            quantile_ms(&all, 0.50),
            quantile_ms(&all, 0.99),
            quantile_ms(&all_service, 0.50),
            quantile_ms(&all_service, 0.99),
            proc_status_kib("VmHWM:"),
        );
    });
}

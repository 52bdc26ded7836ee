//! The serve benchmark's load generator: `load BASE CHATS CONCURRENCY SERVER_PID LABEL`.
//!
//! Posts CHATS chats to `BASE/api/chat` as the AI SDK's `DefaultChatTransport` does,
//! CONCURRENCY at a time, and reads each UI message stream whole. Measures, for the
//! server process SERVER_PID: its CPU time over the run (from /proc, user + system),
//! its peak resident memory (VmRSS sampled every 10 ms), and per text delta the added
//! latency: the moment the delta is read here minus the CLOCK_MONOTONIC time the
//! server's model wrote into it. A chat counts only if its stream holds the tool's
//! output, a `finish` and `[DONE]`. Prints one JSON line.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serve_bench::monotonic_ns;

/// utime + stime of `pid`, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command's closing parenthesis: state is field 3; utime 14, stime 15.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    // SAFETY: sysconf reads a constant.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// VmRSS of `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

struct Outcome {
    ok: bool,
    latencies_ns: Vec<u64>,
    chunks: usize,
    error: Option<String>,
}

async fn chat(client: &reqwest::Client, base: &str, id: &str) -> Outcome {
    let body = serde_json::json!({
        "id": id,
        "trigger": "submit-message",
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "weather in Tokyo?"}]}],
    });
    let mut out = Outcome {
        ok: false,
        latencies_ns: Vec::with_capacity(64),
        chunks: 0,
        error: None,
    };
    let res = match client
        .post(format!("{base}/api/chat"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
    {
        Ok(r) => r,
        Err(e) => {
            out.error = Some(format!("request: {e}"));
            return out;
        }
    };
    if !res.status().is_success() {
        out.error = Some(format!("HTTP {}", res.status()));
        return out;
    }
    let (mut output, mut finish, mut done) = (false, false, false);
    let mut buf: Vec<u8> = Vec::new();
    let mut stream = res.bytes_stream();
    while let Some(next) = stream.next().await {
        let bytes = match next {
            Ok(b) => b,
            Err(e) => {
                out.error = Some(format!("body: {e}"));
                return out;
            }
        };
        let now = monotonic_ns();
        buf.extend_from_slice(&bytes);
        while let Some(cut) = buf.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = buf.drain(..cut + 2).collect();
            let text = String::from_utf8_lossy(&event);
            for line in text.lines() {
                let Some(data) = line.strip_prefix("data: ") else {
                    continue;
                };
                if data == "[DONE]" {
                    done = true;
                    continue;
                }
                out.chunks += 1;
                let Ok(v) = serde_json::from_str::<serde_json::Value>(data) else {
                    out.error = Some(format!("not JSON: {data}"));
                    return out;
                };
                match v["type"].as_str() {
                    Some("text-delta") => {
                        if let Some(ts) = v["delta"]
                            .as_str()
                            .and_then(|d| d.trim().parse::<u64>().ok())
                        {
                            out.latencies_ns.push(now.saturating_sub(ts));
                        }
                    }
                    Some("tool-output-available") => output = true,
                    Some("finish") => finish = true,
                    Some("error") => {
                        out.error = Some(format!("error chunk: {data}"));
                    }
                    _ => {}
                }
            }
        }
    }
    out.ok = output && finish && done && out.error.is_none();
    if !out.ok && out.error.is_none() {
        out.error = Some(format!(
            "incomplete stream: output {output}, finish {finish}, [DONE] {done}"
        ));
    }
    out
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i] as f64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, base, chats, concurrency, pid, label] = &args[..] else {
        eprintln!("usage: load BASE CHATS CONCURRENCY SERVER_PID LABEL");
        std::process::exit(2);
    };
    let chats: usize = chats.parse().unwrap();
    let concurrency: usize = concurrency.parse().unwrap();
    let pid: u32 = pid.parse().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let run = format!("{:x}", monotonic_ns());
    rt.block_on(async move {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(concurrency)
            .timeout(Duration::from_secs(300))
            .build()
            .unwrap();
        let peak = Arc::new(AtomicU64::new(rss_kib(pid)));
        let stop = Arc::new(AtomicBool::new(false));
        let sampler = {
            let (peak, stop) = (peak.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    peak.fetch_max(rss_kib(pid), Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(10));
                }
            })
        };
        let next = Arc::new(AtomicUsize::new(0));
        let cpu0 = cpu_seconds(pid);
        let t0 = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..concurrency {
            let (client, base, next, run) =
                (client.clone(), base.clone(), next.clone(), run.clone());
            tasks.push(tokio::spawn(async move {
                let mut outcomes = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= chats {
                        return outcomes;
                    }
                    outcomes.push(chat(&client, &base, &format!("b{run}-{i}")).await);
                }
            }));
        }
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        let wall = t0.elapsed().as_secs_f64();
        let cpu = cpu_seconds(pid) - cpu0;
        stop.store(true, Ordering::Relaxed);
        sampler.join().unwrap();
        let ok = all.iter().filter(|o| o.ok).count();
        let errors: Vec<&str> = all
            .iter()
            .filter_map(|o| o.error.as_deref())
            .take(3)
            .collect();
        let mut lat: Vec<u64> = all
            .iter()
            .flat_map(|o| o.latencies_ns.iter().copied())
            .collect();
        lat.sort_unstable();
        let chunks: usize = all.iter().map(|o| o.chunks).sum();
        println!(
            "{}",
            serde_json::json!({
                "server": label,
                "chats": chats,
                "concurrency": concurrency,
                "ok": ok,
                "failed": chats - ok,
                "errors": errors,
                "wall_s": wall,
                "chats_per_s": chats as f64 / wall,
                "server_cpu_s": cpu,
                "cpu_s_per_1000_chats": cpu / chats as f64 * 1000.0,
                "chunks_per_chat": chunks as f64 / chats as f64,
                "text_deltas": lat.len(),
                "added_latency_us_p50": percentile(&lat, 0.50) / 1000.0,
                "added_latency_us_p99": percentile(&lat, 0.99) / 1000.0,
                "added_latency_us_max": lat.last().copied().unwrap_or(0) as f64 / 1000.0,
                "peak_rss_mb": peak.load(Ordering::Relaxed) as f64 / 1024.0,
            })
        );
    });
}

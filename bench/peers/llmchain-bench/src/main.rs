//! llmchain on the peer workloads: the OpenAI Chat stream decoder fed the workload's
//! bytes in 64 KiB chunks (A, B), and the OpenAI Chat request encoder (C). Also times a
//! floor for A: touching every byte of the body (memchr line scan) plus one serde_json
//! parse of the final arguments. D: `HttpModel` (OpenAI Chat) streams one completion
//! from the local `d-server` over HTTP until it has the parsed tool call. Prints one JSON
//! line per workload.

use std::time::{Duration, Instant};

use llmchain::model::{ChatModel, collect_stream};
use llmchain::conversation::{Conversation, ToolDefinition};
use llmchain::message::{Arguments, Message, ToolCall, ToolResult};
use llmchain::http::{HttpModel, HttpModelConfig, RetryPolicy};
use llmchain::provider::{DecoderConfig, Format, RequestOptions, StreamEvent};
use serde_json::Value;

mod workload;

const CHUNK: usize = 64 * 1024;

/// CPU time of the whole process (all threads), for D's client-side cost.
fn process_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// Median wall time and median process CPU time of one call of `f`, over up to 20
/// samples within ~2 s. A sample runs `f` enough times back to back to last ~2 ms
/// (once for the large sizes), so that the clock reads (one of them a system call for
/// the CPU clock) do not weigh on the small sizes; the floor is timed the same way. The
/// process is single-threaded for A-C, so its CPU time is the decoder's own, which the
/// shared machine's load does not inflate (wall time it does).
fn time<F: FnMut()>(mut f: F) -> (f64, f64, usize) {
    let t = Instant::now();
    f(); // warm-up, and an estimate of one call
    let once = t.elapsed().as_secs_f64();
    let batch = ((2e-3 / once.max(1e-9)).ceil() as usize).clamp(1, 100_000);
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    let start = Instant::now();
    while wall.len() < 20 && (wall.is_empty() || start.elapsed() < Duration::from_secs(2)) {
        let (t, c) = (Instant::now(), process_cpu());
        for _ in 0..batch {
            f();
        }
        cpu.push((process_cpu() - c) / batch as f64);
        wall.push(t.elapsed().as_secs_f64() / batch as f64);
    }
    wall.sort_by(f64::total_cmp);
    cpu.sort_by(f64::total_cmp);
    (wall[wall.len() / 2], cpu[cpu.len() / 2], wall.len() * batch)
}

/// Workload D: one streamed completion from the local server through `HttpModel`, to
/// the parsed tool call (and the text reply).
fn workload_d(base: &str, expect: &Value) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let model = HttpModel::new(
        HttpModelConfig::openai("gpt-4o-2024-08-06")
            .api_key("sk-bench")
            .base_url(base)
            .retry(RetryPolicy::none()),
    )
    .expect("a model");
    let mut conv = Conversation::new();
    conv.tools.push(ToolDefinition {
        name: "write_file".into(),
        description: "Writes a file".into(),
        parameters_schema: serde_json::json!({"type": "object",
            "properties": {"content": {"type": "string"}}, "required": ["content"]}),
        ..ToolDefinition::default()
    });
    conv.messages
        .push(Message::user("Write the lookup table module."));
    let args_len = expect["arguments"][0].as_u64().unwrap_or(0) as usize;
    let text_len = expect["text"].as_u64().unwrap_or(0) as usize;
    let (seconds, cpu, iters) = time(|| {
        let outcome = rt
            .block_on(collect_stream(model.stream(&conv), |_| {}))
            .expect("D streams");
        let call = &outcome.message.tool_calls[0];
        assert!(call.is_complete(), "an incomplete call");
        let args = call.arguments_as_map();
        assert_eq!(args["content"].as_str().map_or(0, str::len) + 14, args_len);
        assert_eq!(outcome.message.text().map_or(0, |t| t.len()), text_len);
    });
    println!(
        r#"{{"impl":"llmchain","workload":"D","seconds":{seconds},"cpu_seconds":{cpu},"iters":{iters}}}"#
    );
}

fn report(name: &str, workload: &str, (seconds, cpu, iters): (f64, f64, usize)) {
    println!(
        r#"{{"impl":"{name}","workload":"{workload}","seconds":{seconds},"cpu_seconds":{cpu},"iters":{iters}}}"#
    );
}

fn decode(body: &[u8], expect: &[usize]) {
    let config = DecoderConfig {
        max_argument_bytes: 64 << 20,
        ..DecoderConfig::default()
    };
    let mut dec = Format::OPENAI_CHAT.codec().stream_decoder(config);
    let mut events = 0usize;
    let mut sink = |_: StreamEvent<'_>| events += 1;
    for chunk in body.chunks(CHUNK) {
        dec.feed(chunk, &mut sink).expect("feed");
    }
    let outcome = dec.finish(&mut sink).expect("finish");
    let lens: Vec<usize> = outcome
        .message
        .tool_calls
        .iter()
        .map(|c| match &c.arguments {
            // Parsed by the decoder: `{"content":"…"}` is the string plus 14 bytes.
            Some(Arguments::Object(m)) if c.is_complete() => {
                m["content"].as_str().map_or(0, |s| s.len() + 14)
            }
            _ => 0,
        })
        .collect();
    assert_eq!(lens, expect, "llmchain assembled different calls");
    assert!(events > 0);
}

/// The floor: read every byte (find each line) and parse the final arguments once.
fn floor(body: &[u8], args: &str) {
    let lines = memchr::memchr_iter(b'\n', body).count();
    let v: Value = serde_json::from_str(args).expect("args");
    assert!(lines > 0 && v.is_object());
}

fn conversation(c: &Value) -> Conversation {
    let mut conv = Conversation::new();
    conv.system = c["system"].as_str().map(str::to_owned);
    for round in c["rounds"].as_array().expect("rounds") {
        conv.messages
            .push(Message::user(round["user"].as_str().unwrap_or_default()));
        let calls = round["calls"]
            .as_array()
            .expect("calls")
            .iter()
            .map(|call| {
                ToolCall::function(
                    call["id"].as_str().unwrap_or_default(),
                    call["name"].as_str().unwrap_or_default(),
                    call["arguments"].clone(),
                )
                .expect("valid call")
            })
            .collect();
        conv.messages.push(Message::assistant_with_calls("", calls));
        let results = round["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|r| {
                let mut result = ToolResult::text(
                    r["id"].as_str().unwrap_or_default(),
                    r["content"].as_str().unwrap_or_default(),
                );
                result.name = r["name"].as_str().map(str::to_owned);
                result
            })
            .collect();
        conv.messages.push(Message::tool(results));
    }
    conv
}

fn main() {
    let data = std::env::args().nth(1).unwrap_or_else(|| "../data".into());
    let expect: Value =
        serde_json::from_slice(&std::fs::read(format!("{data}/expect.json")).expect("expect.json"))
            .expect("json");
    if let Some(base) = std::env::args().nth(2) {
        // `llmchain-bench DATA BASE_URL`: workload D only.
        workload_d(&base, &expect["D"]);
        return;
    }
    // `ONLY=A|B|C` runs one in-process workload (for profiling).
    let only = std::env::var("ONLY").unwrap_or_default();
    let run = |w: &str| only.is_empty() || only == w;
    for size in [1usize << 10, 64 << 10, 1 << 20, 8 << 20] {
        if !run("A") {
            break;
        }
        let body = std::fs::read(format!("{data}/A_{size}.sse")).expect("A");
        report(
            "llmchain",
            &format!("A_{size}"),
            time(|| decode(&body, &[size])),
        );
        let args = workload::args_of(&body);
        assert_eq!(args.len(), size);
        report("floor", &format!("A_{size}"), time(|| floor(&body, &args)));
    }
    if run("B") {
        let body = std::fs::read(format!("{data}/B.sse")).expect("B");
        let lens: Vec<usize> = expect["B"]
            .as_array()
            .expect("B")
            .iter()
            .map(|v| v.as_u64().unwrap_or(0) as usize)
            .collect();
        report("llmchain", "B", time(|| decode(&body, &lens)));
    }
    if !run("C") {
        return;
    }

    let c: Value =
        serde_json::from_slice(&std::fs::read(format!("{data}/C.json")).expect("C")).expect("json");
    let conv = conversation(&c);
    let opts = RequestOptions {
        model: "gpt-bench".into(),
        stream: true,
        ..RequestOptions::default()
    };
    let codec = Format::OPENAI_CHAT.codec();
    let body = codec.encode(&conv, &opts).expect("encodes");
    let wire: Value = serde_json::from_slice(&body).expect("json");
    let n = wire["messages"].as_array().map_or(0, Vec::len);
    assert!(n >= 2000, "encoded {n} messages");
    report(
        "llmchain",
        "C",
        time(|| {
            codec.encode(&conv, &opts).expect("encodes");
        }),
    );
}

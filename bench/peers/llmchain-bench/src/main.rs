//! llmchain on the peer workloads: the OpenAI Chat stream decoder fed the workload's
//! bytes in 64 KiB chunks (A, B), and the OpenAI Chat request encoder (C). Also times a
//! floor for A: touching every byte of the body (memchr line scan) plus one serde_json
//! parse of the final arguments. Prints one JSON line per workload.

use std::time::{Duration, Instant};

use llmchain::conversation::Conversation;
use llmchain::message::{Message, ToolCall, ToolResult};
use llmchain::provider::{DecoderConfig, Format, RequestOptions, StreamEvent};
use serde_json::Value;

const CHUNK: usize = 64 * 1024;

fn time<F: FnMut()>(mut f: F) -> (f64, usize) {
    let mut samples = Vec::new();
    let start = Instant::now();
    while samples.len() < 20 && (samples.is_empty() || start.elapsed() < Duration::from_secs(2)) {
        let t = Instant::now();
        f();
        samples.push(t.elapsed().as_secs_f64());
    }
    samples.sort_by(f64::total_cmp);
    (samples[samples.len() / 2], samples.len())
}

fn report(name: &str, workload: &str, (seconds, iters): (f64, usize)) {
    println!(r#"{{"impl":"{name}","workload":"{workload}","seconds":{seconds},"iters":{iters}}}"#);
}

fn decode(body: &[u8], expect: &[usize]) {
    let config = DecoderConfig {
        max_argument_bytes: 64 << 20,
        ..DecoderConfig::default()
    };
    let mut dec = Format::OpenAiChat.codec().stream_decoder(config);
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
        .map(|c| serde_json::to_string(&c.arguments_as_map()).map_or(0, |s| s.len()))
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

fn args_of(body: &[u8]) -> String {
    // Reassemble the arguments the plain way (for the floor's parse input only).
    let mut out = String::new();
    for line in body.split(|&b| b == b'\n') {
        if let Some(data) = line.strip_prefix(b"data: ")
            && data != b"[DONE]"
        {
            let v: Value = serde_json::from_slice(data).expect("chunk");
            if let Some(a) =
                v["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str()
            {
                out.push_str(a);
            }
        }
    }
    out
}

fn main() {
    let data = std::env::args().nth(1).unwrap_or_else(|| "../data".into());
    let expect: Value =
        serde_json::from_slice(&std::fs::read(format!("{data}/expect.json")).expect("expect.json"))
            .expect("json");
    for size in [1usize << 10, 64 << 10, 1 << 20, 8 << 20] {
        let body = std::fs::read(format!("{data}/A_{size}.sse")).expect("A");
        report(
            "llmchain",
            &format!("A_{size}"),
            time(|| decode(&body, &[size])),
        );
        let args = args_of(&body);
        assert_eq!(args.len(), size);
        report("floor", &format!("A_{size}"), time(|| floor(&body, &args)));
    }
    let body = std::fs::read(format!("{data}/B.sse")).expect("B");
    let lens: Vec<usize> = expect["B"]
        .as_array()
        .expect("B")
        .iter()
        .map(|v| v.as_u64().unwrap_or(0) as usize)
        .collect();
    report("llmchain", "B", time(|| decode(&body, &lens)));

    let c: Value =
        serde_json::from_slice(&std::fs::read(format!("{data}/C.json")).expect("C")).expect("json");
    let conv = conversation(&c);
    let opts = RequestOptions {
        model: "gpt-bench".into(),
        stream: true,
        ..RequestOptions::default()
    };
    let codec = Format::OpenAiChat.codec();
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

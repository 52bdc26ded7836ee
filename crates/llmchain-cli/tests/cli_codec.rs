//! `llmchain decode` / `llmchain encode` through the built binary.

mod common;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

fn bin() -> Command {
    common::bare()
}

fn fixture(dir: &str, name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../llmchain/tests/fixtures")
        .join(dir)
        .join(name)
}

fn run(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = bin()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        let mut input = child.stdin.take().unwrap();
        if let Some(s) = stdin {
            input.write_all(s).unwrap();
        }
    }
    child.wait_with_output().unwrap()
}

fn assert_bad_input(out: &Output) {
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("llmchain: "), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn decode_stream_report_for_any_chunk_size() {
    let f = fixture("openai_chat", "parallel_calls.sse");
    let f = f.to_str().unwrap();
    let whole = run(&["decode", "--format", "openai_chat", f], None);
    assert!(whole.status.success(), "{whole:?}");
    let report: Value = serde_json::from_slice(&whole.stdout).unwrap();
    assert_eq!(report["stop_reason"], "tool_calls");
    assert_eq!(
        report["tool_calls"][1]["arguments"]["city"],
        "New York City"
    );
    assert_eq!(
        report["usage"],
        json!({"input_tokens": 80, "output_tokens": 54})
    );
    for n in ["1", "7", "300"] {
        let out = run(
            &["decode", "--format", "openai", "--chunk-size", n, f],
            None,
        );
        assert!(out.status.success());
        assert_eq!(out.stdout, whole.stdout, "chunk size {n}");
    }
}

#[test]
fn decode_non_streaming_and_stdin() {
    let body = std::fs::read(fixture("openai_responses", "response.json")).unwrap();
    let out = run(
        &["decode", "--format", "openai_responses", "-"],
        Some(&body),
    );
    assert!(out.status.success(), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["tool_calls"][0]["call_id"],
        "call_unLAR8MvFNptuiZK6K6HCy5k"
    );
    assert_eq!(report["incomplete_tool_calls"], json!([]));
    let out = run(&["decode", "--format", "openai_responses"], Some(&body));
    assert!(out.status.success());
}

#[test]
fn decode_incomplete_calls_are_reported_apart() {
    let f = fixture("openai_chat", "length_mid_arguments.sse");
    let out = run(
        &["decode", "--format", "openai_chat", f.to_str().unwrap()],
        None,
    );
    assert!(out.status.success());
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["tool_calls"], json!([]));
    assert_eq!(report["stop_reason"], "max_tokens");
    assert_eq!(report["raw_stop_reason"], "length");
    assert_eq!(report["incomplete_tool_calls"][0]["name"], "write_file");
}

#[test]
fn decode_bad_input_exits_2_with_one_line() {
    let chat = fixture("openai_chat", "single_call.sse");
    let chat = chat.to_str().unwrap();
    assert_bad_input(&run(&["decode", "--format", "klingon", chat], None));
    assert_bad_input(&run(
        &["decode", "--format", "openai_chat", "/nonexistent/body.sse"],
        None,
    ));
    assert_bad_input(&run(
        &["decode", "--format", "openai_chat", "-"],
        Some(b"data: {\"choices\": [\n\n"),
    ));
    assert_bad_input(&run(
        &["decode", "--format", "openai_responses", chat],
        None,
    ));
    // A usage error clap finds shows clap's whole message (what is wrong, the hint).
    let out = run(
        &[
            "decode",
            "--format",
            "openai_chat",
            "--chunk-size",
            "0",
            chat,
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("llmchain: invalid value '0' for '--chunk-size <CHUNK_SIZE>'")
            && err.contains("--help"),
        "{err}"
    );
    assert_bad_input(&run(
        &["decode", "--format", "openai_chat", "-"],
        Some(&[0xff, 0xfe, 0x00]),
    ));
}

fn conversation_file() -> tempfile_like::TempFile {
    tempfile_like::TempFile::new(
        "conv.json",
        &json!({
            "version": 1,
            "system": "Be brief.",
            "tools": [{"name":"get_weather","description":"Weather.","parameters_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],
            "tool_choice": "required",
            "parallel_tool_calls": false,
            "messages": [
                {"role":"user","content":"Weather in Paris?"},
                {"role":"assistant","tool_calls":[{"type":"function","status":"complete","call_id":"call_1","name":"get_weather","arguments":{"city":"Paris"}}]},
                {"role":"tool","tool_results":[{"type":"function","tool_call_id":"call_1","name":"get_weather","content":"18C"}]}
            ]
        })
        .to_string(),
    )
}

#[test]
fn encode_prints_the_body() {
    let conv = conversation_file();
    let out = run(
        &[
            "encode",
            "--format",
            "openai_chat",
            "--model",
            "gpt-4o-mini",
            conv.path(),
        ],
        None,
    );
    assert!(out.status.success(), "{out:?}");
    let body: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(body["model"], "gpt-4o-mini");
    assert_eq!(body["tool_choice"], "required");
    assert_eq!(body["parallel_tool_calls"], false);
    assert_eq!(
        body["messages"][2]["tool_calls"][0]["function"]["arguments"],
        "{\"city\":\"Paris\"}"
    );
    assert_eq!(
        body["messages"][3],
        json!({"role":"tool","content":"18C","tool_call_id":"call_1"})
    );

    let out = run(
        &["encode", "--format", "openai_responses", conv.path()],
        None,
    );
    assert!(out.status.success(), "{out:?}");
    let body: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(body["input"][2]["type"], "function_call_output");

    // Bedrock by its alias: Bedrock's own body and default model, never OpenAI's
    // (a wildcard once made every unlisted format OpenAI Chat with gpt-4.1).
    let out = run(&["encode", "--format", "bedrock", conv.path()], None);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("gpt-"), "{text}");
    let body: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        body["messages"][1]["content"][0]["toolUse"]["name"], "get_weather",
        "{body}"
    );
}

#[test]
fn encode_bad_input_exits_2_with_one_line() {
    let conv = conversation_file();
    assert_bad_input(&run(&["encode", "--format", "nope", conv.path()], None));
    assert_bad_input(&run(
        &["encode", "--format", "openai_chat", "/nonexistent.json"],
        None,
    ));
    let bad = tempfile_like::TempFile::new(
        "bad.json",
        "{\"version\":1,\"messages\":[{\"role\":\"robot\"}]}",
    );
    assert_bad_input(&run(
        &["encode", "--format", "openai_chat", bad.path()],
        None,
    ));
    // A part spelled the provider way would lose its text: refused, naming the path.
    let spelled = tempfile_like::TempFile::new(
        "spelled.json",
        r#"{"version":1,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}"#,
    );
    let out = run(&["encode", "--format", "anthropic", spelled.path()], None);
    assert_bad_input(&out);
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("messages[0].content[0].text: unknown field `text`"),
        "{out:?}"
    );
    let garbage = tempfile_like::TempFile::new("garbage.json", "not json at all");
    assert_bad_input(&run(
        &["encode", "--format", "openai_chat", garbage.path()],
        None,
    ));
}

/// A conversation whose results answer no call, or that repeats a call id, is refused
/// with exit 2 and the JSON path (every provider would reject the request); argument
/// text that is not an object is sent as `{}` with a warning.
#[test]
fn encode_refuses_calls_and_results_that_do_not_pair_up() {
    let orphan = tempfile_like::TempFile::new(
        "orphan.json",
        r#"{"version":1,"messages":[{"role":"user","content":"hi"},
            {"role":"tool","tool_results":[{"tool_call_id":"ghost","content":[{"type":"text","content":"x"}]}]}]}"#,
    );
    let out = run(&["encode", "--format", "anthropic", orphan.path()], None);
    assert_bad_input(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r#"cannot be sent: messages[1].tool_results[0].tool_call_id: no earlier tool call has id "ghost""#),
        "{err}"
    );
    let call = |id: &str| {
        format!(r#"{{"status":"complete","call_id":"{id}","name":"f","arguments":{{}}}}"#)
    };
    let duplicate = tempfile_like::TempFile::new(
        "duplicate.json",
        &format!(
            r#"{{"version":1,"messages":[{{"role":"assistant","status":"complete","tool_calls":[{},{}]}}]}}"#,
            call("a"),
            call("a")
        ),
    );
    let out = run(
        &["encode", "--format", "openai_chat", duplicate.path()],
        None,
    );
    assert_bad_input(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r#"messages[0].tool_calls[1].call_id: call id "a" was already used"#)
            && err.contains("(and 1 more)"),
        "{err}"
    );
    let invalid = tempfile_like::TempFile::new(
        "invalid.json",
        r#"{"version":1,"messages":[{"role":"assistant","status":"complete","tool_calls":[
            {"status":"incomplete","call_id":"a","name":"f","arguments":"{\"x\": tru"}]},
            {"role":"tool","tool_results":[{"tool_call_id":"a","is_error":true,"content":[{"type":"text","content":"invalid JSON"}]}]}]}"#,
    );
    let out = run(&["encode", "--format", "openai_chat", invalid.path()], None);
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("warning:")
            && err.contains("messages[0].tool_calls[0].arguments: the argument text is not a JSON object; it is sent as {}"),
        "{err}"
    );
    let body: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        body["messages"][0]["tool_calls"][0]["function"]["arguments"],
        "{}"
    );
}

/// A tiny temp file helper (no extra dev-dependency).
mod tempfile_like {
    use std::path::PathBuf;

    pub(crate) struct TempFile(PathBuf);

    impl TempFile {
        pub(crate) fn new(name: &str, text: &str) -> Self {
            let dir = std::env::temp_dir().join(format!(
                "llmchain-cli-test-{}-{}",
                std::process::id(),
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos()
            ));
            std::fs::create_dir_all(&dir).unwrap();
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            TempFile(p)
        }
        pub(crate) fn path(&self) -> &str {
            self.0.to_str().unwrap()
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
            if let Some(d) = self.0.parent() {
                let _ = std::fs::remove_dir(d);
            }
        }
    }
}

/// The peak resident memory of a running process, from `/proc` (Linux).
fn peak_rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// A streamed body is decoded as it is read: 128 MiB of keep-alive comments, then a
/// short answer, never sit in memory (the body used to be read whole first).
#[test]
fn decode_reads_a_stream_as_it_arrives_with_bounded_memory() {
    let mut child = bin()
        .args(["decode", "--format", "openai_chat", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut input = child.stdin.take().unwrap();
    let keepalive = ": keep-alive\n\n".repeat(64 * 1024); // 896 KiB
    let mut sent = 0usize;
    while sent < 128 << 20 {
        input.write_all(keepalive.as_bytes()).unwrap();
        sent += keepalive.len();
    }
    // Everything but what the pipe holds has been read: measure before the end.
    let peak = peak_rss_bytes(pid);
    let body = std::fs::read(fixture("openai_chat", "text_only.sse")).unwrap();
    input.write_all(&body).unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["stop_reason"], "end_turn", "{report}");
    assert!(report["text"].as_str().unwrap().starts_with("Hello!"));
    match peak {
        Some(peak) => assert!(
            peak < 48 << 20,
            "peak RSS {} MiB while 128 MiB went through",
            peak >> 20
        ),
        None => eprintln!("skipped the memory check: no /proc/PID/status here"),
    }
}

//! The spans as a real observability backend shows them: Arize Phoenix (`arize-phoenix`
//! from PyPI, started by the test), read back through its REST API. One Phoenix, one
//! project per scenario:
//! - three `llmchain run` turns: the defaults, content opted in, a failing tool. Phoenix
//!   interprets the GenAI conventions (operation → AGENT / LLM / TOOL, usage → token
//!   counts, the conversation id → a session), so this checks what a user sees;
//! - a queued run, in the caller's trace (`TRACEPARENT`), paused for review, decided
//!   from another process and finished by another worker: one trace, the decision an
//!   event; and a worker killed inside a tool call, its run recovered by another in the
//!   same trace with the call's unknown outcome visible;
//! - `llmchain serve` answering a request that carries the browser's `traceparent`.
//!
//! Skipped (said so) without `LLMCHAIN_TEST_PHOENIX` (`.ci/third-party` installs it).

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{
    QueuedWrite, llmchain_command, llmchain_with_env, post_chat_with, serve, serve_hello, text,
    user_message,
};
use llmchain::provider::Format;
use llmchain::provider::render::{ResponseScript, render_stream};

struct Phoenix {
    child: Child,
    base: String,
    _dir: tempfile::TempDir,
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn get(url: &str) -> Option<(u16, String)> {
    let rest = url.strip_prefix("http://")?;
    let (addr, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_owned()), |(a, p)| (a, format!("/{p}")));
    use std::io::{Read, Write};
    let mut tcp = std::net::TcpStream::connect(addr).ok()?;
    tcp.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    write!(
        tcp,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = Vec::new();
    tcp.read_to_end(&mut out).ok()?;
    let out = String::from_utf8_lossy(&out).into_owned();
    let status = out.split(' ').nth(1)?.parse().ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Some((status, body))
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

fn start_phoenix(bin: &str) -> Phoenix {
    let dir = tempfile::tempdir().unwrap();
    let (port, grpc) = (free_port(), free_port());
    let child = Command::new(bin)
        .arg("serve")
        .env("PHOENIX_WORKING_DIR", dir.path())
        .env("PHOENIX_HOST", "127.0.0.1")
        .env("PHOENIX_PORT", port.to_string())
        .env("PHOENIX_GRPC_PORT", grpc.to_string())
        .env("PHOENIX_TELEMETRY_ENABLED", "false")
        .env("PHOENIX_ALLOW_EXTERNAL_RESOURCES", "false")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("phoenix starts");
    let base = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(120);
    while get(&format!("{base}/healthz")).is_none_or(|(s, _)| s != 200) {
        assert!(
            Instant::now() < deadline,
            "Phoenix did not become healthy in 120 s"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    Phoenix {
        child,
        base,
        _dir: dir,
    }
}

type Json = serde_json::Value;

impl Phoenix {
    /// The project's spans, once `ready` holds for them (spans of several processes
    /// arrive in several batches); fails after a minute with what was there.
    fn spans_when(&self, project: &str, ready: impl Fn(&[Json]) -> bool) -> Vec<Json> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let mut data = Vec::new();
            if let Some((200, body)) = get(&format!(
                "{}/v1/projects/{project}/spans?limit=200",
                self.base
            )) {
                let v: Json = serde_json::from_str(&body).unwrap_or_default();
                data = v["data"].as_array().cloned().unwrap_or_default();
                if !data.is_empty() && ready(&data) {
                    return data;
                }
            }
            assert!(
                Instant::now() < deadline,
                "Phoenix never showed what {project} should have: {data:#?}\nprojects: {:?}",
                get(&format!("{}/v1/projects", self.base))
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The project's spans once there are any.
    fn spans(&self, project: &str) -> Vec<Json> {
        self.spans_when(project, |_| true)
    }
}

fn named<'a>(spans: &'a [Json], name: &str) -> Vec<&'a Json> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

fn attr(s: &Json, k: &str) -> Json {
    s["attributes"][k].clone()
}

/// The caller's span, in a trace of each scenario's own (Phoenix files a trace under
/// the project of its first span, so scenarios must not share one).
const PARENT_SPAN: &str = "b7ad6b7169203331";

/// The caller's trace context, as a browser or a parent service sends it.
fn parent(trace: &str) -> String {
    format!("00-{trace}-{PARENT_SPAN}-01")
}

/// The scenarios share one Phoenix (it takes seconds to start, and two cores do not
/// start three at once well); each writes to a project of its own.
#[test]
fn phoenix_shows_turns_queued_runs_reviews_crashes_and_serve() {
    let Ok(bin) = std::env::var("LLMCHAIN_TEST_PHOENIX") else {
        eprintln!(
            "SKIPPED phoenix_shows_turns_queued_runs_reviews_crashes_and_serve: set LLMCHAIN_TEST_PHOENIX (.ci/third-party)"
        );
        return;
    };
    let phoenix = start_phoenix(&bin);
    three_turns(&phoenix);
    if queued_run_through_a_review(&phoenix) {
        queued_run_through_a_crash(&phoenix);
    }
    serve_takes_the_browsers_traceparent(&phoenix);
}

/// Three turns: the defaults, content opted in, a failing tool.
fn three_turns(phoenix: &Phoenix) {
    let sse = |s: &ResponseScript| render_stream(Format::OPENAI_CHAT, s).unwrap();
    let (base, _) = serve(vec![
        sse(&ResponseScript::tool_call("call_1", "clock", "{}").with_usage(11, 5)),
        sse(&ResponseScript::text("It is noon.").with_usage(20, 4)),
        sse(&ResponseScript::text("Hello there.").with_usage(7, 2)),
        sse(&ResponseScript::tool_call(
            "call_2",
            "read_file",
            r#"{"path":"missing.txt"}"#,
        )),
        sse(&ResponseScript::text("There is no such file.")),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let turn = |prompt: &str, project: &str, capture: bool| {
        let attrs = format!("openinference.project.name={project}");
        let mut env = vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix.base.as_str()),
            ("OTEL_RESOURCE_ATTRIBUTES", attrs.as_str()),
        ];
        if capture {
            env.push(("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"));
        }
        let out = llmchain_with_env(
            &["run", "--base-url", &base, "--model", "m", prompt],
            dir.path(),
            &env,
        );
        assert!(out.status.success(), "{}", text(&out));
    };
    turn("what time is it?", "defaults", false);
    turn("say hello", "content", true);
    turn("read missing.txt", "failing", false);
    let spans = |project: &str| phoenix.spans(project);
    let of_kind = |spans: &[serde_json::Value], kind: &str| -> Vec<serde_json::Value> {
        spans
            .iter()
            .filter(|s| s["span_kind"] == kind)
            .cloned()
            .collect()
    };

    // The defaults: the turn (AGENT), its two model calls (LLM) and its tool (TOOL),
    // children of the turn, one session, the usage as token counts, and no content.
    let defaults = spans("defaults");
    let agents = of_kind(&defaults, "AGENT");
    assert_eq!(agents.len(), 1, "{defaults:#?}");
    let agent = &agents[0];
    assert_eq!(agent["name"], "invoke_agent");
    assert_eq!(attr(agent, "llm.token_count.prompt"), 31);
    assert_eq!(attr(agent, "llm.token_count.completion"), 9);
    let llms = of_kind(&defaults, "LLM");
    assert_eq!(llms.len(), 2, "{defaults:#?}");
    let tools = of_kind(&defaults, "TOOL");
    assert_eq!(tools.len(), 1, "{defaults:#?}");
    assert_eq!(tools[0]["name"], "execute_tool clock");
    assert_eq!(attr(&tools[0], "tool.name"), "clock");
    let session = attr(agent, "session.id");
    assert!(session.is_string(), "{agent:#?}");
    for s in llms.iter().chain(tools.iter()) {
        assert_eq!(s["parent_id"], agent["context"]["span_id"], "{s:#?}");
        assert_ne!(s["status_code"], "ERROR", "{s:#?}");
    }
    for s in llms.iter() {
        assert_eq!(attr(s, "session.id"), session);
    }
    for s in &defaults {
        let text = s["attributes"].to_string();
        assert!(
            !text.contains("what time is it"),
            "content without the opt-in: {s:#?}"
        );
        assert!(!text.contains("input_messages"), "{s:#?}");
    }

    // Content opted in: Phoenix reads the conventions' message JSON.
    let content = spans("content");
    let llm = &of_kind(&content, "LLM")[0];
    assert_eq!(attr(llm, "llm.input_messages.0.message.role"), "user");
    assert_eq!(
        attr(llm, "llm.input_messages.0.message.content"),
        "say hello"
    );
    assert_eq!(
        attr(llm, "llm.output_messages.0.message.content"),
        "Hello there."
    );

    // A failing tool: its TOOL span is an ERROR with its error.type.
    let failing = spans("failing");
    let tool = of_kind(&failing, "TOOL")
        .into_iter()
        .find(|s| s["name"] == "execute_tool read_file")
        .unwrap_or_else(|| panic!("{failing:#?}"));
    assert_eq!(tool["status_code"], "ERROR", "{tool:#?}");
    assert_eq!(attr(&tool, "error.type"), "tool_error");
}

/// Every span of `spans` is in the caller's trace.
fn all_in_the_callers_trace(spans: &[Json], trace: &str) {
    for s in spans {
        assert_eq!(s["context"]["trace_id"], trace, "left the trace: {s:#?}");
    }
}

/// A queued run in the caller's trace, paused for review, approved by `dana` from
/// another process, finished by another worker: Phoenix shows one trace, each attempt
/// a child of the enqueue, and the decision (who, what, when, how long it waited).
/// False (skipped, said so) without python3 for the files server.
fn queued_run_through_a_review(phoenix: &Phoenix) -> bool {
    const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix.base.as_str()),
        (
            "OTEL_RESOURCE_ATTRIBUTES",
            "openinference.project.name=review",
        ),
    ];
    let Some(queued) = QueuedWrite::enqueue("phoenix", dir.path(), "ask", &env, &parent(TRACE))
    else {
        return false;
    };
    queued.through_a_review(dir.path(), &env);

    let spans = phoenix.spans_when("review", |s| {
        named(s, "llmchain run").len() >= 2 && !named(s, "execute_tool write_file").is_empty()
    });
    all_in_the_callers_trace(&spans, TRACE);
    let enqueue = named(&spans, "llmchain enqueue");
    assert_eq!(enqueue.len(), 1, "{spans:#?}");
    assert_eq!(enqueue[0]["parent_id"], PARENT_SPAN);
    let runs = named(&spans, "llmchain run");
    assert_eq!(runs.len(), 2, "the paused attempt and the resumed one");
    for run in &runs {
        assert_eq!(
            run["parent_id"], enqueue[0]["context"]["span_id"],
            "{run:#?}"
        );
    }
    // Each attempt's turn is its child; the tool ran in the resumed one.
    let run_ids: Vec<&Json> = runs.iter().map(|r| &r["context"]["span_id"]).collect();
    let agents = named(&spans, "invoke_agent");
    assert_eq!(agents.len(), 2, "{spans:#?}");
    for a in &agents {
        assert!(run_ids.contains(&&a["parent_id"]), "{a:#?}");
    }
    // The decision, as an auditor reads it in the backend.
    let decided = runs
        .iter()
        .flat_map(|r| r["events"].as_array().cloned().unwrap_or_default())
        .find(|e| e["name"] == "review decided")
        .unwrap_or_else(|| panic!("no decision event: {runs:#?}"));
    let a = &decided["attributes"];
    assert_eq!(a["llmchain.review.decided_by"], "dana", "{decided:#?}");
    assert_eq!(a["llmchain.review.decision"], "approved");
    assert_eq!(a["llmchain.review.tool"], "write_file");
    assert!(
        a["llmchain.review.waited_ms"]
            .as_i64()
            .is_some_and(|w| w >= 0),
        "{decided:#?}"
    );
    assert!(a["llmchain.review.decided_at"].is_number(), "{decided:#?}");
    true
}

/// A worker killed (SIGKILL) inside a non-idempotent call; another worker recovers the
/// run once the lease runs out. Its attempt joins the same trace, and the call it did
/// not run again is an `execute_tool` span in ERROR with `error.type=outcome_unknown`.
fn queued_run_through_a_crash(phoenix: &Phoenix) {
    const TRACE: &str = "1bf7651916cd43dd8448eb211c80319d";
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix.base.as_str()),
        (
            "OTEL_RESOURCE_ATTRIBUTES",
            "openinference.project.name=crash",
        ),
    ];
    // Approved by the configuration; the call then waits inside the server (`.hold`).
    let Some(queued) = QueuedWrite::enqueue("phoenix", dir.path(), "always", &env, &parent(TRACE))
    else {
        return;
    };
    let (root, db) = (&queued.root, &queued.db);
    let worker = |drain: bool| {
        let mut args = vec![
            "worker",
            "--db",
            &db,
            "--poll-ms",
            "20",
            "--lease-secs",
            "2",
        ];
        if drain {
            args.push("--drain");
        }
        let mut cmd = llmchain_command(&args, dir.path());
        cmd.envs(env);
        cmd
    };
    let mut child = worker(false)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(root.join(".started")).is_ok_and(|s| !s.is_empty()) {
        assert!(Instant::now() < deadline, "the call never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::remove_file(root.join(".hold")).unwrap();
    let again = worker(true).output().unwrap();
    assert!(text(&again).contains("1 done"), "{}", text(&again));

    let spans = phoenix.spans_when("crash", |s| {
        named(s, "execute_tool write_file")
            .iter()
            .any(|t| attr(t, "error.type") == "outcome_unknown")
    });
    all_in_the_callers_trace(&spans, TRACE);
    let enqueue = named(&spans, "llmchain enqueue");
    assert_eq!(enqueue.len(), 1, "{spans:#?}");
    // The killed attempt never flushed; the recovering one is a child of the enqueue.
    let recovered = named(&spans, "llmchain run")
        .into_iter()
        .find(|r| {
            attr(r, "llmchain.run.attempt")
                .as_i64()
                .is_some_and(|a| a >= 2)
        })
        .unwrap_or_else(|| panic!("no recovered attempt: {spans:#?}"));
    assert_eq!(recovered["parent_id"], enqueue[0]["context"]["span_id"]);
    let unknown = named(&spans, "execute_tool write_file")
        .into_iter()
        .find(|t| attr(t, "error.type") == "outcome_unknown")
        .unwrap();
    assert_eq!(unknown["status_code"], "ERROR", "{unknown:#?}");
    // Run once, by the killed worker, and not again.
    assert_eq!(
        std::fs::read_to_string(root.join(".started"))
            .unwrap()
            .lines()
            .count(),
        1
    );
}

/// `llmchain serve` takes the browser's `traceparent`: the answer's spans are in that
/// trace, its root a child of the browser's span.
fn serve_takes_the_browsers_traceparent(phoenix: &Phoenix) {
    const TRACE: &str = "2cf7651916cd43dd8448eb211c80319e";
    let dir = tempfile::tempdir().unwrap();
    let served = serve_hello(
        dir.path(),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix.base.as_str()),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "openinference.project.name=serve",
            ),
        ],
    );
    let answer = post_chat_with(
        &served.base,
        &user_message("chat", "u1", "hi"),
        &format!("traceparent: {}\r\n", parent(TRACE)),
    );
    assert!(answer.contains("Hello."), "{answer}");
    // The server's batch goes out on its schedule (5 s by default).
    let spans = phoenix.spans_when("serve", |s| !named(s, "chat m").is_empty());
    all_in_the_callers_trace(&spans, TRACE);
    let ids: Vec<&Json> = spans.iter().map(|s| &s["context"]["span_id"]).collect();
    let roots: Vec<&Json> = spans
        .iter()
        .filter(|s| !ids.contains(&&s["parent_id"]))
        .collect();
    assert_eq!(roots.len(), 1, "{spans:#?}");
    assert_eq!(roots[0]["parent_id"], PARENT_SPAN, "{:#?}", roots[0]);
    let chat = named(&spans, "chat m")[0];
    assert_eq!(chat["span_kind"], "LLM");
    assert_eq!(attr(chat, "gen_ai.response.model"), "scripted-model");
    drop(served);
}

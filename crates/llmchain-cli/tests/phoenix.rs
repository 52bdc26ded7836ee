//! The spans as a real observability backend shows them: Arize Phoenix (`arize-phoenix`
//! from PyPI, started by the test), fed by `llmchain run` over OTLP, read back through
//! its REST API. Three turns: the defaults, content opted in, a failing tool. Phoenix
//! interprets the GenAI conventions (operation → AGENT / LLM / TOOL, usage → token
//! counts, the conversation id → a session), so this checks what a user of the backend
//! sees. Skipped (said so) without `LLMCHAIN_TEST_PHOENIX` (`.ci/third-party` installs it).

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{llmchain_with_env, serve, text};
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

#[test]
fn phoenix_shows_three_turns_as_the_conventions_say() {
    let Ok(bin) = std::env::var("LLMCHAIN_TEST_PHOENIX") else {
        eprintln!(
            "SKIPPED phoenix_shows_three_turns_as_the_conventions_say: set LLMCHAIN_TEST_PHOENIX (.ci/third-party)"
        );
        return;
    };
    let phoenix = start_phoenix(&bin);
    let sse = |s: &ResponseScript| render_stream(Format::OpenAiChat, s).unwrap();
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
    let spans = |project: &str| -> Vec<serde_json::Value> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some((200, body)) = get(&format!(
                "{}/v1/projects/{project}/spans?limit=100",
                phoenix.base
            )) {
                let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
                let data = v["data"].as_array().cloned().unwrap_or_default();
                if !data.is_empty() {
                    return data;
                }
            }
            assert!(
                Instant::now() < deadline,
                "Phoenix shows no span of {project}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    let of_kind = |spans: &[serde_json::Value], kind: &str| -> Vec<serde_json::Value> {
        spans
            .iter()
            .filter(|s| s["span_kind"] == kind)
            .cloned()
            .collect()
    };
    let attr = |s: &serde_json::Value, k: &str| s["attributes"][k].clone();

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

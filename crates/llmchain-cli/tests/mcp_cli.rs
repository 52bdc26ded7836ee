//! `llmchain mcp serve|list|call`, and the `--approve ask` review in a real terminal
//! (tmux).

mod common;

use common::{BIN, Session, bad_server_cmd, have_tmux};

use llmchain::tool::ToolContext;
use llmchain_mcp::{McpClient, McpOptions, ServerSpec};
use serde_json::{Value, json};

fn serve_cmd() -> String {
    format!("{BIN} mcp serve --root {}", env!("CARGO_MANIFEST_DIR"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_serve_serves_the_builtin_tools_over_stdio() {
    let client = McpClient::connect(
        ServerSpec::parse_command(&serve_cmd()).unwrap(),
        McpOptions::default(),
    )
    .await
    .unwrap();
    let tools = client.tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.tool.name()).collect();
    assert_eq!(names, ["calculator", "clock", "read_file"]);
    let calc = &tools[0];
    assert!(calc.tool.idempotent());
    let r = calc
        .tool
        .execute(
            json!({"expression": "(17 * 23) + 4"}),
            ToolContext::new("c1"),
        )
        .await;
    // Text only: no structured content to disagree with it.
    assert_eq!(r.content_text(), "(17 * 23) + 4 = 395");
    assert_eq!(r.processed_content, None);
    let r = calc
        .tool
        .execute(json!({"expression": "2 +* 2"}), ToolContext::new("c2"))
        .await;
    assert!(r.is_error(), "{r:?}");
    let r = tools[2]
        .tool
        .execute(json!({"path": "Cargo.toml"}), ToolContext::new("c3"))
        .await;
    assert!(r.content_text().contains("llmchain-cli"), "{r:?}");
    let r = tools[2]
        .tool
        .execute(
            json!({"path": "../../../etc/passwd"}),
            ToolContext::new("c4"),
        )
        .await;
    assert!(r.is_error(), "{r:?}");
}

/// `llmchain mcp call … calculator ARGS [--approve POLICY]`: exit code, stdout JSON,
/// stderr.
fn call(policy: Option<&str>, args: &str) -> (Option<i32>, Value, String) {
    let mut cmd = common::bare();
    cmd.args([
        "mcp",
        "call",
        "--no-builtin-tools",
        "--mcp",
        &serve_cmd(),
        "calculator",
        args,
    ]);
    if let Some(p) = policy {
        cmd.args(["--approve", p]);
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {:?} {stderr}", out.stdout));
    (out.status.code(), json, stderr)
}

/// Naming the tool is the approval: it runs without `--approve`, even outside a
/// terminal. A tool that did not run, or returned an error, exits 1.
#[test]
fn mcp_call_runs_the_named_tool_and_fails_on_an_error_result() {
    let (code, v, _) = call(None, r#"{"expression": "1+2"}"#);
    assert_eq!(code, Some(0));
    assert_eq!(v["ran"], json!(true));
    assert_eq!(v["content"], json!("1+2 = 3"));
    let (code, v, stderr) = call(None, r#"{"expression": "1+"}"#);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(v["ran"], json!(true));
    assert_eq!(v["is_error"], json!(true));
    assert!(stderr.starts_with("llmchain: calculator "), "{stderr}");
    let (code, v, stderr) = call(Some("never"), r#"{"expression": "1+2"}"#);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(v["ran"], json!(false));
    assert!(v["reason"].as_str().unwrap().contains("--approve never"));
    assert!(stderr.contains("calculator was not run"), "{stderr}");
}

#[test]
fn mcp_list_and_bad_servers_fail_cleanly() {
    // The names `run` sends: the built-in tools hold these, so the server's get its prefix.
    let out = common::bare()
        .args(["mcp", "list", "--mcp", &serve_cmd()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("llmchain__calculator\tCalculate\t[read-only, idempotent]\tllmchain\t"),
        "{text}"
    );
    let out = common::bare()
        .args(["mcp", "list", "--no-builtin-tools", "--mcp", &serve_cmd()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("calculator\tCalculate\t[read-only, idempotent]"),
        "{text}"
    );

    let out = common::bare()
        .args(["mcp", "list", "--mcp", "/nonexistent/server --x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("MCP server `/nonexistent/server` could not start"),
        "{err}"
    );

    let out = common::bare()
        .args(["mcp", "list", "--mcp", "\"unterminated"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// A server that dies at start: its stderr is shown (it used to be discarded), with the
/// escape sequences it wrote shown escaped, never sent to the terminal.
#[test]
fn a_dying_servers_stderr_is_shown_escaped() {
    let server = r#"sh -c 'printf "\033]0;pwned\007config missing: set TOKEN\n" >&2; exit 1'"#;
    let out = common::bare()
        .args(["mcp", "list", "--mcp", server])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains('\u{1b}') && !err.contains('\u{7}'), "{err:?}");
    assert!(
        err.contains("its stderr ends with: \\u{1b}]0;pwned\\u{7}config missing: set TOKEN"),
        "{err}"
    );
}

#[test]
fn approve_ask_in_a_real_terminal_edit_then_approve() {
    if !have_tmux("approve_ask_in_a_real_terminal") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cmd = format!(
        "cd {} && {} {BIN} mcp call --no-builtin-tools --mcp '{}' calculator '{{\"expression\": \"2*3\"}}' --approve ask; echo EXIT=$?; sleep 30",
        dir.path().display(),
        common::hermetic(dir.path()),
        serve_cmd()
    );
    let t = Session::start("llmchain-review", &cmd);
    let screen = t.wait_for("[a]pprove  [e]dit  [r]eject  [d]eny >");
    // `ask` asks about read-only tools too; the hints are shown.
    assert!(
        screen.contains(
            "call cli_1: calculator — Calculate [server llmchain says: read-only, idempotent; not verified"
        ),
        "{screen}"
    );
    assert!(screen.contains(r#""expression": "2*3""#), "{screen}");

    t.keys(&["e", "Enter"]);
    t.wait_for("new arguments as JSON on one line >");
    t.type_text(r#"{"expression": "6*7"}"#);
    t.keys(&["Enter"]);
    // (Not the arguments themselves: the typed line shows them before any answer.)
    t.wait_for("new arguments:");
    t.keys(&["a", "Enter"]);
    let screen = t.wait_for("EXIT=");
    assert!(screen.contains(r#""content":"6*7 = 42""#), "{screen}");
    assert!(screen.contains("EXIT=0"), "{screen}");
}

/// An HTTP server that cannot be reached is named with the cause, and no Rust type name
/// (rmcp's `WorkerTransport<…>`) reaches the user.
#[test]
fn an_unreachable_http_server_is_named_without_rust_types() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/mcp");
    let out = common::bare()
        .args(["mcp", "list", "--mcp-http", &url])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("error sending request"), "{err}");
    assert!(
        !err.contains("::") && !err.contains("WorkerTransport"),
        "{err}"
    );
}

/// `--mcp-start-timeout` bounds a server that never lists its tools (10 s by default).
#[test]
fn a_hung_server_fails_after_the_start_timeout() {
    let Some(server) = bad_server_cmd("a_hung_server_fails_after_the_start_timeout", "list-hang")
    else {
        return;
    };
    let out = common::bare()
        .args(["mcp", "list", "--mcp", &server, "--mcp-start-timeout", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no answer to tools/list within 1s (--mcp-start-timeout)"),
        "{err}"
    );
}

/// `mcp list` names each tool's server and schema, `--json` gives them as objects, and
/// `--mcp-prefix` tells two copies of one server apart.
#[test]
fn mcp_list_shows_server_and_schema_and_prefixes_on_request() {
    let out = common::bare()
        .args([
            "mcp",
            "list",
            "--no-builtin-tools",
            "--mcp",
            &serve_cmd(),
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tools: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let calc = tools.iter().find(|t| t["name"] == "calculator").unwrap();
    assert_eq!(calc["server"], "llmchain");
    assert_eq!(calc["input_schema"]["required"], json!(["expression"]));
    assert_eq!(calc["hints"], json!(["read-only", "idempotent"]));
    let out = common::bare()
        .args([
            "mcp",
            "list",
            "--mcp",
            &serve_cmd(),
            "--mcp",
            &serve_cmd(),
            "--mcp-prefix",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("llmchain__calculator\t"), "{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with("llmchain__clock\t"))
        .unwrap();
    assert!(
        line.contains("\tllmchain\t") && line.contains(r#""type":"object""#),
        "{line}"
    );
}

/// `mcp call` shows every part of a result from the official Python SDK server: text
/// apart, the image and the blob as lines with type and size, written to files with
/// `--out`. Needs `LLMCHAIN_TEST_MCP_PYTHON` (CI sets it); says `skipped` otherwise.
#[test]
fn mcp_call_shows_every_part_and_writes_files_with_out() {
    let Ok(py) = std::env::var("LLMCHAIN_TEST_MCP_PYTHON") else {
        eprintln!(
            "SKIPPED mcp_call_shows_every_part_and_writes_files_with_out: LLMCHAIN_TEST_MCP_PYTHON is not set"
        );
        return;
    };
    let script = format!(
        "{}/../llmchain-mcp/tests/servers/sdk_server.py",
        env!("CARGO_MANIFEST_DIR")
    );
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("parts");
    let out = common::bare()
        .args([
            "mcp",
            "call",
            "--mcp",
            &format!("{py} {script}"),
            "resources",
            "{}",
            "--out",
        ])
        .arg(&out_dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let types: Vec<&str> = v["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["text", "text", "text", "file", "image", "text"]);
    assert_eq!(v["parts"][3]["media"], "application/gzip");
    assert_eq!(v["parts"][3]["bytes"], 21);
    assert_eq!(v["processed_content"], json!({"count": 6}));
    assert!(
        v["content"]
            .as_str()
            .unwrap()
            .starts_with("Resource 3:\n\nResource 3: This"),
        "{v}"
    );
    assert!(
        stderr.contains("part 3: file, application/gzip, 21 bytes, written to "),
        "{stderr}"
    );
    assert!(
        stderr.contains("part 4: image, image/png, 66 bytes"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(out_dir.join("archive.gz")).unwrap().len(), 21);
    let png = std::fs::read(out_dir.join("part-4.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG"));
}

/// `mcp list` and `mcp call` without --mcp read the config profile's servers and trust,
/// and name the tools as `run` does; a profile without servers says so.
#[test]
fn mcp_list_and_call_read_the_profiles_servers() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "mcp = [{:?}]\ntrust = [\"llmchain\"]\n\n[profiles.bare]\nprovider = \"openai\"\n",
            serve_cmd()
        ),
    )
    .unwrap();
    let run = |args: &[&str]| {
        common::bare()
            .args(args)
            .env("LLMCHAIN_CONFIG", &config)
            .output()
            .unwrap()
    };
    let out = run(&["mcp", "list"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for name in [
        "llmchain__calculator\t",
        "llmchain__clock\t",
        "llmchain__read_file\t",
    ] {
        assert!(text.contains(name), "{name}: {text}");
    }
    let out = run(&[
        "mcp",
        "call",
        "llmchain__calculator",
        r#"{"expression": "6*7"}"#,
    ]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["content"], json!("6*7 = 42"), "{v}");
    let out = run(&["mcp", "list", "--profile", "bare"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the profile \"bare\"") && err.contains("has none"),
        "{err}"
    );
}

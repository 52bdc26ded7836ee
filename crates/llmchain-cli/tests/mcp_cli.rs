//! `llmchain mcp serve|list|call`, and the `--approve ask` review in a real terminal
//! (tmux).

use std::process::Command;
use std::time::Duration;

use llmchain::tool::ToolContext;
use llmchain_mcp::{McpClient, McpOptions, ServerSpec};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_llmchain");

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
    assert_eq!(r.content_text(), "(17 * 23) + 4 = 395");
    assert_eq!(r.processed_content, Some(json!({"value": 395.0})));
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

fn call(policy: &str, args: &str) -> Value {
    let out = Command::new(BIN)
        .args([
            "mcp",
            "call",
            "--mcp",
            &serve_cmd(),
            "calculator",
            args,
            "--approve",
            policy,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn mcp_call_with_always_and_never() {
    let v = call("always", r#"{"expression": "1+2"}"#);
    assert_eq!(v["ran"], json!(true));
    assert_eq!(v["content"], json!("1+2 = 3"));
    let v = call("never", r#"{"expression": "1+2"}"#);
    assert_eq!(v["ran"], json!(false));
    assert!(v["reason"].as_str().unwrap().contains("--approve never"));
}

#[test]
fn mcp_list_and_bad_servers_fail_cleanly() {
    let out = Command::new(BIN)
        .args(["mcp", "list", "--mcp", &serve_cmd()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("calculator\tCalculate\t[destructive, idempotent, open-world]"),
        "{text}"
    );

    let out = Command::new(BIN)
        .args(["mcp", "list", "--mcp", "/nonexistent/server --x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("MCP server `/nonexistent/server` could not start"),
        "{err}"
    );

    let out = Command::new(BIN)
        .args(["mcp", "list", "--mcp", "\"unterminated"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

fn tmux(args: &[&str]) -> std::process::Output {
    Command::new("tmux").args(args).output().unwrap()
}

fn wait_for(session: &str, needle: &str) -> String {
    let mut last = String::new();
    for _ in 0..150 {
        let out = tmux(&["capture-pane", "-p", "-J", "-t", session, "-S", "-200"]);
        last = String::from_utf8_lossy(&out.stdout).into_owned();
        if last.contains(needle) {
            return last;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("{needle:?} never appeared in the terminal:\n{last}");
}

#[test]
fn approve_ask_in_a_real_terminal_edit_then_approve() {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("SKIPPED approve_ask_in_a_real_terminal: tmux is not installed");
        return;
    }
    let session = format!("llmchain-review-{}", std::process::id());
    let cmd = format!(
        "env -u EDITOR {BIN} mcp call --mcp '{}' calculator '{{\"expression\": \"2*3\"}}' --approve ask; echo EXIT=$?; sleep 30",
        serve_cmd()
    );
    let out = tmux(&[
        "new-session",
        "-d",
        "-s",
        &session,
        "-x",
        "200",
        "-y",
        "50",
        &cmd,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    struct Kill(String);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = tmux(&["kill-session", "-t", &self.0]);
        }
    }
    let _guard = Kill(session.clone());

    let screen = wait_for(&session, "[a]pprove  [e]dit  [r]eject  [d]eny >");
    assert!(
        screen.contains("tool call: calculator — Calculate [destructive, idempotent, open-world]"),
        "{screen}"
    );
    assert!(screen.contains(r#""expression": "2*3""#), "{screen}");

    tmux(&["send-keys", "-t", &session, "e", "Enter"]);
    wait_for(&session, "new arguments as JSON on one line >");
    tmux(&[
        "send-keys",
        "-t",
        &session,
        "-l",
        r#"{"expression": "6*7"}"#,
    ]);
    tmux(&["send-keys", "-t", &session, "Enter"]);
    let screen = wait_for(&session, r#""expression": "6*7""#);
    assert!(screen.contains("new arguments:"), "{screen}");
    tmux(&["send-keys", "-t", &session, "a", "Enter"]);
    let screen = wait_for(&session, "EXIT=");
    assert!(screen.contains(r#""content":"6*7 = 42""#), "{screen}");
    assert!(screen.contains("EXIT=0"), "{screen}");
}

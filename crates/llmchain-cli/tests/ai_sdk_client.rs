//! The AI SDK's own client drives `llmchain serve` (issue 28): `tests/js/ai_sdk_client.mjs`
//! runs a subclass of the `ai` package's `AbstractChat` with `DefaultChatTransport`, as
//! `useChat` does, against the real binary, for both current majors (pinned in
//! `.ci/third-party`): a text chat, an approval with the automatic resend, a denial, a
//! regenerate, the server killed and restarted between an approval request and its
//! answer, a resumed stream, an approval from `llmchain reviews approve`, and a stream
//! error. Every response is read again with the package's own chunk schema and
//! `readUIMessageStream({terminateOnError: true})`. The model is a local server speaking
//! OpenAI Chat Completions; the tool is an MCP server that logs each execution.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Reply, Served, files_calls, files_server_cmd, llmchain, serve_replies, write_config};
use llmchain::provider::Format;
use llmchain::provider::render::{ResponseScript, render_stream};

fn body(script: &ResponseScript) -> Vec<u8> {
    render_stream(Format::OPENAI_CHAT, script).unwrap()
}

fn reply(script: ResponseScript) -> Reply {
    Reply::Body(body(&script))
}

fn write_call(id: &str, path: &str, content: &str) -> Reply {
    reply(ResponseScript::tool_call(
        id,
        "write_file",
        serde_json::json!({"path": path, "content": content}).to_string(),
    ))
}

/// The client's scenarios, in order, each with the model's replies.
fn replies() -> Vec<Reply> {
    vec![
        // 1. text
        reply(ResponseScript::text("Hello from llmchain.")),
        // 2. approve
        write_call("call_a1", "approved.txt", "hello"),
        reply(ResponseScript::text("Wrote approved.txt.")),
        // 3. deny
        write_call("call_d1", "denied.txt", "no"),
        reply(ResponseScript::text("Understood, not written.")),
        // 4. regenerate
        reply(ResponseScript::text("Joke one.")),
        reply(ResponseScript::text("Joke two.")),
        // 5. restart between the request and the answer
        write_call("call_r1", "restart.txt", "after restart"),
        reply(ResponseScript::text("Wrote it after the restart.")),
        // 6. resume: a slow answer
        Reply::Trickle(
            body(&ResponseScript::text(
                "One. Two. Three. Four. Five. Six. Seven. Eight.",
            )),
            Duration::from_millis(250),
        ),
        // 7. approved from the CLI
        write_call("call_c1", "cli.txt", "from the cli"),
        reply(ResponseScript::text("Approved from the CLI.")),
        // 8. the provider refuses
        Reply::Status(
            400,
            r#"{"error":{"message":"the model is overloaded on purpose","type":"invalid_request_error"}}"#,
        ),
    ]
}

/// Runs the client with the `ai` package installed under `$var` against a server on
/// `db`.
fn drive(var: &str, test: &str, db: impl FnOnce(&std::path::Path) -> Option<String>) {
    let Some(ai) = common::third_party(var, test) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let Some(db) = db(dir) else { return };
    let root = dir.join("files");
    std::fs::create_dir(&root).unwrap();
    let Some(files) = files_server_cmd(test, &root, 0) else {
        return;
    };
    let (base, seen) = serve_replies(replies());
    write_config(
        dir,
        &format!(
            "base_url = \"{base}\"\nmodel = \"m\"\nmcp = [\"{files}\"]\nno_builtin_tools = true\napprove = \"ask\"\n\n\
             [[policy]]\nid = \"writes-ask\"\ntool = \"mcp:*\"\neffect = \"ask\"\nreason = \"A person checks writes.\"\n"
        ),
    );
    let mut served = Served::start(dir, &["--db", &db]);

    // The script beside the package, so that `import 'ai'` finds it.
    let js = dir.join("js");
    std::fs::create_dir(&js).unwrap();
    std::os::unix::fs::symlink(format!("{ai}/node_modules"), js.join("node_modules")).unwrap();
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/js/ai_sdk_client.mjs"),
        js.join("client.mjs"),
    )
    .unwrap();
    let mut node = Command::new("node")
        .arg(js.join("client.mjs"))
        .arg(&served.base)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs");
    let mut stdin = node.stdin.take().unwrap();
    let stdout = BufReader::new(node.stdout.take().unwrap());
    let mut report = None;
    for line in stdout.lines() {
        let line = line.unwrap();
        eprintln!("client: {line}");
        if line.starts_with("SYNC restart") {
            served.restart();
            writeln!(stdin, "go").unwrap();
        } else if let Some(rest) = line.strip_prefix("SYNC approve-from-cli ") {
            let v: serde_json::Value = serde_json::from_str(rest).unwrap();
            let id = v["approvalId"].as_str().unwrap();
            let out = llmchain(
                &["reviews", "approve", id, "--db", &db, "--by", "carol"],
                dir,
            );
            assert!(out.status.success(), "{}", common::text(&out));
            writeln!(stdin, "go").unwrap();
        } else if let Some(rest) = line.strip_prefix("OK ") {
            report = Some(serde_json::from_str::<serde_json::Value>(rest).unwrap());
        }
    }
    let out = node.wait_with_output().unwrap();
    assert!(
        out.status.success() && report.is_some(),
        "the client failed:\n{}\nserver:\n{}",
        String::from_utf8_lossy(&out.stderr),
        served.log()
    );

    // Each approved call ran once, the denied one never; the model was asked exactly
    // once per reply (resumes, reloads and a stale approval asked it nothing).
    let ran: Vec<String> = files_calls(&root)
        .iter()
        .map(|c| c["path"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(ran, ["approved.txt", "restart.txt", "cli.txt"], "{ran:?}");
    assert!(!root.join("denied.txt").exists());
    assert_eq!(seen.lock().unwrap().len(), replies().len());
    let log = served.log();
    assert!(!log.contains("panicked"), "{log}");
}

#[test]
fn ai_6_drives_a_chat_with_approvals_on_sqlite() {
    drive(
        "LLMCHAIN_TEST_AI6",
        "ai_6_drives_a_chat_with_approvals_on_sqlite",
        |dir| Some(format!("sqlite://{}", dir.join("chats.db").display())),
    );
}

#[test]
fn ai_7_drives_a_chat_with_approvals_on_postgres() {
    drive(
        "LLMCHAIN_TEST_AI7",
        "ai_7_drives_a_chat_with_approvals_on_postgres",
        |_| common::pg_db("ai_7_drives_a_chat_with_approvals_on_postgres"),
    );
}

#[test]
fn ai_7_drives_a_chat_with_approvals_on_sqlite() {
    drive(
        "LLMCHAIN_TEST_AI7",
        "ai_7_drives_a_chat_with_approvals_on_sqlite",
        |dir| Some(format!("sqlite://{}", dir.join("chats.db").display())),
    );
}

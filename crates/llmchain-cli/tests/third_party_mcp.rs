//! Real third-party MCP servers through the CLI: `@modelcontextprotocol/server-filesystem`
//! and `server-everything` from npm, `mcp-server-time` and `mcp-server-git` from PyPI.
//! Each is listed, two or three of its tools are called with `llmchain mcp call`, and a
//! whole `llmchain run` uses one against a local scripted provider. Needs
//! `LLMCHAIN_TEST_NPM_BIN` and `LLMCHAIN_TEST_MCP_SERVERS_BIN` (`.ci/third-party` sets
//! them); prints `SKIPPED` and passes without them.

mod common;

use std::process::Command;

use common::{llmchain, serve, third_party as bin_dir};
use llmchain::provider::Format;
use llmchain::provider::render::{ResponseScript, render_stream};
use serde_json::{Value, json};

/// Seconds a server may take to start: generous, since node and Python start slowly on
/// a loaded machine (the CLI's default is 10).
const START: &str = "90";

/// `llmchain mcp list --json --mcp CMD`: the tools' names.
fn list(cmd: &str) -> Vec<String> {
    let out = common::bare()
        .args([
            "mcp",
            "list",
            "--json",
            "--mcp-start-timeout",
            START,
            "--mcp",
            cmd,
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{cmd}: {stderr}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["name"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

/// `llmchain mcp call --mcp CMD TOOL ARGS`: the printed result, asserting it ran fine.
fn call(cmd: &str, tool: &str, args: Value) -> Value {
    let out = common::bare()
        .args([
            "mcp",
            "call",
            "--mcp-start-timeout",
            START,
            "--mcp",
            cmd,
            tool,
            &args.to_string(),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{tool}: {stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ran"], true);
    assert_eq!(v["is_error"], false, "{tool}: {v}");
    v
}

fn has(names: &[String], want: &[&str]) {
    for w in want {
        assert!(names.iter().any(|n| n == w), "no {w} in {names:?}");
    }
}

#[test]
fn server_filesystem_lists_reads_and_describes() {
    let Some(npm) = bin_dir(
        "LLMCHAIN_TEST_NPM_BIN",
        "server_filesystem_lists_reads_and_describes",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("notes.txt"), "Ship on Friday.\n").unwrap();
    let cmd = format!("{npm}/mcp-server-filesystem {}", root.display());
    has(
        &list(&cmd),
        &["read_text_file", "list_directory", "get_file_info"],
    );
    let path = root.join("notes.txt").display().to_string();
    let v = call(&cmd, "read_text_file", json!({"path": path}));
    assert!(
        v["content"].as_str().unwrap().contains("Ship on Friday."),
        "{v}"
    );
    let v = call(
        &cmd,
        "list_directory",
        json!({"path": root.display().to_string()}),
    );
    assert!(
        v["content"].as_str().unwrap().contains("[FILE] notes.txt"),
        "{v}"
    );
    let v = call(&cmd, "get_file_info", json!({"path": path}));
    assert!(v["content"].as_str().unwrap().contains("size"), "{v}");
}

#[test]
fn server_everything_text_image_blob_and_structured_content() {
    let Some(npm) = bin_dir(
        "LLMCHAIN_TEST_NPM_BIN",
        "server_everything_text_image_blob_and_structured_content",
    ) else {
        return;
    };
    let cmd = format!("{npm}/mcp-server-everything");
    has(
        &list(&cmd),
        &["echo", "get-sum", "get-tiny-image", "gzip-file-as-resource"],
    );
    let v = call(&cmd, "echo", json!({"message": "hi there"}));
    assert_eq!(v["content"], "Echo: hi there");
    let v = call(&cmd, "get-sum", json!({"a": 2, "b": 3}));
    assert!(v["content"].as_str().unwrap().contains('5'), "{v}");
    let v = call(&cmd, "get-tiny-image", json!({}));
    let parts = v["parts"].as_array().unwrap();
    assert!(
        parts
            .iter()
            .any(|p| p["type"] == "image" && p["media"] == "image/png"),
        "{v}"
    );
    // A blob resource (no network: the file is a data URI).
    let v = call(
        &cmd,
        "gzip-file-as-resource",
        json!({"name": "notes.txt.gz", "data": "data:text/plain;base64,U2hpcCBvbiBGcmlkYXku", "outputType": "resource"}),
    );
    assert_eq!(v["parts"][0]["type"], "file", "{v}");
    assert_eq!(v["parts"][0]["media"], "application/gzip", "{v}");
    let v = call(
        &cmd,
        "get-structured-content",
        json!({"location": "Chicago"}),
    );
    assert!(v["processed_content"]["temperature"].is_number(), "{v}");
}

#[test]
fn mcp_server_time_and_git() {
    let Some(py) = bin_dir("LLMCHAIN_TEST_MCP_SERVERS_BIN", "mcp_server_time_and_git") else {
        return;
    };
    let time = format!("{py}/mcp-server-time --local-timezone UTC");
    has(&list(&time), &["get_current_time", "convert_time"]);
    let v = call(
        &time,
        "get_current_time",
        json!({"timezone": "Europe/Paris"}),
    );
    assert!(
        v["content"].as_str().unwrap().contains("Europe/Paris"),
        "{v}"
    );
    let v = call(
        &time,
        "convert_time",
        json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
    );
    assert!(v["content"].as_str().unwrap().contains("21:00"), "{v}");

    // A repository of one commit.
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().canonicalize().unwrap();
    let git = |args: &[&str]| {
        let ok = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(&repo)
            .output()
            .unwrap();
        assert!(ok.status.success(), "{ok:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(repo.join("a.txt"), "a\n").unwrap();
    git(&["add", "a.txt"]);
    git(&["commit", "-q", "-m", "first commit"]);
    std::fs::write(repo.join("b.txt"), "b\n").unwrap();
    let cmd = format!("{py}/mcp-server-git --repository {}", repo.display());
    has(&list(&cmd), &["git_status", "git_log"]);
    let r = repo.display().to_string();
    let v = call(&cmd, "git_status", json!({"repo_path": r}));
    assert!(v["content"].as_str().unwrap().contains("b.txt"), "{v}");
    let v = call(&cmd, "git_log", json!({"repo_path": r}));
    assert!(
        v["content"].as_str().unwrap().contains("first commit"),
        "{v}"
    );
}

/// A whole `llmchain run` with a real server's tool: the scripted model calls `tool`
/// with `args`, the server answers, and the model's second request carries a result
/// holding `expect`.
fn whole_run(server: &str, trust: &str, tool: &str, args: Value, expect: &str) {
    let dir = tempfile::tempdir().unwrap();
    let first = ResponseScript::tool_call("call_1", tool, args.to_string());
    let second = ResponseScript::text("Done.");
    let (base, seen) = serve(vec![
        render_stream(Format::OPENAI_CHAT, &first).unwrap(),
        render_stream(Format::OPENAI_CHAT, &second).unwrap(),
    ]);
    let db = format!("sqlite://{}", dir.path().join("run.db").display());
    let out = llmchain(
        &[
            "run",
            "--base-url",
            &base,
            "--db",
            &db,
            "--mcp-start-timeout",
            START,
            "--mcp",
            server,
            "--trust",
            trust,
            "--approve",
            "always",
            "Go.",
        ],
        dir.path(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{tool}: {stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("Done."));
    let requests = seen.lock().unwrap();
    assert_eq!(requests.len(), 2, "{tool}");
    let tool_msg = requests[1].1["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .cloned()
        .unwrap();
    assert!(
        tool_msg["content"].as_str().unwrap().contains(expect),
        "{tool}: {tool_msg}"
    );
}

/// A whole `llmchain run` with each server's tools against a local scripted provider.
#[test]
fn a_whole_run_with_each_server() {
    let test = "a_whole_run_with_each_server";
    let (Some(npm), Some(py)) = (
        bin_dir("LLMCHAIN_TEST_NPM_BIN", test),
        bin_dir("LLMCHAIN_TEST_MCP_SERVERS_BIN", test),
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("notes.txt"), "Ship on Friday.\n").unwrap();
    let notes = root.join("notes.txt").display().to_string();
    whole_run(
        &format!("{npm}/mcp-server-everything"),
        "mcp-server-everything",
        "get-sum",
        json!({"a": 20, "b": 22}),
        "42",
    );
    whole_run(
        &format!("{npm}/mcp-server-filesystem {}", root.display()),
        "mcp-server-filesystem",
        "read_text_file",
        json!({"path": notes}),
        "Ship on Friday.",
    );
    whole_run(
        &format!("{py}/mcp-server-time --local-timezone UTC"),
        "mcp-server-time",
        "get_current_time",
        json!({"timezone": "Asia/Tokyo"}),
        "Asia/Tokyo",
    );
    let ok = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(ok.status.success());
    whole_run(
        &format!("{py}/mcp-server-git --repository {}", root.display()),
        "mcp-server-git",
        "git_status",
        json!({"repo_path": root.display().to_string()}),
        "notes.txt",
    );
}

/// The review inbox with the real `server-filesystem` (issue 27, reproductions 1 and 4
/// end to end): a run queued under a profile whose policy asks pauses in the worker;
/// `llmchain reviews edit` from another process changes the content; a worker resumes
/// it: the file holds the edited content, written once, and the stored call, the export
/// and the model's next request all carry the arguments that ran. On SQLite and, when
/// available, PostgreSQL.
#[test]
fn server_filesystem_write_waits_for_the_review_inbox() {
    let test = "server_filesystem_write_waits_for_the_review_inbox";
    let Some(npm) = bin_dir("LLMCHAIN_TEST_NPM_BIN", test) else {
        return;
    };
    common::on_both_databases(test, |dir, db| {
        let root = dir.join("files");
        std::fs::create_dir(&root).unwrap();
        let root = root.canonicalize().unwrap();
        let path = root.join("out.txt").display().to_string();
        let (base, seen) = serve(vec![
            render_stream(
                Format::OPENAI_CHAT,
                &ResponseScript::tool_call(
                    "call_1",
                    "write_file",
                    json!({"path": path, "content": "original"}).to_string(),
                ),
            )
            .unwrap(),
            render_stream(Format::OPENAI_CHAT, &ResponseScript::text("Written.")).unwrap(),
        ]);
        common::write_config(
            dir,
            &format!(
                "base_url = \"{base}\"\nmodel = \"m\"\napprove = \"ask\"\nmcp_start_timeout = {START}\n\
                 mcp = [\"{npm}/mcp-server-filesystem {}\"]\n",
                root.display()
            ),
        );
        let queued = llmchain(&["run", "--enqueue", "--db", db, "write out.txt"], dir);
        assert!(queued.status.success(), "{}", common::text(&queued));
        let run = String::from_utf8_lossy(&queued.stdout).trim().to_owned();
        let worker = || llmchain(&["worker", "--db", db, "--drain", "--poll-ms", "20"], dir);
        let out = worker();
        assert!(
            common::text(&out).contains("1 call(s) wait for review"),
            "{}",
            common::text(&out)
        );
        assert!(
            !root.join("out.txt").exists(),
            "nothing written before the decision"
        );
        let list = llmchain(&["reviews", "--db", db, "list", "--json"], dir);
        let review: Value = serde_json::from_str(
            String::from_utf8_lossy(&list.stdout)
                .lines()
                .next()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(review["tool"], "write_file");
        assert_eq!(review["arguments"]["content"], "original");
        let edited = json!({"path": path, "content": "edited"}).to_string();
        let out = llmchain(
            &[
                "reviews",
                "--db",
                db,
                "edit",
                review["id"].as_str().unwrap(),
                &edited,
            ],
            dir,
        );
        assert!(out.status.success(), "{}", common::text(&out));
        let out = worker();
        assert!(
            common::text(&out).contains(&format!("run {run} done")),
            "{}",
            common::text(&out)
        );
        assert_eq!(
            std::fs::read_to_string(root.join("out.txt")).unwrap(),
            "edited"
        );
        let shown: Value = serde_json::from_slice(
            &llmchain(&["runs", "--db", db, "show", "--json", &run], dir).stdout,
        )
        .unwrap();
        let c = common::export(db, shown["conversation_id"].as_str().unwrap(), dir);
        let call = &c.messages[1].tool_calls[0];
        assert_eq!(call.arguments_as_map()["content"], "edited");
        assert_eq!(call.original_arguments().unwrap()["content"], "original");
        assert!(call.human_approved());
        assert_eq!(call.execution_status(), "completed");
        let requests = seen.lock().unwrap();
        let sent = requests[1].1["messages"][1]["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            sent.contains("edited") && !sent.contains("original"),
            "{sent}"
        );
    });
}

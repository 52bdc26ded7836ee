//! The distributed path from the command line: `run --enqueue` stores a pending run
//! with its job, `worker` executes it against a local server speaking OpenAI Chat
//! Completions, `runs` shows and steers it; and an interactive `conversations resume`
//! is refused while another process holds the conversation's run (R5).

mod common;

use std::time::Duration;

use common::{llmchain, serve};
use llmchain::conversation::Conversation;
use llmchain::message::{Message, Role};
use llmchain::provider::Format;
use llmchain::provider::render::{ResponseScript, render_stream};
use llmchain_store::{AnyStore, NewConversation, RunState, Store};

fn text(out: &std::process::Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The job records the MCP server: the worker starts it and the model's call goes to it
/// (its root holds the notes; the worker's own directory does not).
#[test]
fn enqueue_then_a_worker_runs_it_and_runs_shows_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("mcp-root");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("notes.txt"), "Ship on Friday.\n").unwrap();
    let mcp = common::serve_cmd(&root);
    let first =
        ResponseScript::tool_call("call_1", "llmchain__read_file", r#"{"path":"notes.txt"}"#);
    let second = ResponseScript::text("Your notes say: ship on Friday.");
    let (base, seen) = serve(vec![
        render_stream(Format::OpenAiChat, &first).unwrap(),
        render_stream(Format::OpenAiChat, &second).unwrap(),
    ]);
    let db = format!("sqlite://{}", dir.path().join("queue.db").display());

    let queued = llmchain(
        &[
            "run",
            "--enqueue",
            "--db",
            &db,
            "--base-url",
            &base,
            "--model",
            "local-model",
            "--mcp",
            &mcp,
            "--trust",
            "llmchain",
            "--max-attempts",
            "3",
            "Summarise notes.txt",
        ],
        dir.path(),
    );
    assert!(queued.status.success(), "{}", text(&queued));
    let run_id = String::from_utf8_lossy(&queued.stdout).trim().to_owned();
    assert_eq!(run_id.len(), 36, "{}", text(&queued));
    assert!(seen.lock().unwrap().is_empty(), "nothing ran yet");

    let list = llmchain(&["runs", "--db", &db, "list"], dir.path());
    let listed = text(&list);
    assert!(
        listed.contains(&run_id) && listed.contains("pending"),
        "{listed}"
    );
    assert!(listed.contains("attempt 0/3"), "{listed}");

    let worker = llmchain(
        &[
            "worker",
            "--db",
            &db,
            "--drain",
            "--poll-ms",
            "20",
            "--concurrency",
            "2",
        ],
        dir.path(),
    );
    let worked = text(&worker);
    assert!(worker.status.success(), "{worked}");
    assert!(worked.contains("1 claimed, 1 completed"), "{worked}");
    assert_eq!(seen.lock().unwrap().len(), 2, "two model calls");

    let show = llmchain(&["runs", "--db", &db, "show", &run_id], dir.path());
    let shown: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(shown["status"], "done");
    assert_eq!(shown["attempt"], 1);
    assert_eq!(shown["job"]["model"], "local-model");
    assert_eq!(shown["job"]["base_url"], base.as_str());
    assert_eq!(shown["job"]["mcp"][0], mcp.as_str(), "{shown}");
    assert_eq!(shown["job"]["trust"][0], "llmchain", "{shown}");
    let conversation_id = shown["conversation_id"].as_str().unwrap().to_owned();
    let c = common::export(&db, &conversation_id, dir.path());
    let roles: Vec<Role> = c.messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );
    assert!(
        c.messages[2].tool_results[0]
            .content_text()
            .contains("Ship on Friday."),
        "{:?}",
        c.messages[2].tool_results[0]
    );

    // Steering: a finished run cannot be cancelled; a done one cannot be retried.
    let cancel = llmchain(&["runs", "--db", &db, "cancel", &run_id], dir.path());
    assert_eq!(cancel.status.code(), Some(2), "{}", text(&cancel));
    assert!(text(&cancel).contains("is done"), "{}", text(&cancel));
    let retry = llmchain(&["runs", "--db", &db, "retry", &run_id], dir.path());
    assert_eq!(retry.status.code(), Some(2), "{}", text(&retry));
    let missing = llmchain(&["runs", "--db", &db, "show", "nope"], dir.path());
    assert_eq!(missing.status.code(), Some(2));
}

#[test]
fn a_queued_run_can_be_cancelled_and_retried() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("queue.db").display());
    let queued = llmchain(
        &[
            "run",
            "--enqueue",
            "--db",
            &db,
            "--base-url",
            "http://127.0.0.1:9/v1",
            "hi",
        ],
        dir.path(),
    );
    let run_id = String::from_utf8_lossy(&queued.stdout).trim().to_owned();
    let cancel = llmchain(&["runs", "--db", &db, "cancel", &run_id], dir.path());
    assert!(cancel.status.success(), "{}", text(&cancel));
    let list = llmchain(
        &[
            "runs",
            "--db",
            &db,
            "list",
            "--status",
            "cancelled",
            "--json",
        ],
        dir.path(),
    );
    let line: serde_json::Value = serde_json::from_str(
        String::from_utf8_lossy(&list.stdout)
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(line["id"], run_id.as_str());
    let retry = llmchain(&["runs", "--db", &db, "retry", &run_id], dir.path());
    assert!(retry.status.success(), "{}", text(&retry));
    let bad = llmchain(
        &["runs", "--db", &db, "list", "--status", "sleeping"],
        dir.path(),
    );
    assert_eq!(bad.status.code(), Some(2));
}

/// R5: while another process holds the conversation's run, `resume` refuses, and the
/// outstanding call does not run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_is_refused_while_another_process_holds_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("held.db").display());
    let store = AnyStore::open(&db).await.unwrap();
    let mut c = Conversation::new();
    c.messages.push(Message::user("what time is it?"));
    c.messages.push(Message::assistant_with_calls(
        "",
        vec![llmchain::message::ToolCall::function("call_1", "clock", "{}").unwrap()],
    ));
    let id = store
        .create_conversation(NewConversation::from_conversation(c))
        .await
        .unwrap();
    let held = store
        .claim_conversation(
            &id,
            "other-process",
            Duration::from_secs(30),
            &RunState::default(),
        )
        .await
        .unwrap();

    let path = dir.path().to_owned();
    let (db2, id2) = (db.clone(), id.clone());
    let out = tokio::task::spawn_blocking(move || {
        llmchain(&["conversations", "--db", &db2, "resume", &id2], &path)
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("is being run by \"other-process\""),
        "{}",
        text(&out)
    );
    let stored = store.get_conversation(&id).await.unwrap().unwrap();
    assert_eq!(stored.conversation.messages.len(), 2, "nothing ran");

    // Once released, resume runs the call.
    let mut done = held.state.clone();
    done.status = llmchain_store::RunStatus::Done;
    store
        .complete_run(&held.lease().unwrap(), &done)
        .await
        .unwrap();
    let path = dir.path().to_owned();
    let out = tokio::task::spawn_blocking(move || {
        llmchain(&["conversations", "--db", &db, "resume", &id], &path)
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("ran call_1"), "{}", text(&out));
}

//! The crash matrix (issue 36): each front end of a run — `llmchain run` (then `run -c`),
//! `llmchain worker` and `llmchain serve` — killed with SIGKILL at each point of a turn
//! (the model streaming a call; the call executing; its result stored before the text;
//! the text streaming), on SQLite and on PostgreSQL. The model server refuses, as
//! OpenAI does, a request in which a call has no result. After each kill, the front end
//! is started again and the conversation goes on: no call ran twice, every call has its
//! result, and the next message is answered — at once, not after the dead process's
//! lease ran out. Every run has a budget, so its charges go through the durable
//! reservation before each model call; after a worker is killed, the run's count is
//! exactly the model calls made for it, whichever worker made them. A profile rule rules
//! on every call; after each kill the ruling made before it is replayed, never made
//! again.

mod common;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use common::{
    Reply, Served, files_server_cmd, llmchain, llmchain_command, post_chat, text, user_message,
    write_config,
};
use llmchain::provider::Format;
use llmchain::provider::render::{ResponseScript, render_stream};
use llmchain_store::{AnyStore, Store};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kill {
    StreamingCall,
    Executing,
    ResultBeforeText,
    StreamingText,
}

const KILLS: [Kill; 4] = [
    Kill::StreamingCall,
    Kill::Executing,
    Kill::ResultBeforeText,
    Kill::StreamingText,
];

fn sse(script: &ResponseScript) -> Vec<u8> {
    render_stream(Format::OPENAI_CHAT, script).unwrap()
}

fn write_call() -> ResponseScript {
    ResponseScript::tool_call(
        "call_1",
        "write_file",
        serde_json::json!({"path": "a.txt", "content": "A"}).to_string(),
    )
}

/// The first part of a body: the model stalls after it.
fn half(body: Vec<u8>) -> Vec<u8> {
    body[..body.len() / 2].to_vec()
}

/// The model's replies for a turn killed at `kill`, then plain answers for whatever the
/// front end asks after the restart.
fn replies(kill: Kill) -> Vec<Reply> {
    let text = ResponseScript::text("A long answer, cut by the kill before it ends.");
    let mut replies = match kill {
        Kill::StreamingCall => vec![Reply::Stall(half(sse(&write_call())))],
        Kill::Executing => vec![Reply::Body(sse(&write_call()))],
        Kill::ResultBeforeText => vec![
            Reply::Body(sse(&write_call())),
            Reply::Stall(half(sse(&text))),
        ],
        Kill::StreamingText => vec![Reply::Stall(half(sse(&text)))],
    };
    for _ in 0..4 {
        replies.push(Reply::Body(sse(&ResponseScript::text("Next."))));
    }
    replies
}

/// One scenario's directory, files server root, model server and database.
struct World {
    root: PathBuf,
    db: String,
    seen: common::Seen,
    kill: Kill,
}

impl World {
    fn new(dir: &Path, db: &str, kill: Kill, approve: &str) -> Option<World> {
        let root = dir.join("files");
        std::fs::create_dir_all(&root).unwrap();
        let files = files_server_cmd("crash_matrix", &root, 0)?;
        let (base, seen) = common::serve_replies(replies(kill));
        // A rule that rules on the files server's calls as the approve word would: its
        // ruling is journaled before the call runs, and replayed after a kill, never made
        // again (`check_decisions`).
        let effect = if approve == "always" { "allow" } else { "ask" };
        write_config(
            dir,
            &format!(
                "base_url = \"{base}\"\nmodel = \"m\"\nmcp = [\"{files}\"]\nno_builtin_tools = true\n\
                 approve = \"{approve}\"\n\n[budget]\nmodel_calls = 20\n\n\
                 [[policy]]\nid = \"files\"\ntool = \"mcp:*\"\neffect = \"{effect}\"\n\
                 reason = \"The files server writes under its root only.\"\n"
            ),
        );
        if kill == Kill::Executing {
            std::fs::write(root.join(".hold"), "").unwrap();
        }
        Some(World {
            root,
            db: db.to_owned(),
            seen,
            kill,
        })
    }

    /// How many times `write_file` started.
    fn started(&self) -> usize {
        std::fs::read_to_string(self.root.join(".started"))
            .unwrap_or_default()
            .lines()
            .count()
    }

    /// Waits until the turn reached its kill point.
    fn wait_for_kill_point(&self, front: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let reached = match self.kill {
                Kill::StreamingCall | Kill::StreamingText => !self.seen.lock().unwrap().is_empty(),
                Kill::Executing => self.started() >= 1,
                Kill::ResultBeforeText => self.seen.lock().unwrap().len() >= 2,
            };
            if reached {
                // The stalled stream's first bytes, or the call's start, are in.
                std::thread::sleep(Duration::from_millis(150));
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{front} {:?}: the kill point was never reached",
                self.kill
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The calls that ran at most once: the kill points after the call started ran it
    /// once, the others never.
    fn check_ran(&self, front: &str) {
        let expected = match self.kill {
            Kill::Executing | Kill::ResultBeforeText => 1,
            Kill::StreamingCall | Kill::StreamingText => 0,
        };
        assert_eq!(
            self.started(),
            expected,
            "{front} {:?}: write_file started {} times",
            self.kill,
            self.started()
        );
    }

    /// The one conversation of the database: every call answered.
    fn check_conversation(&self, front: &str) -> llmchain::conversation::Conversation {
        let db = self.db.clone();
        let conversation = runtime().block_on(async move {
            let store = AnyStore::open(&db).await.unwrap();
            let list = store.list_conversations(10).await.unwrap();
            assert_eq!(list.len(), 1, "{list:?}");
            store
                .get_conversation(&list[0].id)
                .await
                .unwrap()
                .unwrap()
                .conversation
        });
        assert!(
            conversation.inconsistencies().is_empty(),
            "{front} {:?}: {:?}",
            self.kill,
            conversation.inconsistencies()
        );
        if self.kill == Kill::Executing {
            let unknown = conversation
                .messages
                .iter()
                .flat_map(|m| m.tool_results.iter())
                .any(|r| r.is_error() && r.content_text().contains("unknown"));
            assert!(
                unknown,
                "{front}: the call's outcome is said unknown: {conversation:?}"
            );
        }
        conversation
    }

    /// The model calls the run's budget counted (`extra.chain.spent.model_calls` of the
    /// conversation's first run).
    fn counted_model_calls(&self) -> u64 {
        let db = self.db.clone();
        runtime().block_on(async move {
            let store = AnyStore::open(&db).await.unwrap();
            let id = store.list_conversations(1).await.unwrap()[0].id.clone();
            let runs = store.list_runs(&id).await.unwrap();
            runs[0].state.extra["chain"]["spent"]["model_calls"]
                .as_u64()
                .unwrap_or(0)
        })
    }

    /// The decisions on record, in every run of the conversation: each call was ruled on
    /// once, by the profile's rule (replayed after the kill, not made again), and a call
    /// that was decided before the kill (it started) has its ruling.
    fn check_decisions(&self, front: &str) {
        let db = self.db.clone();
        let rulings: Vec<(String, String)> = runtime().block_on(async move {
            let store = AnyStore::open(&db).await.unwrap();
            let id = store.list_conversations(1).await.unwrap()[0].id.clone();
            let runs = store.list_runs(&id).await.unwrap();
            runs.iter()
                .flat_map(|r| {
                    r.state.extra["chain"]["journal"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default()
                })
                .filter(|d| d["kind"] == "policy" && d["shadow"] != true)
                .map(|d| {
                    (
                        d["call_id"].as_str().unwrap_or_default().to_owned(),
                        d["rule"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        });
        let mut calls: Vec<&str> = rulings.iter().map(|(c, _)| c.as_str()).collect();
        calls.sort_unstable();
        let before = calls.len();
        calls.dedup();
        assert_eq!(
            before,
            calls.len(),
            "{front} {:?}: a call ruled on twice: {rulings:?}",
            self.kill
        );
        assert!(
            rulings.iter().all(|(_, rule)| rule == "files"),
            "{front} {:?}: {rulings:?}",
            self.kill
        );
        if matches!(self.kill, Kill::Executing | Kill::ResultBeforeText) {
            assert!(
                calls.contains(&"call_1"),
                "{front} {:?}: the started call's ruling is not on record: {rulings:?}",
                self.kill
            );
        }
    }

    fn conversation_id(&self) -> String {
        let db = self.db.clone();
        runtime().block_on(async move {
            let store = AnyStore::open(&db).await.unwrap();
            store.list_conversations(1).await.unwrap()[0].id.clone()
        })
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn kill(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// `llmchain run`, killed; `llmchain run -c` goes on at once.
fn run_front_end(dir: &Path, db: &str, kill_at: Kill) {
    let Some(world) = World::new(dir, db, kill_at, "always") else {
        return;
    };
    let child = llmchain_command(&["run", "--db", db, "write a.txt"], dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    world.wait_for_kill_point("run");
    kill(child);
    let _ = std::fs::remove_file(world.root.join(".hold"));
    let id = world.conversation_id();
    let started = Instant::now();
    let next = llmchain(&["run", "--db", db, "--conversation", &id, "next"], dir);
    assert!(next.status.success(), "run {kill_at:?}: {}", text(&next));
    assert!(
        text(&next).contains("Next."),
        "run {kill_at:?}: {}",
        text(&next)
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "run {kill_at:?}: waited for the dead process's lease"
    );
    world.check_ran("run");
    world.check_decisions("run");
    world.check_conversation("run");
}

/// `llmchain worker`, killed; a worker started again finishes the run, and the next
/// message (`run --conversation`) is answered.
fn worker_front_end(dir: &Path, db: &str, kill_at: Kill) {
    let Some(world) = World::new(dir, db, kill_at, "always") else {
        return;
    };
    let queued = llmchain(&["run", "--enqueue", "--db", db, "write a.txt"], dir);
    assert!(queued.status.success(), "{}", text(&queued));
    let worker = |drain: bool| {
        let mut args = vec!["worker", "--db", db, "--poll-ms", "20", "--lease-secs", "2"];
        if drain {
            args.push("--drain");
        }
        llmchain_command(&args, dir)
    };
    let child = worker(false)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    world.wait_for_kill_point("worker");
    kill(child);
    let _ = std::fs::remove_file(world.root.join(".hold"));
    let again = worker(true).output().unwrap();
    assert!(
        again.status.success(),
        "worker {kill_at:?}: {}",
        text(&again)
    );
    assert!(
        text(&again).contains("1 done"),
        "worker {kill_at:?}: {}",
        text(&again)
    );
    // The budget's count went on through the kill: every request the model server saw
    // for the run was counted once, neither reset by the second worker nor counted twice.
    let asked = world.seen.lock().unwrap().len() as u64;
    assert_eq!(
        world.counted_model_calls(),
        asked,
        "worker {kill_at:?}: the run's model-call count"
    );
    let id = world.conversation_id();
    let next = llmchain(&["run", "--db", db, "--conversation", &id, "next"], dir);
    assert!(next.status.success(), "worker {kill_at:?}: {}", text(&next));
    assert!(
        text(&next).contains("Next."),
        "worker {kill_at:?}: {}",
        text(&next)
    );
    world.check_ran("worker");
    world.check_decisions("worker");
    let conversation = world.check_conversation("worker");
    assert_eq!(
        conversation
            .messages
            .last()
            .and_then(|m| m.text())
            .as_deref(),
        Some("Next.")
    );
}

/// The same POST on a thread of its own (its server is about to be killed).
fn post_in_background(base: &str, body: serde_json::Value) {
    let base = base.to_owned();
    std::thread::spawn(move || post_chat(&base, &body));
}

/// `llmchain serve` (calls approved in the page), killed; started again under its name,
/// the chat goes on at once.
fn serve_front_end(dir: &Path, db: &str, kill_at: Kill) {
    let Some(world) = World::new(dir, db, kill_at, "ask") else {
        return;
    };
    let mut served = Served::start(dir, &["--db", db]);
    if matches!(kill_at, Kill::Executing | Kill::ResultBeforeText) {
        let asked = post_chat(&served.base, &user_message("chat", "u1", "write a.txt"));
        let approval = asked
            .split("\"approvalId\":\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .unwrap_or_else(|| panic!("no approval request: {asked}"))
            .to_owned();
        post_in_background(
            &served.base,
            serde_json::json!({"id": "chat", "trigger": "submit-message", "messages": [
                {"id": "m1", "role": "assistant", "parts": [
                    {"type": "tool-write_file", "toolCallId": "x", "state": "approval-responded",
                     "input": {}, "approval": {"id": approval, "approved": true}}]}]}),
        );
    } else {
        post_in_background(&served.base, user_message("chat", "u1", "write a.txt"));
    }
    world.wait_for_kill_point("serve");
    let _ = std::fs::remove_file(world.root.join(".hold"));
    served.restart();
    let started = Instant::now();
    let answer = post_chat(&served.base, &user_message("chat", "u2", "next"));
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "serve {kill_at:?}: {answer}"
    );
    assert!(
        !answer.contains("\"type\":\"error\""),
        "serve {kill_at:?}: {answer}\n{}",
        served.log()
    );
    assert!(answer.contains("Next."), "serve {kill_at:?}: {answer}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "serve {kill_at:?}: waited for the dead server's lease"
    );
    world.check_ran("serve");
    world.check_decisions("serve");
    world.check_conversation("serve");
    drop(served);
}

fn matrix(front: fn(&Path, &str, Kill), name: &str) {
    for kill_at in KILLS {
        common::on_both_databases(name, |dir, db| front(dir, db, kill_at));
    }
}

#[test]
fn run_killed_at_each_point_goes_on() {
    matrix(run_front_end, "run_killed_at_each_point_goes_on");
}

#[test]
fn worker_killed_at_each_point_goes_on() {
    matrix(worker_front_end, "worker_killed_at_each_point_goes_on");
}

#[test]
fn serve_killed_at_each_point_goes_on() {
    matrix(serve_front_end, "serve_killed_at_each_point_goes_on");
}

//! Crash safety of the SQLite store: a child process appends messages and updates tool
//! statuses in a loop (as the chain does) and is killed with SIGKILL at a random point,
//! 200 times. After each kill the database must load, sequence numbers must be
//! contiguous, every write the child acknowledged must be there, and recovery must give
//! unknown-outcome failures to non-idempotent calls that may have run and re-run the
//! idempotent ones.
//!
//! The child is this test executable re-invoked with `LLMCHAIN_STORE_CRASH_CHILD` set,
//! running only the `crash_child` test.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use llmchain::message::{ExecutionStatus, Message, Role, ToolCall, ToolResult};
use llmchain_store::{NewConversation, SqliteStore, Store, StoreError, Writer};
use serde_json::json;

const CONV: &str = "crash";
const KILLS: usize = 200;

fn is_idempotent(name: &str) -> bool {
    name == "lookup"
}

/// The child's loop: for each step, append an assistant message with one call, mark it
/// executing, "run" it, append its result, mark it completed. Each write is acknowledged
/// on stdout only after the store call returned.
#[tokio::test(flavor = "current_thread")]
async fn crash_child() {
    let Ok(path) = std::env::var("LLMCHAIN_STORE_CRASH_CHILD") else {
        return; // Only meaningful as the child of `kill_at_random_points`.
    };
    let generation: String = std::env::var("LLMCHAIN_STORE_CRASH_GEN").unwrap();
    let store = SqliteStore::open(&path).await.unwrap();
    if store.get_conversation(CONV).await.unwrap().is_none() {
        match store
            .create_conversation(NewConversation::default().with_id(CONV))
            .await
        {
            Ok(_) | Err(StoreError::ConversationExists(_)) => {}
            Err(e) => panic!("{e}"),
        }
    }
    println!("ACK open");
    for i in 0.. {
        let id = format!("g{generation}-c{i}");
        let name = if i % 2 == 0 { "lookup" } else { "charge_card" };
        let call = ToolCall::function(&id, name, json!({"i": i})).unwrap();
        let seq = store
            .append_message(CONV, &Message::assistant_with_calls("", vec![call]))
            .await
            .unwrap();
        println!("ACK A {id} {seq}");
        store
            .set_tool_status(Writer::from(CONV), &id, ExecutionStatus::Executing)
            .await
            .unwrap();
        println!("ACK E {id}");
        let result = ToolResult::text(&id, format!("done {i}")).with_name(name);
        let seq = store
            .append_message(CONV, &Message::tool(vec![result]))
            .await
            .unwrap();
        println!("ACK R {id} {seq}");
        store
            .set_tool_status(Writer::from(CONV), &id, ExecutionStatus::Completed)
            .await
            .unwrap();
        println!("ACK C {id}");
    }
}

#[derive(Default)]
struct Acks {
    opened: bool,
    assistant: Vec<(String, i64)>,
    executing: HashSet<String>,
    result: Vec<(String, i64)>,
    completed: HashSet<String>,
}

fn parse_acks(lines: &[String]) -> Acks {
    let mut acks = Acks::default();
    for line in lines {
        // The harness may print "test crash_child ... " before the first ack.
        let Some(at) = line.find("ACK ") else {
            continue;
        };
        let parts: Vec<&str> = line[at..].split_whitespace().collect();
        match parts.as_slice() {
            ["ACK", "open"] => acks.opened = true,
            ["ACK", "A", id, seq] => acks.assistant.push((id.to_string(), seq.parse().unwrap())),
            ["ACK", "E", id] => {
                acks.executing.insert(id.to_string());
            }
            ["ACK", "R", id, seq] => acks.result.push((id.to_string(), seq.parse().unwrap())),
            ["ACK", "C", id] => {
                acks.completed.insert(id.to_string());
            }
            _ => {}
        }
    }
    acks
}

/// When to kill the child.
enum KillAt {
    /// This long after it was spawned (may be while it opens the database).
    AfterSpawn(Duration),
    /// This long after its `n`-th acknowledgement (the first is "open"): inside the
    /// write loop, whatever the machine's load.
    AfterAcks(usize, Duration),
}

fn run_child(exe: &Path, db: &Path, generation: usize, kill_at: KillAt) -> Vec<String> {
    let mut child = Command::new(exe)
        .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
        .env("LLMCHAIN_STORE_CRASH_CHILD", db)
        .env("LLMCHAIN_STORE_CRASH_GEN", generation.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    match kill_at {
        KillAt::AfterSpawn(d) => std::thread::sleep(d),
        KillAt::AfterAcks(n, d) => {
            let deadline = Instant::now() + Duration::from_secs(30);
            let mut acks = 0;
            while let Ok(line) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                acks += usize::from(line.contains("ACK "));
                lines.push(line);
                if acks >= n {
                    break;
                }
            }
            std::thread::sleep(d);
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    reader.join().unwrap();
    lines.extend(rx);
    lines
}

#[tokio::test(flavor = "current_thread")]
async fn kill_at_random_points() {
    if std::env::var_os("LLMCHAIN_STORE_CRASH_CHILD").is_some() {
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("crash.db");
    let seed = fastrand::u64(..);
    eprintln!("kill_at_random_points: seed {seed}");
    let mut rng = fastrand::Rng::with_seed(seed);
    let started = Instant::now();
    let (mut unknown_total, mut rerun_total, mut pending_total, mut mid_open) = (0, 0, 0, 0);
    for generation in 0..KILLS {
        // Mostly kill while the loop runs; one time in five from the spawn, which often
        // lands while the database is being opened.
        let kill_at = if rng.u8(0..5) == 0 {
            KillAt::AfterSpawn(Duration::from_micros(rng.u64(0..40_000)))
        } else {
            KillAt::AfterAcks(rng.usize(1..10), Duration::from_micros(rng.u64(0..3_000)))
        };
        let lines = run_child(&exe, &db, generation, kill_at);
        let acks = parse_acks(&lines);
        if !acks.opened {
            mid_open += 1;
        }
        if !db.exists() {
            continue;
        }
        let store = SqliteStore::open(&db).await.unwrap_or_else(|e| {
            panic!("generation {generation} (seed {seed}): database does not open: {e}")
        });
        let Some(loaded) = store.get_conversation(CONV).await.unwrap_or_else(|e| {
            panic!("generation {generation} (seed {seed}): conversation does not load: {e}")
        }) else {
            assert!(acks.assistant.is_empty());
            store.pool().close().await;
            continue;
        };
        let messages = &loaded.conversation.messages;
        assert_eq!(loaded.summary.message_count as usize, messages.len());
        // Every acknowledged append is there, at its sequence number.
        for (id, seq) in &acks.assistant {
            let m = &messages[*seq as usize];
            assert_eq!(m.role, Role::Assistant);
            assert_eq!(m.tool_calls[0].call_id.as_deref(), Some(id.as_str()));
        }
        for (id, seq) in &acks.result {
            let m = &messages[*seq as usize];
            assert_eq!(m.tool_results[0].tool_call_id, *id);
        }
        // Every acknowledged status is there (or a later one the child also wrote).
        let statuses = store.tool_statuses(CONV).await.unwrap();
        for id in &acks.executing {
            let s = statuses[id];
            assert!(
                matches!(s, ExecutionStatus::Executing | ExecutionStatus::Completed),
                "{id}: {s}"
            );
        }
        for id in &acks.completed {
            assert_eq!(statuses[id], ExecutionStatus::Completed);
        }

        // What recovery must do, computed from the loaded state.
        let answered: HashSet<&str> = messages
            .iter()
            .flat_map(|m| &m.tool_results)
            .map(|r| r.tool_call_id.as_str())
            .collect();
        let mut expect_unknown = HashSet::new();
        let mut expect_rerun = HashSet::new();
        let mut expect_pending = HashSet::new();
        for call in messages.iter().flat_map(|m| &m.tool_calls) {
            let id = call.call_id.clone().unwrap();
            if answered.contains(id.as_str()) {
                continue;
            }
            let started = call.execution_status() != "identified";
            match (started, is_idempotent(call.name.as_deref().unwrap())) {
                (false, _) => expect_pending.insert(id),
                (true, true) => expect_rerun.insert(id),
                (true, false) => expect_unknown.insert(id),
            };
        }
        // A non-idempotent call acknowledged as executing without an acknowledged result
        // must end up with an unknown outcome (or its result, if that write landed).
        for id in &acks.executing {
            let has_result = answered.contains(id.as_str());
            if !has_result && !is_idempotent(&name_of(messages, id)) {
                assert!(expect_unknown.contains(id), "{id} would be re-run");
            }
        }
        let rec = store.recover(CONV, &is_idempotent).await.unwrap();
        let ids = |v: &[ToolCall]| -> HashSet<String> {
            v.iter().map(|c| c.call_id.clone().unwrap()).collect()
        };
        let got_unknown: HashSet<String> = rec
            .unknown_outcome
            .iter()
            .map(|r| r.tool_call_id.clone())
            .collect();
        assert_eq!(got_unknown, expect_unknown, "generation {generation}");
        assert_eq!(ids(&rec.rerun), expect_rerun, "generation {generation}");
        assert_eq!(ids(&rec.pending), expect_pending, "generation {generation}");
        assert!(
            rec.rerun
                .iter()
                .all(|c| is_idempotent(c.name.as_deref().unwrap()))
        );
        assert!(
            rec.unknown_outcome
                .iter()
                .all(|r| r.is_error() && r.content_text().contains("is unknown"))
        );
        unknown_total += got_unknown.len();
        rerun_total += rec.rerun.len();
        pending_total += rec.pending.len();

        // Play the chain: run the re-runnable and pending calls, record their results.
        let to_run: Vec<&ToolCall> = rec.rerun.iter().chain(&rec.pending).collect();
        for call in &to_run {
            let id = call.call_id.as_deref().unwrap();
            store
                .set_tool_status(Writer::from(CONV), id, ExecutionStatus::Executing)
                .await
                .unwrap();
            let result = ToolResult::text(id, "run after recovery");
            store
                .append_message(CONV, &Message::tool(vec![result]))
                .await
                .unwrap();
            store
                .set_tool_status(Writer::from(CONV), id, ExecutionStatus::Completed)
                .await
                .unwrap();
        }
        let again = store.recover(CONV, &is_idempotent).await.unwrap();
        assert!(again.is_empty(), "recovery is complete after one pass");
        // Every call now has exactly one result.
        let loaded = store.get_conversation(CONV).await.unwrap().unwrap();
        let mut counts: HashMap<String, usize> = HashMap::new();
        for r in loaded
            .conversation
            .messages
            .iter()
            .flat_map(|m| &m.tool_results)
        {
            *counts.entry(r.tool_call_id.clone()).or_default() += 1;
        }
        for call in loaded
            .conversation
            .messages
            .iter()
            .flat_map(|m| &m.tool_calls)
        {
            assert_eq!(counts.get(call.call_id.as_deref().unwrap()), Some(&1));
        }
        store.pool().close().await;
    }
    let store = SqliteStore::open(&db).await.unwrap();
    let total = store
        .get_conversation(CONV)
        .await
        .unwrap()
        .map_or(0, |c| c.summary.message_count);
    eprintln!(
        "kill_at_random_points: {KILLS} kills in {:?}; {mid_open} before the store opened; \
         {total} messages; recovery gave {unknown_total} unknown outcomes, \
         {rerun_total} re-runs, {pending_total} pending",
        started.elapsed()
    );
    assert!(unknown_total > 0, "some kills should land mid-tool");
}

fn name_of(messages: &[Message], id: &str) -> String {
    messages
        .iter()
        .flat_map(|m| &m.tool_calls)
        .find(|c| c.call_id.as_deref() == Some(id))
        .and_then(|c| c.name.clone())
        .unwrap_or_default()
}

//! Crash safety of a whole chain run persisted through [`StoreSink`]: a child process
//! runs an agent (scripted model speaking the Anthropic wire format through the real
//! decoder, real tools, SQLite store) and is killed with SIGKILL at random points —
//! mid-stream, mid-tool, between a tool result and the next model call — 200 times.
//! After every kill the conversation must load and be consistent; the next child
//! resumes it from the store. At the end, the run must have completed, no
//! non-idempotent tool may have run twice for one call, and every call has exactly one
//! result.
//!
//! The child is this test executable re-invoked with `LLMCHAIN_CHAIN_CRASH_CHILD` set.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use llmchain::chain::{LLMChain, Mode, RunOutcome, ScriptedModel};
use llmchain::message::{Message, MessageStatus, Role};
use llmchain::provider::Format;
use llmchain::provider::render::ResponseScript;
use llmchain::tool::{Tool, ToolOutput};
use llmchain_store::sink::{StoreSink, load_chain_state};
use llmchain_store::{NewConversation, SqliteStore, Store, StoreError};
use serde_json::json;

const CONV: &str = "chain-crash";
const KILLS: usize = 200;
const STEPS: usize = 12;

/// Turn `i` of the script: a payment (not idempotent) and a lookup (idempotent), then
/// a final answer.
fn turn(i: usize) -> ResponseScript {
    if i >= STEPS {
        return ResponseScript::text("All payments are done.").with_usage(10, 5);
    }
    ResponseScript::default()
        .with_text(format!("Step {i}: charging and checking."))
        .with_call(
            format!("pay_{i}"),
            "charge_card",
            format!(r#"{{"cents": {}}}"#, 100 + i),
        )
        .with_call(
            format!("look_{i}"),
            "lookup",
            format!(r#"{{"key": "k{i}"}}"#),
        )
        .with_usage(10, 5)
}

fn tools(ledger: PathBuf) -> Vec<Tool> {
    let pay_ledger = ledger.clone();
    let charge = Tool::builder("charge_card")
        .schema(json!({"type": "object", "properties": {"cents": {"type": "integer"}}, "required": ["cents"]}))
        .handler(move |args, ctx| {
            let ledger = pay_ledger.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(3)).await;
                // The side effect: one line per execution, durable before we answer.
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&ledger)
                    .map_err(|e| e.to_string())?;
                writeln!(f, "{}", ctx.tool_call_id()).map_err(|e| e.to_string())?;
                f.sync_all().map_err(|e| e.to_string())?;
                tokio::time::sleep(Duration::from_millis(3)).await;
                Ok::<_, String>(format!("charged {} cents", args["cents"]))
            }
        })
        .build()
        .unwrap();
    let lookup = Tool::builder("lookup")
        .idempotent(true)
        .schema(json!({"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}))
        .handler(|args, _| async move {
            tokio::time::sleep(Duration::from_millis(2)).await;
            ToolOutput::text(format!("value of {}", args["key"]))
        })
        .build()
        .unwrap();
    vec![charge, lookup]
}

/// Runs (or resumes) the chain until done.
async fn run_chain(db: &Path, ledger: PathBuf) -> Result<(), String> {
    let store = Arc::new(SqliteStore::open(db).await.map_err(|e| e.to_string())?);
    if store
        .get_conversation(CONV)
        .await
        .map_err(|e| e.to_string())?
        .is_none()
    {
        match store
            .create_conversation(
                NewConversation::default()
                    .with_id(CONV)
                    .with_title("crash test"),
            )
            .await
        {
            Ok(_) | Err(StoreError::ConversationExists(_)) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    let state = load_chain_state(store.as_ref(), CONV, None)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("the conversation vanished")?;
    // The model continues the script from where the conversation is.
    let done_turns = state
        .conversation
        .messages
        .iter()
        .filter(|m| m.role == Role::Assistant && m.status == MessageStatus::Complete)
        .count();
    let mut model = ScriptedModel::new(Format::ANTHROPIC)
        .chunk_size(16)
        .chunk_delay(Duration::from_micros(300));
    for i in done_turns..=STEPS {
        model = model.respond(turn(i)).map_err(|e| e.to_string())?;
    }
    let mut chain = LLMChain::from_state(Arc::new(model), state)
        .with_sink(Arc::new(StoreSink::new(store.clone(), CONV)))
        .with_max_retry_count(100);
    for t in tools(ledger) {
        chain.add_tool(t);
    }
    if chain.messages().is_empty() {
        chain
            .add_message(Message::user("Make the payments."))
            .await
            .map_err(|e| e.to_string())?;
    }
    // A cancelled (cut-off) last message means the stream was killed: ask again.
    if chain
        .last_message()
        .is_some_and(|m| m.status == MessageStatus::Cancelled)
    {
        chain
            .add_message(Message::user("Continue."))
            .await
            .map_err(|e| e.to_string())?;
    }
    match chain
        .run(Mode::WhileNeedsResponse { max_runs: 100 })
        .await
        .map_err(|e| e.to_string())?
    {
        RunOutcome::Done => Ok(()),
        other => Err(format!("unexpected outcome {other:?}")),
    }
}

#[tokio::test(flavor = "current_thread")]
async fn chain_crash_child() {
    let Ok(db) = std::env::var("LLMCHAIN_CHAIN_CRASH_CHILD") else {
        return; // Only meaningful as the child of `kill_a_running_chain`.
    };
    let ledger = std::env::var("LLMCHAIN_CHAIN_CRASH_LEDGER").unwrap();
    run_chain(Path::new(&db), PathBuf::from(ledger))
        .await
        .unwrap();
    println!("CHILD DONE");
}

fn spawn_child(exe: &Path, db: &Path, ledger: &Path) -> std::process::Child {
    Command::new(exe)
        .args([
            "--exact",
            "chain_crash_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("LLMCHAIN_CHAIN_CRASH_CHILD", db)
        .env("LLMCHAIN_CHAIN_CRASH_LEDGER", ledger)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Checks what must hold after any kill.
async fn check_consistent(db: &Path, ledger: &Path) -> usize {
    let store = SqliteStore::open(db).await.unwrap();
    let Some(stored) = store.get_conversation(CONV).await.unwrap() else {
        return 0;
    };
    let messages = &stored.conversation.messages;
    // Every tool message answers the assistant message right before it, whole.
    let mut answered = HashSet::new();
    for (i, m) in messages.iter().enumerate() {
        if m.role == Role::Tool {
            let prev = &messages[i - 1];
            assert_eq!(
                prev.role,
                Role::Assistant,
                "tool message {i} follows a non-assistant"
            );
            let calls: Vec<_> = prev
                .tool_calls
                .iter()
                .filter_map(|c| c.call_id.clone())
                .collect();
            let ids: Vec<_> = m
                .tool_results
                .iter()
                .map(|r| r.tool_call_id.clone())
                .collect();
            assert_eq!(calls, ids, "tool message {i} answers every call, in order");
            for id in ids {
                assert!(answered.insert(id.clone()), "{id} answered twice");
            }
        }
    }
    // No non-idempotent call ran twice.
    let ledger = std::fs::read_to_string(ledger).unwrap_or_default();
    let mut runs: HashMap<&str, usize> = HashMap::new();
    for line in ledger.lines() {
        *runs.entry(line).or_default() += 1;
    }
    for (id, n) in &runs {
        assert_eq!(*n, 1, "charge_card call {id} ran {n} times");
    }
    messages.len()
}

#[tokio::test(flavor = "current_thread")]
async fn kill_a_running_chain() {
    if std::env::var_os("LLMCHAIN_CHAIN_CRASH_CHILD").is_some() {
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("chain.db");
    let ledger = dir.path().join("ledger.txt");
    let seed = fastrand::u64(..);
    eprintln!("kill_a_running_chain: seed {seed}");
    let mut rng = fastrand::Rng::with_seed(seed);
    let started = Instant::now();
    let mut kills = 0;
    let mut finished_early = 0;
    while kills < KILLS {
        let mut child = spawn_child(&exe, &db, &ledger);
        let after = Duration::from_millis(rng.u64(5..60));
        std::thread::sleep(after);
        match child.try_wait().unwrap() {
            Some(_) => {
                // It finished (or failed) before the kill: start over with a fresh
                // conversation so that every kill lands in a live run.
                finished_early += 1;
                check_consistent(&db, &ledger).await;
                let _ = std::fs::remove_file(&db);
                let _ = std::fs::remove_file(dir.path().join("chain.db-wal"));
                let _ = std::fs::remove_file(dir.path().join("chain.db-shm"));
                let _ = std::fs::remove_file(&ledger);
                continue;
            }
            None => {
                child.kill().unwrap(); // SIGKILL
                child.wait().unwrap();
                kills += 1;
            }
        }
        check_consistent(&db, &ledger).await;
    }
    // Let the last run finish undisturbed: it must complete from whatever state it is in.
    let status = spawn_child(&exe, &db, &ledger).wait().unwrap();
    assert!(status.success(), "the final resume failed");
    let n = check_consistent(&db, &ledger).await;
    let store = SqliteStore::open(&db).await.unwrap();
    let stored = store.get_conversation(CONV).await.unwrap().unwrap();
    let last = stored.conversation.messages.last().unwrap();
    assert_eq!(last.text().as_deref(), Some("All payments are done."));
    // Every call of every complete assistant message has a result.
    let results: HashSet<String> = stored
        .conversation
        .messages
        .iter()
        .flat_map(|m| m.tool_results.iter().map(|r| r.tool_call_id.clone()))
        .collect();
    for m in &stored.conversation.messages {
        if m.role == Role::Assistant && m.status == MessageStatus::Complete {
            for c in &m.tool_calls {
                assert!(
                    results.contains(c.call_id.as_deref().unwrap()),
                    "{:?} has no result",
                    c.call_id
                );
            }
        }
    }
    eprintln!(
        "kill_a_running_chain: {kills} kills, {finished_early} runs finished before their kill, \
         {n} messages at the end, {:?}",
        started.elapsed()
    );
}

//! Several workers on PostgreSQL: 4 worker processes share 200 runs; one is killed with
//! SIGKILL mid-way. Every run must complete and no run's non-idempotent tool may execute
//! twice (executions are recorded in a table and counted).
//!
//! Workers are this test executable re-invoked with `LLMCHAIN_STORE_WORKER` set, running
//! only the `worker_process` test. Needs `LLMCHAIN_TEST_POSTGRES_URL`.

mod common;

use std::process::{Child, Command, Stdio};
use std::str::FromStr;
use std::time::{Duration, Instant};

use std::sync::Arc;

use llmchain::chain::{ChainState, LLMChain, Mode};
use llmchain::message::{Message, ToolResult};
use llmchain::tool::Tool;
use llmchain_store::worker::BoxError;
use llmchain_store::{NewConversation, PostgresStore, Run, RunState, Store, Worker};
use sqlx::postgres::PgConnectOptions;

const RUNS: usize = 200;
const WORKERS: usize = 4;
const LEASE: Duration = Duration::from_millis(1500);

async fn connect(url: &str, schema: &str) -> PostgresStore {
    let opts = PgConnectOptions::from_str(url)
        .unwrap()
        .options([("search_path", schema)]);
    PostgresStore::connect_options(opts, 2).await.unwrap()
}

/// One worker process: the library's [`Worker`] running real chains. The model asks for
/// the non-idempotent tool `charge` once per conversation, then answers; `charge`
/// records each execution in a table (the ledger) on its own connection.
#[tokio::test(flavor = "current_thread")]
async fn worker_process() {
    let Ok(worker) = std::env::var("LLMCHAIN_STORE_WORKER") else {
        return; // Only meaningful as a child of `four_workers_one_killed`.
    };
    let url = std::env::var("LLMCHAIN_TEST_POSTGRES_URL").unwrap();
    let schema = std::env::var("LLMCHAIN_STORE_SCHEMA").unwrap();
    let store = Arc::new(connect(&url, &schema).await);
    let ledger = store.pool().clone();
    let name = worker.clone();
    let factory = move |run: Run, state: ChainState| {
        let (ledger, worker) = (ledger.clone(), name.clone());
        async move {
            let model = common::charge_once(&state)?;
            let conversation = run.conversation_id.clone();
            let charge = Tool::builder("charge")
                .handler(move |_, ctx| {
                    let (ledger, worker, conversation) =
                        (ledger.clone(), worker.clone(), conversation.clone());
                    async move {
                        sqlx::query(
                            "INSERT INTO executions (run_id, call_id, worker) VALUES ($1, $2, $3)",
                        )
                        .bind(&conversation)
                        .bind(ctx.tool_call_id())
                        .bind(&worker)
                        .execute(&ledger)
                        .await
                        .map_err(|e| e.to_string())?;
                        tokio::time::sleep(Duration::from_millis(5)).await; // a window to be killed in
                        Ok::<_, String>("charged")
                    }
                })
                .build()?;
            let chain = LLMChain::from_state(Arc::new(model), state).with_tool(charge);
            Ok::<_, BoxError>((chain, Mode::while_needs_response()))
        }
    };
    Worker::new(store, worker, factory)
        .concurrency(2)
        .lease(LEASE)
        .poll_interval(Duration::from_millis(20))
        .drain()
        .await;
}

fn spawn_worker(exe: &std::path::Path, name: &str, schema: &str) -> Child {
    Command::new(exe)
        .args([
            "--exact",
            "worker_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("LLMCHAIN_STORE_WORKER", name)
        .env("LLMCHAIN_STORE_SCHEMA", schema)
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

#[tokio::test(flavor = "current_thread")]
async fn four_workers_one_killed() {
    if std::env::var_os("LLMCHAIN_STORE_WORKER").is_some() {
        return;
    }
    let Some(url) = common::postgres_url("four_workers_one_killed") else {
        return;
    };
    let (_, schema) = common::pg_schema(&url, "workers").await;
    let store = connect(&url, &schema).await;
    sqlx::query(
        "CREATE TABLE executions (run_id TEXT NOT NULL, call_id TEXT NOT NULL, worker TEXT NOT NULL)",
    )
    .execute(store.pool())
    .await
    .unwrap();
    for k in 0..RUNS {
        let mut conv = llmchain::conversation::Conversation::new();
        conv.messages.push(Message::user(format!("charge #{k}")));
        let id = store
            .create_conversation(NewConversation::from_conversation(conv))
            .await
            .unwrap();
        store.create_run(&id, &RunState::default()).await.unwrap();
    }

    let exe = std::env::current_exe().unwrap();
    let mut workers: Vec<Child> = (0..WORKERS)
        .map(|i| spawn_worker(&exe, &format!("worker-{i}"), &schema))
        .collect();
    // Kill worker-0 once it has done some runs, while it is most likely mid-tool.
    let started = Instant::now();
    loop {
        let done: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM executions WHERE worker = 'worker-0'")
                .fetch_one(store.pool())
                .await
                .unwrap();
        if done >= 10 || started.elapsed() > Duration::from_secs(60) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    workers[0].kill().unwrap(); // SIGKILL
    workers[0].wait().unwrap();
    for w in &mut workers[1..] {
        assert!(w.wait().unwrap().success(), "a worker failed");
    }

    let statuses: Vec<(String, i64)> =
        sqlx::query_as("SELECT status, COUNT(*) FROM runs GROUP BY status")
            .fetch_all(store.pool())
            .await
            .unwrap();
    assert_eq!(
        statuses,
        vec![("done".to_string(), RUNS as i64)],
        "every run completes"
    );
    let twice: Vec<(String, i64)> = sqlx::query_as(
        "SELECT run_id, COUNT(*) FROM executions GROUP BY run_id HAVING COUNT(*) > 1",
    )
    .fetch_all(store.pool())
    .await
    .unwrap();
    assert!(twice.is_empty(), "executed twice: {twice:?}");
    let executed: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM executions")
        .fetch_one(store.pool())
        .await
        .unwrap();
    // Every conversation has exactly one result for its call: the tool's, or an
    // unknown-outcome failure where the killed worker had started it.
    let mut unknown = 0;
    for summary in store.list_conversations(RUNS as i64 + 10).await.unwrap() {
        let c = store.get_conversation(&summary.id).await.unwrap().unwrap();
        let results: Vec<&ToolResult> = c
            .conversation
            .messages
            .iter()
            .flat_map(|m| &m.tool_results)
            .collect();
        assert_eq!(results.len(), 1, "{}", summary.id);
        if results[0].is_error() {
            let text = results[0].content_text();
            assert!(text.contains("is unknown"), "{text}");
            unknown += 1;
        }
        // Well-formed: user, the call, its one answer, the final answer, nothing after.
        let roles: Vec<String> = c
            .conversation
            .messages
            .iter()
            .map(|m| format!("{:?}", m.role))
            .collect();
        assert_eq!(
            roles,
            ["User", "Assistant", "Tool", "Assistant"],
            "{}",
            summary.id
        );
    }
    let by_killed: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM executions WHERE worker = 'worker-0'")
            .fetch_one(store.pool())
            .await
            .unwrap();
    eprintln!(
        "four_workers_one_killed: {RUNS} runs done in {:?}; {executed} executions \
         ({by_killed} by the killed worker); {unknown} unknown outcomes after the kill",
        started.elapsed()
    );
    assert!(
        executed as usize + unknown >= RUNS,
        "a run neither ran nor failed"
    );
}

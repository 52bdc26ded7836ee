//! The run queue on PostgreSQL, as workers use it (a bench binary: these are
//! multi-task throughput figures, not per-call timings criterion is made for).
//!
//! `LLMCHAIN_TEST_POSTGRES_URL=postgres://… cargo bench -p llmchain-store --bench queue`
//!
//! 1. **Claims per second with a backlog**: 1,000,000 pending runs (one conversation
//!    each), claimed by 16 concurrent claimers for 5 s; the claim's plan is printed
//!    (`EXPLAIN ANALYZE`): an index scan of `runs_pending` that stops at the first row.
//! 2. **Runs per second end to end**: 8 library [`Worker`]s, 1,000 runs, each a whole
//!    chain turn with a scripted model that answers at once: user → tool call → the
//!    (non-idempotent) tool → answer, every write fenced by the lease, a heartbeat
//!    per run.
//!
//! Each part works in a schema of its own, dropped at the end. Set `QUEUE_BACKLOG` to
//! change the backlog (default 1000000) and `QUEUE_RUNS` the end-to-end runs.

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use llmchain::chain::{ChainState, LLMChain, Mode, ScriptedModel};
use llmchain::conversation::Conversation;
use llmchain::message::Message;
use llmchain::provider::Format;
use llmchain::provider::render::ResponseScript;
use llmchain::tool::Tool;
use llmchain_store::worker::BoxError;
use llmchain_store::{NewConversation, PostgresStore, Run, RunState, Store, Worker};
use sqlx::postgres::PgConnectOptions;

fn env_usize(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn schema(url: &str, name: &str, pool: u32) -> (PostgresStore, sqlx::PgPool) {
    let admin = sqlx::PgPool::connect(url).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP SCHEMA IF EXISTS {name} CASCADE"
    )))
    .execute(&admin)
    .await
    .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {name}")))
        .execute(&admin)
        .await
        .unwrap();
    let opts = PgConnectOptions::from_str(url)
        .unwrap()
        .options([("search_path", name)]);
    (
        PostgresStore::connect_options(opts, pool).await.unwrap(),
        admin,
    )
}

async fn drop_schema(admin: &sqlx::PgPool, name: &str) {
    let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA {name} CASCADE")))
        .execute(admin)
        .await;
}

async fn claims(url: &str) {
    let backlog = env_usize("QUEUE_BACKLOG", 1_000_000);
    const CLAIMERS: usize = 16;
    let name = "llmchain_bench_claims";
    let (store, admin) = schema(url, name, CLAIMERS as u32).await;
    let started = Instant::now();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "INSERT INTO conversations (id, metadata, header, next_seq, created_at, updated_at) \
         SELECT 'c' || g, '{{}}', '{{}}', 0, g, g FROM generate_series(1, {backlog}) g; \
         INSERT INTO runs (id, conversation_id, status, state, created_at, updated_at, run_at) \
         SELECT 'r' || g, 'c' || g, 'pending', '{{}}', g, g, 0 FROM generate_series(1, {backlog}) g; \
         ANALYZE conversations; ANALYZE runs;"
    )))
    .execute(store.pool())
    .await
    .unwrap();
    eprintln!(
        "claims: {backlog} pending runs seeded in {:.1?}",
        started.elapsed()
    );
    // The plan of the claim's inner select, as the claim runs it.
    let plan: Vec<(String,)> = sqlx::query_as(
        "EXPLAIN (ANALYZE, COSTS OFF) SELECT id FROM runs WHERE status = 'pending' AND kind = 'queued' \
         AND ($1::text[] IS NULL OR profile = ANY($1)) AND run_at <= \
         (SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint) \
         ORDER BY priority DESC, run_at, created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED",
    )
    .bind(None::<Vec<String>>)
    .fetch_all(store.pool())
    .await
    .unwrap();
    for (line,) in &plan {
        eprintln!("  {line}");
    }
    let store = Arc::new(store);
    let count = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(5);
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..CLAIMERS {
        let (store, count) = (store.clone(), count.clone());
        tasks.spawn(async move {
            let name = format!("claimer-{w}");
            while Instant::now() < deadline {
                if store
                    .claim_run(&name, Duration::from_secs(600))
                    .await
                    .unwrap()
                    .is_some()
                {
                    count.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    let n = count.load(Ordering::Relaxed);
    let took = started.elapsed();
    println!(
        "claims: {n} claims by {CLAIMERS} claimers in {took:.2?} with {backlog} pending = {:.0} claims/s",
        n as f64 / took.as_secs_f64()
    );
    drop_schema(&admin, name).await;
}

async fn end_to_end(url: &str) {
    let runs = env_usize("QUEUE_RUNS", 1000);
    const WORKERS: usize = 8;
    let name = "llmchain_bench_e2e";
    let (store, admin) = schema(url, name, 2 * WORKERS as u32).await;
    let store = Arc::new(store);
    for k in 0..runs {
        let mut c = Conversation::new();
        c.messages.push(Message::user(format!("charge #{k}")));
        let id = store
            .create_conversation(NewConversation::from_conversation(c))
            .await
            .unwrap();
        store.create_run(&id, &RunState::default()).await.unwrap();
    }
    let executions = Arc::new(AtomicU64::new(0));
    let factory = {
        let executions = executions.clone();
        move |_run: Run, state: ChainState| {
            let executions = executions.clone();
            async move {
                let model = ScriptedModel::new(Format::OPENAI_CHAT)
                    .respond(ResponseScript::tool_call("call_1", "charge", "{}"))?
                    .respond(ResponseScript::text("charged"))?;
                let charge = Tool::builder("charge")
                    .handler(move |_, _| {
                        executions.fetch_add(1, Ordering::Relaxed);
                        async { "charged" }
                    })
                    .build()?;
                let chain = LLMChain::from_state(Arc::new(model), state).with_tool(charge);
                Ok::<_, BoxError>((chain, Mode::while_needs_response()))
            }
        }
    };
    let workers: Vec<Worker<PostgresStore>> = (0..WORKERS)
        .map(|i| {
            Worker::new(store.clone(), format!("w{i}"), factory.clone())
                .concurrency(1)
                .poll_interval(Duration::from_millis(20))
        })
        .collect();
    let started = Instant::now();
    futures_util::future::join_all(workers.iter().map(Worker::drain)).await;
    let took = started.elapsed();
    let done: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM runs WHERE status = 'done'")
        .fetch_one(store.pool())
        .await
        .unwrap();
    println!(
        "end to end: {done} of {runs} runs done by {WORKERS} workers in {took:.2?} = {:.0} runs/s \
         ({} tool executions)",
        done as f64 / took.as_secs_f64(),
        executions.load(Ordering::Relaxed)
    );
    drop_schema(&admin, name).await;
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` runs it with no PostgreSQL work.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let Ok(url) = std::env::var("LLMCHAIN_TEST_POSTGRES_URL") else {
        eprintln!("queue bench skipped: set LLMCHAIN_TEST_POSTGRES_URL");
        return;
    };
    if !std::env::args().any(|a| a == "--bench") {
        eprintln!("queue bench: run it with `cargo bench -p llmchain-store --bench queue`");
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        if std::env::var("QUEUE_PART").map_or(true, |p| p == "claims") {
            claims(&url).await;
        }
        if std::env::var("QUEUE_PART").map_or(true, |p| p == "e2e") {
            end_to_end(&url).await;
        }
    });
}

//! Postgres-backed workers: runs are queued in PostgreSQL and N library [`Worker`]s claim
//! them through the store's run leases ([`Store::claim_run`]), run them with an
//! [`LLMChain`] persisted into the store as it goes (every message, every tool status,
//! the run state — fenced by the lease), and complete them.
//!
//! ```text
//! LLMCHAIN_DATABASE_URL=postgres://USER:PASS@HOST/DB cargo run -p llmchain-store --example pg_workers
//! ```
//!
//! It works in a schema of its own, dropped at the end. Without a PostgreSQL URL
//! (`LLMCHAIN_DATABASE_URL` or `LLMCHAIN_TEST_POSTGRES_URL`) it says so and exits 0.
//! The model is OpenAI's (`OPENAI_API_KEY`, or a compatible server at `OPENAI_BASE_URL`;
//! `.ci/examples` uses `scripts/mock_openai.py`); the workers are what this example is
//! about: in production they are separate processes on separate machines running the
//! same loop, and a run whose worker dies is claimed again once its lease expires.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use llmchain::chain::{ChainState, LLMChain, Mode};
use llmchain::conversation::Conversation;
use llmchain::http::{HttpModel, HttpModelConfig};
use llmchain::message::Message;
use llmchain::provider::Format;
use llmchain::tool::{Tool, ToolOutput};
use llmchain_store::worker::BoxError;
use llmchain_store::{NewConversation, PostgresStore, Run, RunState, RunStatus, Store, Worker};
use serde_json::json;
use sqlx::postgres::PgConnectOptions;

const WORKERS: usize = 3;
const CITIES: [&str; 6] = ["Paris", "Oslo", "Lima", "Kyoto", "Accra", "Perth"];
const LEASE: Duration = Duration::from_secs(30);

type Error = BoxError;

fn weather_tool() -> Result<Tool, llmchain::tool::ToolError> {
    Tool::builder("get_weather")
        .description("The current weather in a city.")
        .schema(json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}))
        .read_only(true)
        .handler(|args, _| async move {
            let city = args["city"].as_str().unwrap_or("?").to_owned();
            ToolOutput::with_data(format!("18C and sunny in {city}"), json!({"temp_c": 18}))
        })
        .build()
}

/// Builds a claimed run's chain: the library's [`Worker`] adds the lease-fenced sink,
/// the heartbeat and the run's bookkeeping (attempts, back-off, completion).
async fn build(_run: Run, state: ChainState) -> Result<(LLMChain, Mode), BoxError> {
    // OPENAI_API_KEY and OPENAI_BASE_URL from this worker's environment.
    let model = HttpModel::new(HttpModelConfig::from_env(
        Format::OPENAI_CHAT,
        "gpt-4.1-mini",
    )?)?;
    let chain = LLMChain::from_state(Arc::new(model), state).with_tool(weather_tool()?);
    Ok((chain, Mode::while_needs_response()))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Error> {
    let url = ["LLMCHAIN_DATABASE_URL", "LLMCHAIN_TEST_POSTGRES_URL"]
        .iter()
        .filter_map(|k| std::env::var(k).ok())
        .find(|u| u.starts_with("postgres://") || u.starts_with("postgresql://"));
    let Some(url) = url else {
        println!(
            "pg_workers skipped: set LLMCHAIN_DATABASE_URL=postgres://USER:PASS@HOST/DB to run the workers"
        );
        return Ok(());
    };
    // A schema of our own, so the example never touches existing data.
    let schema = format!("llmchain_workers_example_{}", std::process::id());
    let admin = sqlx::PgPool::connect(&url).await?;
    // The name is ours (a fixed prefix and the process id): safe to splice in.
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&admin)
        .await?;
    let result = example(&url, &schema).await;
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .execute(&admin)
        .await?;
    result
}

async fn example(url: &str, schema: &str) -> Result<(), Error> {
    let options = PgConnectOptions::from_str(url)?.options([("search_path", schema)]);
    let store = Arc::new(PostgresStore::connect_options(options, 2 * WORKERS as u32).await?);

    // Queue one pending run per question.
    let mut runs = Vec::new();
    for city in CITIES {
        let mut conversation = Conversation::new();
        conversation
            .messages
            .push(Message::user(format!("What is the weather in {city}?")));
        let id = store
            .create_conversation(NewConversation::from_conversation(conversation))
            .await?;
        let mode = RunState {
            mode: llmchain::chain::Mode::while_needs_response().name().into(),
            ..Default::default()
        };
        runs.push(store.create_run(&id, &mode).await?.id);
    }
    println!("queued {} runs for {WORKERS} workers", runs.len());

    let workers: Vec<Worker<PostgresStore>> = (0..WORKERS)
        .map(|i| {
            Worker::new(store.clone(), format!("worker-{i}"), build)
                .lease(LEASE)
                .poll_interval(Duration::from_millis(20))
        })
        .collect();
    futures_util::future::join_all(workers.iter().map(Worker::drain)).await;
    let counts: Vec<String> = workers
        .iter()
        .enumerate()
        .map(|(i, w)| format!("worker-{i}: {}", w.stats().snapshot().done))
        .collect();

    // Every run is done, and its conversation holds the whole exchange.
    for id in &runs {
        let run = store.get_run(id).await?.ok_or("a run vanished")?;
        if run.state.status != RunStatus::Done {
            return Err(format!("run {id} ended {:?}", run.state.status).into());
        }
        let stored = store
            .get_conversation(&run.conversation_id)
            .await?
            .ok_or("a conversation vanished")?;
        if stored.conversation.messages.len() != 4 {
            return Err(
                format!("run {id}: {} messages", stored.conversation.messages.len()).into(),
            );
        }
    }
    println!(
        "all {} runs done by {WORKERS} workers ({})",
        runs.len(),
        counts.join(", ")
    );
    Ok(())
}

//! `llmchain runs list | show ID | cancel ID | retry ID`: the run queue.

use llmchain_store::{Run, RunStatus, Store};
use serde_json::json;

use crate::cmd::conversations::{open_store, store_error};
use crate::error::{CliError, CliResult};
use crate::job::{JOB_KEY, one_line};
use crate::stdout::out;

/// Arguments of `llmchain runs`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunsArgs {
    /// Database URL (default: $LLMCHAIN_DATABASE_URL, else the SQLite file in the user's
    /// data directory).
    #[arg(long, global = true, value_name = "URL")]
    pub db: Option<String>,
    /// What to do.
    #[command(subcommand)]
    pub action: RunsAction,
}

/// The `runs` subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum RunsAction {
    /// List runs, newest first, with a count per status.
    List {
        /// Only runs of this status: pending, running, paused, done, failed, discarded
        /// or cancelled.
        #[arg(long)]
        status: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: i64,
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show a run: status, attempts, lease, schedule, last error and job.
    Show {
        /// The run id.
        id: String,
    },
    /// Cancel an open run (a running one stops at its worker's next heartbeat).
    Cancel {
        /// The run id.
        id: String,
    },
    /// Queue a failed, discarded or cancelled run again, with fresh attempts.
    Retry {
        /// The run id.
        id: String,
    },
}

/// Runs `llmchain runs`.
pub(crate) fn run(args: RunsArgs) -> CliResult {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Runtime(format!("cannot start the async runtime: {e}")))?;
    rt.block_on(runs(args))
}

fn parse_status(s: &str) -> Result<RunStatus, CliError> {
    RunStatus::parse(s).ok_or_else(|| {
        CliError::Usage(format!(
            "unknown --status {s:?}: expected pending, running, paused, done, failed, discarded or cancelled"
        ))
    })
}

fn run_not_found(e: llmchain_store::StoreError) -> CliError {
    match e {
        llmchain_store::StoreError::RunNotFound(_)
        | llmchain_store::StoreError::RunState { .. }
        | llmchain_store::StoreError::RunAlreadyOpen { .. } => CliError::Usage(e.to_string()),
        other => store_error(other),
    }
}

async fn runs(args: RunsArgs) -> CliResult {
    let (store, _) = open_store(args.db).await?;
    let mut out = String::new();
    match args.action {
        RunsAction::List {
            status,
            limit,
            json,
        } => {
            let status = status.as_deref().map(parse_status).transpose()?;
            let list = store
                .list_all_runs(status, limit)
                .await
                .map_err(store_error)?;
            for run in &list {
                if json {
                    out.push_str(&serde_json::to_string(run).unwrap_or_default());
                    out.push('\n');
                } else {
                    out.push_str(&line(run));
                }
            }
            if !json {
                let counts = store.run_counts().await.map_err(store_error)?;
                let mut counts: Vec<(RunStatus, i64)> = counts.into_iter().collect();
                counts.sort_by_key(|(s, _)| s.as_str());
                let summary: Vec<String> = counts
                    .iter()
                    .map(|(s, n)| format!("{n} {}", s.as_str()))
                    .collect();
                if summary.is_empty() {
                    eprintln!("no runs");
                } else {
                    eprintln!("{}", summary.join(", "));
                }
            }
        }
        RunsAction::Show { id } => {
            let run = store
                .get_run(&id)
                .await
                .map_err(store_error)?
                .ok_or_else(|| CliError::Usage(format!("no run with id {id:?}")))?;
            out.push_str(&show(&run));
        }
        RunsAction::Cancel { id } => {
            let run = store.cancel_run(&id).await.map_err(run_not_found)?;
            out.push_str(&format!(
                "cancelled run {}{}\n",
                run.id,
                match &run.lease_owner {
                    Some(w) => format!(" ({w} stops at its next heartbeat)"),
                    None => String::new(),
                }
            ));
        }
        RunsAction::Retry { id } => {
            let run = store.retry_run(&id).await.map_err(run_not_found)?;
            out.push_str(&format!("queued run {} again\n", run.id));
        }
    }
    out!("{out}");
    Ok(())
}

fn line(run: &Run) -> String {
    format!(
        "{}  {:<9}  attempt {}/{}  conversation {}{}\n",
        run.id,
        run.state.status.as_str(),
        run.attempt,
        run.max_attempts,
        run.conversation_id,
        run.last_error
            .as_deref()
            .map(|e| format!("  last error: {}", sanitize(e)))
            .unwrap_or_default()
    )
}

fn show(run: &Run) -> String {
    let mut v = json!({
        "id": run.id,
        "conversation_id": run.conversation_id,
        "status": run.state.status.as_str(),
        "attempt": run.attempt,
        "max_attempts": run.max_attempts,
        "priority": run.priority,
        "run_at": run.run_at,
        "lease_owner": run.lease_owner,
        "lease_expires_at": run.lease_expires_at,
        "epoch": run.epoch,
        "last_error": run.last_error,
        "mode": run.state.mode,
        "failure_count": run.state.failure_count,
        "created_at": run.created_at,
        "updated_at": run.updated_at,
    });
    if let Some(job) = run.state.extra.get(JOB_KEY) {
        v["job"] = job.clone();
    }
    let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
    s.push('\n');
    s
}

/// Control characters out of text from the database, so it cannot drive the terminal.
fn sanitize(s: &str) -> String {
    one_line(
        &s.chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect::<String>(),
    )
}

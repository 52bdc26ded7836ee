//! `llmchain worker`: executes queued runs (`llmchain run --enqueue`) with the library's
//! [`Worker`]: claims under leases, every write fenced, attempts with back-off, a
//! heartbeat, and a loop that outlives database restarts.
//!
//! Each run is executed with the provider, model, MCP servers and approve policy its
//! job records; API keys come from this process's environment. Ctrl-C (or SIGTERM)
//! stops claiming and lets the runs in flight finish.

use std::sync::Arc;
use std::time::Duration;

use llmchain::chain::{ChainState, LLMChain, Mode};
use llmchain::tool::CancellationToken;
use llmchain_store::worker::{BoxError, Permanent};
use llmchain_store::{Run, Worker};

use crate::cmd::conversations::open_store;
use crate::error::{CliError, CliResult};
use crate::job::JobSpec;

/// Arguments of `llmchain worker`.
#[derive(Debug, clap::Args)]
pub(crate) struct WorkerArgs {
    /// Database URL: postgres://… for workers on several machines, or sqlite://PATH
    /// (default: $LLMCHAIN_DATABASE_URL, else the SQLite file in the user's data directory).
    #[arg(long, value_name = "URL")]
    pub db: Option<String>,
    /// Runs executed at once.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Lease length in seconds (renewed every third of it while a run is in flight).
    #[arg(long, default_value_t = 30)]
    pub lease_secs: u64,
    /// How often to look for runs when the queue is empty, in milliseconds.
    #[arg(long, default_value_t = 500)]
    pub poll_ms: u64,
    /// This worker's name in leases (default: worker-HOSTPID).
    #[arg(long)]
    pub name: Option<String>,
    /// Exit once the queue is empty instead of waiting for more runs.
    #[arg(long)]
    pub drain: bool,
}

/// Runs `llmchain worker`.
pub(crate) fn run(args: WorkerArgs) -> CliResult {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::Runtime(format!("cannot start the async runtime: {e}")))?;
    rt.block_on(work(args))
}

async fn work(args: WorkerArgs) -> CliResult {
    let (store, location) = open_store(args.db.clone()).await?;
    let store = Arc::new(store);
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::Runtime(format!("cannot read the current directory: {e}")))?;
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| format!("worker-{}", std::process::id()));
    let factory = move |run: Run, state: ChainState| {
        let cwd = cwd.clone();
        async move { build(run, state, cwd).await }
    };
    let worker = Worker::new(store.clone(), name.clone(), factory)
        .concurrency(args.concurrency)
        .lease(Duration::from_secs(args.lease_secs.max(1)))
        .poll_interval(Duration::from_millis(args.poll_ms));
    let stats = worker.stats();
    eprintln!(
        "llmchain worker {name}: {} runs at once on {location}; Ctrl-C to stop",
        args.concurrency.max(1)
    );
    if args.drain {
        worker.drain().await;
    } else {
        let shutdown = CancellationToken::new();
        let on_signal = shutdown.clone();
        tokio::spawn(async move {
            stop_signal().await;
            eprintln!("llmchain worker: stopping; waiting for the runs in flight");
            on_signal.cancel();
        });
        worker.run(shutdown).await;
    }
    let [claimed, completed, retried, discarded, lost, errors] = stats.snapshot();
    eprintln!(
        "llmchain worker {name}: {claimed} claimed, {completed} completed, {retried} retried, \
         {discarded} discarded, {lost} lost their lease, {errors} store errors"
    );
    Ok(())
}

/// Ctrl-C, or SIGTERM on Unix.
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// The chain of a queued run, from its job.
async fn build(
    run: Run,
    state: ChainState,
    cwd: std::path::PathBuf,
) -> Result<(LLMChain, Mode), BoxError> {
    let job = match JobSpec::from_extra(&run.state.extra) {
        Some(Ok(job)) => job,
        Some(Err(e)) => return Err(Box::new(Permanent(e.to_string()))),
        None => {
            return Err(Box::new(Permanent(format!(
                "run {} has no job (it was not queued by `llmchain run --enqueue`)",
                run.id
            ))));
        }
    };
    let built = job.build(cwd, Some(state)).await.map_err(|e| match e {
        CliError::Usage(m) => Box::new(Permanent(m)) as BoxError,
        other => other.to_string().into(),
    })?;
    // The MCP tools keep their servers alive through the chain's tools.
    drop(built.mcp_tools);
    Ok((built.chain, Mode::while_needs_response()))
}

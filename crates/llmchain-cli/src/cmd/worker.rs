//! `llmchain worker`: executes queued runs (`llmchain run --enqueue`) with the library's
//! [`Worker`]: claims under leases, every write fenced, attempts with back-off, a
//! heartbeat from the claim on, and a loop that outlives database restarts.
//!
//! What a run may execute comes from this worker's configuration only (its config file,
//! and its flags, which define the profile `default` over the file's top-level keys): a
//! run names a profile; the worker claims only runs of the profiles it serves
//! (`--profile`, else every profile of its configuration) and builds each with its own
//! definition of that profile. A database row never makes it start a command or send its key anywhere.
//! API keys come from this process's environment.
//!
//! A worker never reads a terminal: a call its policy would ask about pauses the run,
//! with its reviews stored for `llmchain reviews`; when they are decided, the run is
//! queued again and resumed here. It prints one line per step of each run on stderr.
//! Ctrl-C (or SIGTERM) stops claiming and lets the runs in flight finish.

use std::sync::Arc;
use std::time::Duration;

use llmchain::chain::{ChainState, LLMChain, Mode};
use llmchain::tool::CancellationToken;
use llmchain_store::worker::{BoxError, Permanent};
use llmchain_store::{AnyStore, Run, Worker, WorkerEvent};

use crate::config::Config;
use crate::error::{CliError, CliResult, Exit};
use crate::job::{JobSpec, QueuedOptions, Reviewer};
use crate::store_access::open_store;

/// Arguments of `llmchain worker`.
#[derive(Debug, clap::Args)]
pub(crate) struct WorkerArgs {
    /// A limit on what each run may spend, over every profile's `[budget]` (the
    /// stricter wins): tokens=N, cost_usd=D, model_calls=N, tool_calls=N, tool_calls.TOOL=N,
    /// wall_seconds=S, step_seconds=S, first_chunk_seconds=S, idle_seconds=S,
    /// tool_seconds=S, on_exhausted=stop|final_answer|error. Repeatable.
    #[arg(long, value_name = "KEY=VALUE")]
    pub budget: Vec<String>,
    /// Database URL: postgres://… for workers on several machines, or sqlite://PATH
    /// (default: $LLMCHAIN_DATABASE_URL, else the SQLite file in the user's data directory).
    #[arg(long, value_name = "URL")]
    pub db: Option<String>,
    /// The config file whose profiles this worker runs [default: $LLMCHAIN_CONFIG, else
    /// the standard one: `llmchain config path`].
    #[arg(long, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    /// Serve only this profile (repeatable) [default: every profile of the config file].
    /// Runs of other profiles are left for other workers.
    #[arg(long = "profile", value_name = "NAME")]
    pub profiles: Vec<String>,
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
    /// Exit once the queue (of this worker's profiles) is empty instead of waiting for
    /// more runs.
    #[arg(long)]
    pub drain: bool,
    /// Give up starting when the database cannot be reached for this many seconds.
    #[arg(long, default_value_t = 300, value_name = "SECS")]
    pub connect_timeout: u64,
    /// The profile "default", from flags: they override the config file's top-level
    /// keys, as `run`'s flags do.
    #[command(flatten)]
    pub default_profile: crate::profile_flags::ProfileFlags,
}

/// Runs `llmchain worker`.
pub(crate) fn run(args: WorkerArgs) -> CliResult {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::io("cannot start the async runtime", e))?;
    rt.block_on(work(args))
}

/// Opens the store, retrying with back-off while the database is unreachable (it may
/// be starting, or restarting): a worker outlives its database's restarts from its
/// first moment.
async fn open_with_retry(
    db: Option<String>,
    give_up_after: Duration,
) -> Result<(AnyStore, String), CliError> {
    let started = tokio::time::Instant::now();
    let mut wait = Duration::from_millis(200);
    loop {
        match open_store(db.clone()).await {
            Ok(opened) => return Ok(opened),
            // A bad URL or a missing data directory does not pass with time.
            Err(e) if e.exit() == Exit::Usage => return Err(e),
            Err(e) if started.elapsed() + wait > give_up_after => {
                return Err(CliError::runtime(format!(
                    "{e} (gave up after {} s; --connect-timeout)",
                    started.elapsed().as_secs()
                )));
            }
            Err(e) => {
                eprintln!(
                    "llmchain worker: cannot open the database yet ({}); retrying in {:.1} s",
                    crate::shown::inline(&llmchain::redact::urls_in(&e.to_string()), 300),
                    wait.as_secs_f64()
                );
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = crate::stop::signal() => return Err(CliError::interrupted("stopped before the database could be reached")),
                }
                wait = (wait * 2).min(Duration::from_secs(5));
            }
        }
    }
}

async fn work(args: WorkerArgs) -> CliResult {
    let mut config = crate::config::load_from(args.config.as_deref())?;
    config.tighten_budgets(&args.budget)?;
    if let Some(default) = config.profiles.get_mut(crate::config::DEFAULT_PROFILE) {
        args.default_profile.apply(default)?;
    }
    let profiles = if args.profiles.is_empty() {
        config.names()
    } else {
        for p in &args.profiles {
            config.profile(p)?;
        }
        args.profiles.clone()
    };
    // Every profile served must make a valid job (provider, policy), checked now.
    for p in &profiles {
        JobSpec::from_profile(p, config.profile(p)?)?;
    }
    let (store, location) =
        open_with_retry(args.db.clone(), Duration::from_secs(args.connect_timeout)).await?;
    let store = Arc::new(store);
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::io("cannot read the current directory", e))?;
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| format!("worker-{}", std::process::id()));
    let config = Arc::new(config);
    let factory = {
        let config = config.clone();
        move |run: Run, state: ChainState| {
            let cwd = cwd.clone();
            let config = config.clone();
            async move { build(run, state, cwd, &config).await }
        }
    };
    let worker = Worker::new(store.clone(), name.clone(), factory)
        .concurrency(args.concurrency)
        .lease(Duration::from_secs(args.lease_secs.max(1)))
        .poll_interval(Duration::from_millis(args.poll_ms))
        .profiles(profiles.clone())
        .on_event(|e| eprintln!("llmchain worker: {}", describe(e)));
    let stats = worker.stats();
    eprintln!(
        "llmchain worker {name}: {} runs at once on {location}, profiles {}; Ctrl-C to stop",
        args.concurrency.max(1),
        profiles.join(", ")
    );
    if args.drain {
        worker.drain().await;
    } else {
        let shutdown = CancellationToken::new();
        let on_signal = shutdown.clone();
        tokio::spawn(async move {
            crate::stop::signal().await;
            eprintln!("llmchain worker: stopping; waiting for the runs in flight");
            on_signal.cancel();
        });
        worker.run(shutdown).await;
    }
    eprintln!("llmchain worker {name}: {}", summary(&stats.snapshot()));
    Ok(())
}

/// What a worker did, in one line: each way an attempt ended, named (a paused run is
/// not a finished one), the ways nothing happened left out.
fn summary(c: &llmchain_store::WorkerCounts) -> String {
    let mut parts = vec![format!("{} claimed", c.claimed)];
    for (n, what) in [
        (c.done, "done"),
        (c.paused, "paused for review"),
        (c.yielded, "stopped to go on later"),
        (c.cancelled, "cancelled"),
        (c.retried, "to be retried"),
        (c.discarded, "discarded"),
        (c.lease_lost, "lost their lease"),
        (c.store_errors, "store errors"),
    ] {
        if n > 0 {
            parts.push(format!("{n} {what}"));
        }
    }
    parts.join(", ")
}

/// One line for a step of a run.
fn describe(e: &WorkerEvent) -> String {
    let text = |s: &str| crate::shown::inline(&llmchain::redact::urls_in(s), 300);
    match e {
        WorkerEvent::Claimed {
            run,
            profile,
            attempt,
        } => format!(
            "run {run} claimed (profile {}, attempt {attempt})",
            text(profile.as_deref().unwrap_or("-"))
        ),
        WorkerEvent::Done { run } => format!("run {run} done"),
        WorkerEvent::Yielded { run } => format!("run {run} stopped; it goes on later"),
        WorkerEvent::Cancelled { run } => format!("run {run} cancelled"),
        WorkerEvent::Paused { run, reviews: 0 } => {
            format!("run {run} paused (a tool interrupted it)")
        }
        WorkerEvent::Paused { run, reviews } => {
            format!("run {run} paused: {reviews} call(s) wait for review (llmchain reviews list)")
        }
        WorkerEvent::Retried { run, error } => {
            format!("run {run} will be retried: {}", text(error))
        }
        WorkerEvent::Discarded { run, error } => {
            format!("run {run} discarded: {}", text(error))
        }
        WorkerEvent::Lost { run, reason } => {
            format!("run {run} lost (nothing more written): {}", text(reason))
        }
        other => format!("{other:?}"),
    }
}

/// The chain of a queued run: this worker's profile of the name the run gives, with the
/// run's own options (which cannot widen what it may execute).
async fn build(
    run: Run,
    state: ChainState,
    cwd: std::path::PathBuf,
    config: &Config,
) -> Result<(LLMChain, Mode), BoxError> {
    let permanent = |m: String| Box::new(Permanent(m)) as BoxError;
    let Some(name) = run.profile.as_deref() else {
        return Err(permanent(format!(
            "run {} names no profile (queued by an older llmchain?): queue it again with `llmchain run --enqueue --profile NAME`",
            run.id
        )));
    };
    let profile = config.profile(name).map_err(|e| permanent(e.to_string()))?;
    let options = QueuedOptions::from_extra(&run.state.extra).map_err(permanent)?;
    let job = JobSpec::from_profile(name, profile)
        .and_then(|j| j.with_options(&options))
        .map_err(|e| permanent(e.to_string()))?;
    let built = job
        .build(cwd, Some(state), Reviewer::Inbox)
        .await
        .map_err(|e| match e {
            e if e.exit() == Exit::Usage => permanent(e.report()),
            other => other.report().into(),
        })?;
    // The MCP tools keep their servers alive through the chain's tools.
    drop(built.mcp_tools);
    let mode = job.mode().map_err(|e| permanent(e.report()))?;
    Ok((built.chain, mode))
}

//! [`Worker`]: a supervised loop that claims queued runs and drives each with an
//! [`LLMChain`] persisted into the store under the run's lease.
//!
//! Modelled on what Oban, River and graphile-worker give their users: a bounded number
//! of runs at once, attempts with back-off, a heartbeat, rescue of runs whose worker
//! died, and a loop that never dies on a transient error (the database restarting or
//! refusing connections): it logs, backs off and goes on.
//!
//! Each claimed run is driven by a [`crate::LeasedRun`], the one owner of
//! a run under a lease that `llmchain run` and `llmchain serve` use too: every write is
//! fenced by the lease, a tool body starts only after its `executing` status was stored
//! under it, the heartbeat starts at the claim (loading the conversation and building
//! the chain, MCP servers starting, keep the lease too), a worker whose lease is lost
//! stops and writes nothing more, and how the run ended is recorded by the one mapping
//! of outcomes to statuses. The worker gives it only the claim and the chain, and counts
//! what happened.
//!
//! What a run may execute has one authority, the worker's own configuration: a run
//! names a profile ([`Run::profile`]); a worker serving some profiles
//! ([`Worker::profiles`]) claims only runs naming one of them, and its
//! [`ChainFactory`] builds the chain from its own definition of that profile.
//!
//! A worker never asks a person: a call that needs one (its review handler answers
//! [`ReviewDecision::Interrupt`](llmchain::chain::ReviewDecision::Interrupt)) pauses
//! the run with its reviews stored ([`Store::pause_run`], the review inbox in
//! [`crate::review`]); when the last of them is decided
//! ([`Store::decide_review`], from any process), the run is queued again and a worker
//! resumes it with exactly the stored decisions.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use llmchain::chain::{ChainState, LLMChain, Mode};
use llmchain::tool::CancellationToken;
use tokio::sync::Semaphore;

use crate::leased_run::{Drive, LeasedRun, NotBuilt, RunEnd};
use crate::model::{Run, RunStatus};
use crate::store::Store;

/// The error a [`ChainFactory`] may return.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A factory error that retrying cannot fix (a run whose job is missing or malformed):
/// the run is discarded at once instead of being retried until its attempts run out.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Permanent(pub String);

/// Boxed future of a [`ChainFactory`].
pub type FactoryFuture =
    Pin<Box<dyn Future<Output = Result<(LLMChain, Mode), BoxError>> + Send + 'static>>;

/// Builds the chain for a claimed run: its model, tools, review handler…, from the run
/// and the conversation's state (already loaded; pass it to
/// [`LLMChain::from_state`]). The worker adds the sink and the cancellation.
pub trait ChainFactory: Send + Sync + 'static {
    /// The chain and the mode to run it in.
    fn build(&self, run: &Run, state: ChainState) -> FactoryFuture;
}

impl<F, Fut> ChainFactory for F
where
    F: Fn(Run, ChainState) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(LLMChain, Mode), BoxError>> + Send + 'static,
{
    fn build(&self, run: &Run, state: ChainState) -> FactoryFuture {
        Box::pin(self(run.clone(), state))
    }
}

/// Counters of a worker's life (also emitted as tracing events): one per way a run's
/// attempt ends, so a summary tells a paused run from a finished one.
#[derive(Debug, Default)]
pub struct WorkerStats {
    claimed: AtomicU64,
    done: AtomicU64,
    paused: AtomicU64,
    yielded: AtomicU64,
    cancelled: AtomicU64,
    retried: AtomicU64,
    discarded: AtomicU64,
    lease_lost: AtomicU64,
    store_errors: AtomicU64,
}

/// A snapshot of [`WorkerStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct WorkerCounts {
    /// Runs claimed (attempts started).
    pub claimed: u64,
    /// Attempts that finished their run (`done`).
    pub done: u64,
    /// Attempts that paused their run for people (`paused`, or `pending` when every
    /// review was already decided).
    pub paused: u64,
    /// Attempts that stopped with more to do, needing no one (back to `pending`).
    pub yielded: u64,
    /// Attempts cancelled by the worker's own cancellation.
    pub cancelled: u64,
    /// Failed attempts put back to `pending` with back-off.
    pub retried: u64,
    /// Runs discarded (attempts used up, or a failure that cannot pass).
    pub discarded: u64,
    /// Runs whose lease was lost (or that were cancelled) while this worker had them.
    pub lease_lost: u64,
    /// Store errors the loop backed off from, and ends that could not be recorded.
    pub store_errors: u64,
}

impl WorkerStats {
    fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self) -> WorkerCounts {
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        WorkerCounts {
            claimed: n(&self.claimed),
            done: n(&self.done),
            paused: n(&self.paused),
            yielded: n(&self.yielded),
            cancelled: n(&self.cancelled),
            retried: n(&self.retried),
            discarded: n(&self.discarded),
            lease_lost: n(&self.lease_lost),
            store_errors: n(&self.store_errors),
        }
    }
}

/// What happened to a run in a worker, one event per step (for a log line each).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum WorkerEvent {
    /// The worker claimed the run.
    Claimed {
        /// The run.
        run: String,
        /// Its profile.
        profile: Option<String>,
        /// Which attempt this is (1-based).
        attempt: i32,
    },
    /// The run finished (`done`).
    Done {
        /// The run.
        run: String,
    },
    /// The run stopped with more to do and needing no one: back to `pending`.
    Yielded {
        /// The run.
        run: String,
    },
    /// The run was cancelled (`cancelled`).
    Cancelled {
        /// The run.
        run: String,
    },
    /// The run paused for people: `reviews` calls wait in the review inbox (or a tool
    /// interrupted it, with no review).
    Paused {
        /// The run.
        run: String,
        /// Calls waiting for a decision.
        reviews: usize,
    },
    /// The attempt failed and the run goes back to the queue after a back-off.
    Retried {
        /// The run.
        run: String,
        /// Why the attempt failed.
        error: String,
    },
    /// The run was given up (attempts used up, or a failure that cannot pass).
    Discarded {
        /// The run.
        run: String,
        /// Why.
        error: String,
    },
    /// The worker lost the run (its lease expired or was taken over, or the run was
    /// cancelled): it wrote nothing more.
    Lost {
        /// The run.
        run: String,
        /// Why.
        reason: String,
    },
}

/// A callback for [`WorkerEvent`]s.
pub type EventHandler = Arc<dyn Fn(&WorkerEvent) + Send + Sync>;

/// Claims runs from a store and runs them, up to `concurrency` at once.
pub struct Worker<S> {
    store: Arc<S>,
    name: String,
    factory: Arc<dyn ChainFactory>,
    concurrency: usize,
    lease: Duration,
    poll: Duration,
    stats: Arc<WorkerStats>,
    profiles: Option<Arc<[String]>>,
    on_event: Option<EventHandler>,
}

impl<S> std::fmt::Debug for Worker<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("name", &self.name)
            .field("concurrency", &self.concurrency)
            .field("lease", &self.lease)
            .field("poll", &self.poll)
            .finish_non_exhaustive()
    }
}

impl<S: Store + 'static> Worker<S> {
    /// A worker named `name` (unique among live workers: it owns leases) that builds
    /// each run's chain with `factory`. Defaults: 4 runs at once, 30 s leases, and when
    /// the queue is empty, waiting for a notification (PostgreSQL) or at most 500 ms.
    pub fn new(store: Arc<S>, name: impl Into<String>, factory: impl ChainFactory) -> Self {
        Worker {
            store,
            name: name.into(),
            factory: Arc::new(factory),
            concurrency: 4,
            lease: Duration::from_secs(30),
            poll: Duration::from_millis(500),
            stats: Arc::new(WorkerStats::default()),
            profiles: None,
            on_event: None,
        }
    }

    /// Claims only runs naming one of these profiles (the ones this worker's
    /// configuration defines); by default, any queued run.
    #[must_use]
    pub fn profiles<I: IntoIterator<Item = impl Into<String>>>(mut self, profiles: I) -> Self {
        self.profiles = Some(profiles.into_iter().map(Into::into).collect());
        self
    }

    /// Calls `f` at each step of each run (claimed, done, paused, retried, discarded,
    /// lost): one log line each, in the CLI.
    #[must_use]
    pub fn on_event(mut self, f: impl Fn(&WorkerEvent) + Send + Sync + 'static) -> Self {
        self.on_event = Some(Arc::new(f));
        self
    }

    /// Runs at most `n` runs at once (at least 1).
    #[must_use]
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// The lease length (renewed every third of it while a run is in flight).
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_millis(30));
        self
    }

    /// How long to wait before looking again when the queue is empty.
    #[must_use]
    pub fn poll_interval(mut self, poll: Duration) -> Self {
        self.poll = poll;
        self
    }

    /// The worker's counters.
    pub fn stats(&self) -> Arc<WorkerStats> {
        self.stats.clone()
    }

    /// Claims and runs runs until `shutdown` fires, then waits for the runs in flight.
    /// Never returns early on a store error: transient ones are logged and backed off
    /// from (up to 5 s), whatever the database does.
    pub async fn run(&self, shutdown: CancellationToken) {
        let slots = Arc::new(Semaphore::new(self.concurrency));
        let mut backoff = Duration::from_millis(50);
        let mut tasks = tokio::task::JoinSet::new();
        loop {
            while tasks.try_join_next().is_some() {}
            let permit = tokio::select! {
                _ = shutdown.cancelled() => break,
                p = slots.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
            };
            let claimed = tokio::select! {
                _ = shutdown.cancelled() => break,
                c = self.store.claim_run_of(&self.name, self.lease, self.profiles.as_deref()) => c,
            };
            match claimed {
                Ok(Some(run)) => {
                    backoff = Duration::from_millis(50);
                    WorkerStats::bump(&self.stats.claimed);
                    tracing::info!(worker = %self.name, run = %run.id, attempt = run.attempt, "claimed run");
                    let job = RunJob {
                        store: self.store.clone(),
                        factory: self.factory.clone(),
                        lease_len: self.lease,
                        stats: self.stats.clone(),
                        on_event: self.on_event.clone(),
                    };
                    job.emit(WorkerEvent::Claimed {
                        run: run.id.clone(),
                        profile: run.profile.clone(),
                        attempt: run.attempt,
                    });
                    // The run's own span (`LeasedRun`) joins the trace it was queued
                    // in and names the worker (`llmchain.run.worker`); this one names
                    // it for debug logs only. At INFO it would be exported as a trace
                    // of its own per job, beside the run's, which backends show as noise.
                    let span = tracing::debug_span!("llmchain.worker", worker = %self.name);
                    tasks.spawn(tracing::Instrument::instrument(
                        async move {
                            job.run(run).await;
                            drop(permit);
                        },
                        span,
                    ));
                }
                Ok(None) => {
                    drop(permit);
                    // Woken by a new pending run (LISTEN/NOTIFY on PostgreSQL), or polls.
                    tokio::select! {
                        _ = shutdown.cancelled() => break,
                        _ = self.store.wait_for_runs(self.poll) => {}
                    }
                }
                Err(e) => {
                    drop(permit);
                    WorkerStats::bump(&self.stats.store_errors);
                    tracing::warn!(worker = %self.name, error = %e, wait_ms = backoff.as_millis() as u64, "claim failed; backing off");
                    tokio::select! {
                        _ = shutdown.cancelled() => break,
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
        while tasks.join_next().await.is_some() {}
    }

    /// Runs the queue until it is empty (nothing pending, nothing running among the
    /// queued runs of this worker's profiles), then returns: for tests, batch jobs and
    /// benchmarks. Paused runs wait for people and do not keep it going.
    pub async fn drain(&self) {
        let shutdown = CancellationToken::new();
        let watcher = {
            let store = self.store.clone();
            let shutdown = shutdown.clone();
            let poll = self.poll.max(Duration::from_millis(10));
            let profiles = self.profiles.clone();
            async move {
                loop {
                    tokio::time::sleep(poll).await;
                    // One consistent read: a run moving from running back to pending
                    // is seen in one of the two.
                    let open = store.queued_counts(profiles.as_deref()).await.map(|c| {
                        [RunStatus::Pending, RunStatus::Running]
                            .iter()
                            .any(|s| c.get(s).is_some_and(|&n| n > 0))
                    });
                    if let Ok(false) = open {
                        shutdown.cancel();
                        return;
                    }
                }
            }
        };
        tokio::join!(self.run(shutdown.clone()), watcher);
    }
}

/// One claimed run.
struct RunJob<S> {
    store: Arc<S>,
    factory: Arc<dyn ChainFactory>,
    lease_len: Duration,
    stats: Arc<WorkerStats>,
    on_event: Option<EventHandler>,
}

impl<S: Store + 'static> RunJob<S> {
    fn emit(&self, event: WorkerEvent) {
        if let Some(f) = &self.on_event {
            f(&event);
        }
    }

    async fn run(&self, run: Run) {
        let id = run.id.clone();
        // The lease is renewed from the claim on: loading the conversation and building
        // the chain (MCP servers starting) may take longer than a lease.
        let held = match LeasedRun::claimed(self.store.clone(), run, self.lease_len) {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!(run = %id, error = %e, "a claimed run without a lease");
                return;
            }
        };
        let factory = self.factory.clone();
        let started = held
            .start(|run, state| async move {
                factory.build(&run, state).await.map_err(|e| {
                    let error = format!("cannot build the chain: {e}");
                    if e.downcast_ref::<Permanent>().is_some() {
                        NotBuilt::permanent(error)
                    } else {
                        NotBuilt::retryable(error)
                    }
                })
            })
            .await;
        let ended = match started {
            Ok((held, (chain, mode))) => held.drive(chain, mode, Drive::new()).await,
            Err(ended) => *ended,
        };
        self.ended(&id, ended.end);
    }

    /// Counts and announces how a run ended.
    fn ended(&self, id: &str, end: RunEnd) {
        let run = id.to_owned();
        let (counter, event) = match end {
            RunEnd::Done => (&self.stats.done, WorkerEvent::Done { run }),
            RunEnd::Paused { reviews, .. } => (
                &self.stats.paused,
                WorkerEvent::Paused {
                    run,
                    reviews: reviews.len(),
                },
            ),
            RunEnd::Yielded => (&self.stats.yielded, WorkerEvent::Yielded { run }),
            RunEnd::Cancelled => (&self.stats.cancelled, WorkerEvent::Cancelled { run }),
            RunEnd::Failed {
                error,
                status: RunStatus::Pending,
            } => (&self.stats.retried, WorkerEvent::Retried { run, error }),
            RunEnd::Failed { error, .. } => {
                (&self.stats.discarded, WorkerEvent::Discarded { run, error })
            }
            RunEnd::Lost { reason } => {
                tracing::warn!(run = %id, reason = %reason, "run lost its lease; nothing more written");
                (&self.stats.lease_lost, WorkerEvent::Lost { run, reason })
            }
            RunEnd::NotRecorded { error } => {
                // The lease runs out and the run is rescued from what was stored.
                WorkerStats::bump(&self.stats.store_errors);
                tracing::warn!(run = %id, error = %error, "could not record the end of the run");
                return;
            }
        };
        WorkerStats::bump(counter);
        self.emit(event);
    }
}

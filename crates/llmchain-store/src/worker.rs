//! [`Worker`]: a supervised loop that claims queued runs and drives each with an
//! [`LLMChain`] persisted into the store under the run's lease.
//!
//! Modelled on what Oban, River and graphile-worker give their users: a bounded number
//! of runs at once, attempts with back-off, a heartbeat, rescue of runs whose worker
//! died, and a loop that never dies on a transient error (the database restarting or
//! refusing connections): it logs, backs off and goes on.
//!
//! At-most-once, by construction: every write of a run is fenced by its lease
//! ([`StoreSink::with_lease`]); a tool body starts only after its `executing` status was
//! stored under that lease; a worker whose lease is lost stops (its chain is cancelled
//! by the [`Heartbeat`]) and writes nothing more. The heartbeat starts at the claim, so
//! loading the conversation and building the chain (starting MCP servers) keep the
//! lease too.
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

use llmchain::chain::{ChainError, ChainState, LLMChain, Mode, RunOutcome};
use llmchain::tool::CancellationToken;
use tokio::sync::Semaphore;

use crate::heartbeat::Heartbeat;
use crate::model::{Lease, Run, RunStatus};
use crate::review::new_reviews;
use crate::sink::{StoreSink, keep_extra, load_chain_state, run_state};
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

/// Counters of a worker's life (also emitted as tracing events).
#[derive(Debug, Default)]
pub struct WorkerStats {
    /// Runs claimed.
    pub claimed: AtomicU64,
    /// Runs that ended `done` (or `paused` for a human).
    pub completed: AtomicU64,
    /// Failed attempts put back to `pending` with back-off.
    pub retried: AtomicU64,
    /// Runs discarded (attempts used up, or a failure that cannot pass).
    pub discarded: AtomicU64,
    /// Runs whose lease was lost (or that were cancelled) while this worker had them.
    pub lease_lost: AtomicU64,
    /// Transient store errors the loop backed off from.
    pub store_errors: AtomicU64,
}

impl WorkerStats {
    fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// A snapshot: (claimed, completed, retried, discarded, lease_lost, store_errors).
    pub fn snapshot(&self) -> [u64; 6] {
        [
            &self.claimed,
            &self.completed,
            &self.retried,
            &self.discarded,
            &self.lease_lost,
            &self.store_errors,
        ]
        .map(|c| c.load(Ordering::Relaxed))
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
                    let span = tracing::info_span!(
                        "llmchain.run",
                        run.id = %run.id,
                        run.conversation = %run.conversation_id,
                        run.attempt = run.attempt,
                        worker = %self.name,
                    );
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

/// What ended a run, for the store.
enum Ending {
    Status(RunStatus, Option<ChainState>),
    /// Calls wait for people: the run pauses with their reviews.
    Review(ChainState, Vec<crate::review::NewReview>),
    Failed {
        error: String,
        retryable: bool,
    },
    Lost(String),
}

impl<S: Store + 'static> RunJob<S> {
    fn emit(&self, event: WorkerEvent) {
        if let Some(f) = &self.on_event {
            f(&event);
        }
    }

    async fn run(&self, run: Run) {
        let Some(lease) = run.lease() else {
            return;
        };
        // The lease is renewed from the claim on: loading the conversation and building
        // the chain (MCP servers starting) may take longer than a lease.
        let stop = CancellationToken::new();
        let heartbeat = Heartbeat::spawn(
            self.store.clone(),
            lease.clone(),
            self.lease_len,
            stop.clone(),
        );
        let ending = self.attempt(&run, &lease, &stop).await;
        let stopped = heartbeat.stopped();
        drop(heartbeat);
        let ending = match stopped {
            Some(why) => Ending::Lost(format!("{why:?}")),
            None => ending,
        };
        let id = run.id.clone();
        let result = match ending {
            Ending::Lost(why) => {
                WorkerStats::bump(&self.stats.lease_lost);
                tracing::warn!(run = %run.id, reason = %why, "run lost its lease; nothing more written");
                self.emit(WorkerEvent::Lost {
                    run: id,
                    reason: why,
                });
                return;
            }
            Ending::Review(state, reviews) => {
                let mut saved = run_state(&state, &run.state.mode);
                keep_extra(&mut saved, &run.state.extra);
                WorkerStats::bump(&self.stats.completed);
                let r = self.store.pause_run(&lease, &saved, &reviews).await;
                if r.is_ok() {
                    self.emit(WorkerEvent::Paused {
                        run: id,
                        reviews: reviews.len(),
                    });
                }
                r
            }
            Ending::Status(status, state) => {
                let mut saved = state
                    .map(|s| run_state(&s, &run.state.mode))
                    .unwrap_or_else(|| run.state.clone());
                keep_extra(&mut saved, &run.state.extra);
                saved.status = status;
                WorkerStats::bump(&self.stats.completed);
                let r = self
                    .store
                    .complete_run(&lease, &saved)
                    .await
                    .map(|_| status);
                if r.is_ok() {
                    self.emit(match status {
                        RunStatus::Paused => WorkerEvent::Paused {
                            run: id,
                            reviews: 0,
                        },
                        _ => WorkerEvent::Done { run: id },
                    });
                }
                r
            }
            Ending::Failed { error, retryable } => {
                let r = self.store.fail_run(&lease, &error, retryable).await;
                match &r {
                    Ok(RunStatus::Pending) => {
                        WorkerStats::bump(&self.stats.retried);
                        self.emit(WorkerEvent::Retried {
                            run: id,
                            error: error.clone(),
                        });
                    }
                    Ok(_) => {
                        WorkerStats::bump(&self.stats.discarded);
                        self.emit(WorkerEvent::Discarded {
                            run: id,
                            error: error.clone(),
                        });
                    }
                    Err(_) => {}
                }
                tracing::info!(run = %run.id, error = %error, retryable, outcome = ?r.as_ref().ok(), "run attempt failed");
                r
            }
        };
        if let Err(e) = result {
            if e.must_stop() {
                WorkerStats::bump(&self.stats.lease_lost);
                self.emit(WorkerEvent::Lost {
                    run: run.id.clone(),
                    reason: e.to_string(),
                });
            }
            // The lease runs out and the run is rescued; its recorded state resumes it.
            tracing::warn!(run = %run.id, error = %e, "could not record the end of the run");
        }
    }

    async fn attempt(&self, run: &Run, lease: &Lease, stop: &CancellationToken) -> Ending {
        let lost = || Ending::Lost("the lease was lost while the run was starting".into());
        let loaded = tokio::select! {
            _ = stop.cancelled() => return lost(),
            s = load_chain_state(self.store.as_ref(), &run.conversation_id, Some(&run.state)) => s,
        };
        let state = match loaded {
            Ok(Some(s)) => s,
            Ok(None) => {
                return Ending::Failed {
                    error: format!("conversation {} does not exist", run.conversation_id),
                    retryable: false,
                };
            }
            Err(e) => {
                return Ending::Failed {
                    retryable: e.is_transient(),
                    error: format!("cannot load the conversation: {e}"),
                };
            }
        };
        let built = tokio::select! {
            _ = stop.cancelled() => return lost(),
            b = self.factory.build(run, state) => b,
        };
        let (chain, mode) = match built {
            Ok(c) => c,
            Err(e) => {
                return Ending::Failed {
                    retryable: e.downcast_ref::<Permanent>().is_none(),
                    error: format!("cannot build the chain: {e}"),
                };
            }
        };
        let sink = StoreSink::new(self.store.clone(), run.conversation_id.clone())
            .with_lease(lease.clone(), mode.name())
            .keeping(&run.state.extra);
        let mut chain = chain.with_sink(Arc::new(sink.clone()));
        // A lost lease (the heartbeat) stops the chain.
        let chain_token = chain.cancellation_token();
        let forward = {
            let stop = stop.clone();
            tokio::spawn(async move {
                stop.cancelled().await;
                chain_token.cancel();
            })
        };
        // The calls the chain waits on (a run paused and queued again, or a batch that
        // needs a person now) are answered by the decisions stored in the review inbox
        // for them, whichever run they were made under; the run goes on until it is
        // done or waits for a decision not made yet.
        let outcome = crate::review::run_answering(
            self.store.as_ref(),
            &run.conversation_id,
            &mut chain,
            mode,
        )
        .await;
        forward.abort();
        if stop.is_cancelled() {
            return lost();
        }
        if outcome.is_err() {
            // A failed run keeps the chain's last state (a run that ends otherwise saves
            // it as it ends).
            if let Err(e) = sink.flush().await {
                tracing::info!(run = %run.id, error = %e, "the failed run's last state was not saved");
            }
        }
        match outcome {
            Ok(RunOutcome::Done | RunOutcome::ToolUsed(_)) => {
                Ending::Status(RunStatus::Done, Some(chain.state().clone()))
            }
            // Calls wait for a person (a review, or a tool's own interrupt): their
            // reviews are opened in the inbox.
            Ok(RunOutcome::ReviewRequired(_) | RunOutcome::Interrupted(_)) => {
                Ending::Review(chain.state().clone(), new_reviews(&chain))
            }
            Ok(RunOutcome::Paused) => {
                Ending::Status(RunStatus::Pending, Some(chain.state().clone()))
            }
            // An outcome added later: kept for a person to look at, not lost.
            Ok(other) => Ending::Failed {
                retryable: false,
                error: format!("the run ended in a way this worker does not know: {other:?}"),
            },
            Err(ChainError::Persist(e)) if e.must_stop() => Ending::Lost(e.to_string()),
            Err(e) => Ending::Failed {
                retryable: matches!(
                    e,
                    ChainError::Model(_)
                        | ChainError::AllFallbacksFailed(_)
                        | ChainError::Persist(_)
                ),
                error: e.to_string(),
            },
        }
    }
}

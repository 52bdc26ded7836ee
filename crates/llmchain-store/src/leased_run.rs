//! [`LeasedRun`]: one run held under its lease, from the claim to its end. It is the one
//! owner of "a run under a lease": the [`Worker`](crate::Worker), the CLI's `run`,
//! `chat` and `conversations resume`, and `llmchain serve` are front ends that give it
//! only what differs between them: the kind of claim ([`Claim`], or a queued run the
//! worker's loop claimed), an observer of the chain (its callbacks, a sink wrapper), what
//! to do about calls no one decided yet ([`Undecided`]), and what they show at the end
//! ([`Ended`]).
//!
//! What it does, in order:
//!
//! 1. **Claim**, and start the [`Heartbeat`] at once: loading the conversation and
//!    building the chain (MCP servers starting) keep the lease too.
//! 2. **Drive** the chain the front end built from [`LeasedRun::chain_state`]: every
//!    write goes through a [`StoreSink`] fenced by the lease (holding the model's answers
//!    when asked); the heartbeat's loss of the lease and the front end's own
//!    cancellation both cancel the chain (one forwarding task).
//! 3. **Recover and answer before anything is sent.** Calls the run waits on are
//!    answered by the decisions in the review inbox (the one authority); a call found
//!    `executing` (a process died while it ran) is answered "outcome unknown" and never
//!    run again unless its tool is idempotent, and no one is asked about it; a new
//!    message ([`Drive::message`]) is added only once every call of the last answer has
//!    its result, so no provider ever sees a call without one.
//! 4. **End** the run through the one mapping of an outcome to a [`RunStatus`]
//!    ([`Disposition`], a closed set that every `RunOutcome` and `ChainError` maps to in
//!    `llmchain`): done, paused with the reviews it wrote, back to pending, cancelled,
//!    failed (retried with back-off while a queued run has attempts left), or lost (nothing
//!    more written).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use llmchain::chain::{
    ChainError, ChainState, ConversationSink, Disposition, LLMChain, Mode, RunOutcome, Step,
};
use llmchain::message::{Message, ToolCall};
use llmchain::tool::CancellationToken;

use crate::error::{StoreError, StoreResult};
use crate::heartbeat::{Heartbeat, HeartbeatStop};
use crate::model::{Lease, NewConversation, Opening, Run, RunState, RunStatus, StoredConversation};
use crate::review::{
    MAX_ANSWERED_ROUNDS, Review, ReviewFilter, ReviewStatus, decisions_for, new_reviews,
};
use crate::sink::{StoreSink, chain_state, keep_extra, run_state, sink_error};
use crate::store::Store;

/// How an interactive front end claims a run ([`LeasedRun::claim`]). A worker claims
/// queued runs from the queue itself and hands each to [`LeasedRun::claimed`].
#[non_exhaustive]
pub enum Claim {
    /// A conversation's interactive run (`llmchain run -c`, `resume`): its open run if it
    /// is pending, paused or its lease expired, else a new one with `state`
    /// ([`Store::claim_conversation`]).
    Conversation {
        /// The conversation.
        id: String,
        /// The state of a run created by the claim.
        state: RunState,
    },
    /// A chat's turn (`llmchain serve`): the conversation created from `create` if there
    /// is none, its run claimed and the conversation read, with `opening`'s messages
    /// appended, in one transaction ([`Store::claim_and_read`]).
    Chat {
        /// The chat's conversation.
        id: String,
        /// The conversation to create when there is none.
        create: Option<Box<NewConversation>>,
        /// The state of a run created by the claim.
        state: RunState,
        /// What the turn appends, decided from the conversation as read.
        opening: Option<Opening>,
    },
}

impl std::fmt::Debug for Claim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Claim::Conversation { id, .. } => {
                f.debug_struct("Conversation").field("id", id).finish()
            }
            Claim::Chat { id, opening, .. } => f
                .debug_struct("Chat")
                .field("id", id)
                .field("opening", &opening.is_some())
                .finish(),
        }
    }
}

/// Boxed future of an [`Undecided`] front end.
pub type DecideFuture<'a> = Pin<Box<dyn Future<Output = StoreResult<()>> + Send + 'a>>;

/// What a front end does about the calls a run waits on that the review inbox has no
/// decision for, before the run goes on: it records what it decides in the inbox
/// ([`Store::decide_review`], the one authority), or nothing, and the run pauses with
/// them. The CLI asks a person at the terminal, one call at a time; `llmchain serve`,
/// given a new message instead of an answer, rejects them (the person moved on).
pub trait Undecided: Send + Sync {
    /// Decides (or not) about `calls` of `run`.
    fn decide<'a>(&'a self, run: &'a Run, calls: &'a [ToolCall]) -> DecideFuture<'a>;
}

/// Wraps the run's sink (an observer of what is stored, such as a progress line that
/// ends when a call's final status is written).
pub type SinkWrapper =
    Box<dyn FnOnce(Arc<dyn ConversationSink>) -> Arc<dyn ConversationSink> + Send>;

/// The text a failure is recorded with ([`Drive::explain`]).
type Explain = dyn Fn(&ChainError) -> String + Send + Sync;

/// What differs between front ends when a [`LeasedRun`] drives a chain.
#[derive(Default)]
pub struct Drive {
    hold_answers: bool,
    message: Option<Message>,
    undecided: Option<Box<dyn Undecided>>,
    cancel: Option<CancellationToken>,
    wrap_sink: Option<SinkWrapper>,
    explain: Option<Box<Explain>>,
    traceparent: Option<String>,
}

impl std::fmt::Debug for Drive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Drive")
            .field("hold_answers", &self.hold_answers)
            .field("message", &self.message.is_some())
            .finish_non_exhaustive()
    }
}

impl Drive {
    /// Nothing but the run: what a worker gives.
    pub fn new() -> Self {
        Drive::default()
    }

    /// The model's answers wait for the sink's next write
    /// ([`StoreSink::holding_answers`]): one transaction less per answer.
    #[must_use]
    pub fn holding_answers(mut self) -> Self {
        self.hold_answers = true;
        self
    }

    /// A message (the user's) to add once every call of the conversation's last answer
    /// has its result; left out ([`Ended::left_out`]) when calls still wait for people.
    #[must_use]
    pub fn message(mut self, message: Message) -> Self {
        self.message = Some(message);
        self
    }

    /// What to do about waiting calls no one decided yet (see [`Undecided`]).
    #[must_use]
    pub fn undecided(mut self, undecided: impl Undecided + 'static) -> Self {
        self.undecided = Some(Box::new(undecided));
        self
    }

    /// The front end's own cancellation (Ctrl-C, a server stopping): the chain stops,
    /// what it holds is saved, and the run ends `cancelled`.
    #[must_use]
    pub fn cancel_on(mut self, token: CancellationToken) -> Self {
        self.cancel = Some(token);
        self
    }

    /// Wraps the sink the chain writes through (an observer of what is stored).
    #[must_use]
    pub fn wrap_sink(
        mut self,
        wrap: impl FnOnce(Arc<dyn ConversationSink>) -> Arc<dyn ConversationSink> + Send + 'static,
    ) -> Self {
        self.wrap_sink = Some(Box::new(wrap));
        self
    }

    /// The trace this drive's spans join (a W3C `traceparent`, such as a browser's
    /// request header), instead of the one kept with the run
    /// ([`trace_context`](crate::trace_context)); a malformed one is ignored.
    #[must_use]
    pub fn trace_parent(mut self, traceparent: impl Into<String>) -> Self {
        self.traceparent = Some(traceparent.into());
        self
    }

    /// The text a failure is recorded and shown with (default: the error's own).
    #[must_use]
    pub fn explain(mut self, f: impl Fn(&ChainError) -> String + Send + Sync + 'static) -> Self {
        self.explain = Some(Box::new(f));
        self
    }
}

/// How a run ended, as recorded in the store.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RunEnd {
    /// `done`.
    Done,
    /// Calls wait for people, one pending review each (`reviews`, in call order). The
    /// run is `paused`, or `pending` again when a queued run's reviews were all decided
    /// already.
    Paused {
        /// The run's status now.
        status: RunStatus,
        /// The pending reviews of the calls it waits on.
        reviews: Vec<Review>,
    },
    /// Stopped with more to do and needing no one: `pending`, to be run again.
    Yielded,
    /// Cancelled by the front end (`cancelled`).
    Cancelled,
    /// Failed: `pending` again after a back-off (a queued run with attempts left and a
    /// failure that may pass), `discarded`, or `failed` (an interactive run).
    Failed {
        /// What went wrong (kept as the run's last error).
        error: String,
        /// The run's status now.
        status: RunStatus,
    },
    /// The lease was lost (taken over, expired, or the run cancelled elsewhere): nothing
    /// more was written.
    Lost {
        /// Why.
        reason: String,
    },
    /// The end could not be recorded (the store failed): the run stays `running` until
    /// its lease runs out, and is then rescued from what was stored.
    NotRecorded {
        /// The store's error.
        error: String,
    },
}

impl RunEnd {
    /// The run's status as this end left it (`None` when it was lost, someone else's
    /// now, or not recorded).
    pub fn status(&self) -> Option<RunStatus> {
        match self {
            RunEnd::Done => Some(RunStatus::Done),
            RunEnd::Paused { status, .. } | RunEnd::Failed { status, .. } => Some(*status),
            RunEnd::Yielded => Some(RunStatus::Pending),
            RunEnd::Cancelled => Some(RunStatus::Cancelled),
            RunEnd::Lost { .. } | RunEnd::NotRecorded { .. } => None,
        }
    }
}

/// What [`LeasedRun::drive`] (or [`LeasedRun::fail`]) gives back to its front end.
#[derive(Debug)]
pub struct Ended {
    /// The run.
    pub run: Run,
    /// How it ended.
    pub end: RunEnd,
    /// The chain, as it stopped (none when the run failed before it was built).
    pub chain: Option<LLMChain>,
    /// The error the chain stopped with, if it did (for a front end's own wording).
    pub error: Option<ChainError>,
    /// [`Drive::message`], when it was not added (calls still wait for people).
    pub left_out: Option<Message>,
}

/// Why a run's chain could not be built ([`LeasedRun::start`]): what the run's record
/// says, and whether a queued run is tried again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotBuilt {
    /// Kept as the run's last error (masked of the process's secrets) and shown.
    pub error: String,
    /// Whether trying again may help (an MCP server that did not start yet).
    pub retryable: bool,
}

impl NotBuilt {
    /// A failure that may pass.
    pub fn retryable(error: impl Into<String>) -> Self {
        NotBuilt {
            error: error.into(),
            retryable: true,
        }
    }

    /// A failure that will not pass by trying again (a bad configuration).
    pub fn permanent(error: impl Into<String>) -> Self {
        NotBuilt {
            error: error.into(),
            retryable: false,
        }
    }
}

/// A run held under its lease; see the module's docs.
#[derive(Debug)]
pub struct LeasedRun<S> {
    store: Arc<S>,
    run: Run,
    lease: Lease,
    heartbeat: Heartbeat,
    /// Fired by the heartbeat when the lease is lost.
    lost: CancellationToken,
    /// The conversation as the claim read it, until [`chain_state`](Self::chain_state).
    read: Option<StoredConversation>,
}

impl<S: Store + 'static> LeasedRun<S> {
    /// A run the caller claimed (a worker, from the queue), renewed for `lease` at a
    /// time from now on. `LeaseLost` when the run holds no lease.
    pub fn claimed(store: Arc<S>, run: Run, lease: Duration) -> StoreResult<Self> {
        let held = run.lease().ok_or_else(|| StoreError::LeaseLost {
            run: run.id.clone(),
            worker: String::new(),
        })?;
        let lost = CancellationToken::new();
        let heartbeat = Heartbeat::spawn(store.clone(), held.clone(), lease, lost.clone());
        Ok(LeasedRun {
            store,
            run,
            lease: held,
            heartbeat,
            lost,
            read: None,
        })
    }

    /// Claims a run as `worker` for `lease` at a time (renewed from now on); fails as
    /// [`Store::claim_conversation`] and [`Store::claim_and_read`] do.
    pub async fn claim(
        store: Arc<S>,
        claim: Claim,
        worker: &str,
        lease: Duration,
    ) -> StoreResult<Self> {
        let (run, read) = match claim {
            Claim::Conversation { id, state } => (
                store.claim_conversation(&id, worker, lease, &state).await?,
                None,
            ),
            Claim::Chat {
                id,
                create,
                state,
                opening,
            } => {
                let (run, stored) = store
                    .claim_and_read(&id, create.map(|c| *c), worker, lease, &state, opening)
                    .await?;
                (run, Some(stored))
            }
        };
        let mut held = LeasedRun::claimed(store, run, lease)?;
        held.read = read;
        Ok(held)
    }

    /// The run as claimed.
    pub fn run(&self) -> &Run {
        &self.run
    }

    /// The lease every write is fenced by.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// The store.
    pub fn store(&self) -> &Arc<S> {
        &self.store
    }

    /// The conversation as the claim read it ([`Claim::Chat`]), until
    /// [`chain_state`](Self::chain_state) takes it.
    pub fn conversation(&self) -> Option<&StoredConversation> {
        self.read.as_ref()
    }

    /// Why the lease was lost, if it was.
    pub fn lost(&self) -> Option<HeartbeatStop> {
        self.heartbeat.stopped()
    }

    /// Runs `f` unless the lease is lost first (`None`): building a chain.
    pub async fn unless_lost<F: Future>(&self, f: F) -> Option<F::Output> {
        tokio::select! {
            _ = self.lost.cancelled() => None,
            out = f => Some(out),
        }
    }

    /// Fired when the lease is lost (a front end that waits on something of its own).
    pub fn lost_token(&self) -> CancellationToken {
        self.lost.clone()
    }

    /// The conversation as the claim read it, to change before the chain is built from it
    /// (a front end that changed the stored one under the lease).
    pub fn conversation_mut(&mut self) -> Option<&mut StoredConversation> {
        self.read.as_mut()
    }

    /// The state to build the run's chain from
    /// ([`LLMChain::from_state`](llmchain::chain::LLMChain::from_state)): the
    /// conversation as the claim read it, or as loaded now, and the run's saved state.
    /// `ConversationNotFound` when it is gone.
    pub async fn chain_state(&mut self) -> StoreResult<ChainState> {
        let conversation = match self.read.take() {
            Some(stored) => stored.conversation,
            None => {
                self.store
                    .get_conversation(&self.run.conversation_id)
                    .await?
                    .ok_or_else(|| {
                        StoreError::ConversationNotFound(self.run.conversation_id.clone())
                    })?
                    .conversation
            }
        };
        Ok(chain_state(conversation, Some(&self.run.state)))
    }

    /// Loads the run's conversation ([`chain_state`](Self::chain_state)) and builds
    /// its chain with `build`, unless the lease is lost first: the one start of every
    /// front end. When the run cannot start it is ended here and its [`Ended`] given
    /// back: failed (a queued run retried later when the failure may pass: a transient
    /// store error, or a [`NotBuilt::retryable`] one), or [`RunEnd::Lost`] when the lease
    /// went meanwhile (nothing written).
    pub async fn start<T, B, F>(mut self, build: B) -> Result<(Self, T), Box<Ended>>
    where
        B: FnOnce(Run, ChainState) -> F,
        F: Future<Output = Result<T, NotBuilt>>,
    {
        let lost = self.lost.clone();
        let loaded = tokio::select! {
            _ = lost.cancelled() => None,
            s = self.chain_state() => Some(s),
        };
        let not_built = match loaded {
            None => None,
            Some(Err(StoreError::ConversationNotFound(c))) => Some(NotBuilt::permanent(format!(
                "conversation {c} does not exist"
            ))),
            Some(Err(e)) => {
                let text = format!("cannot load the conversation: {e}");
                Some(if e.is_transient() {
                    NotBuilt::retryable(text)
                } else {
                    NotBuilt::permanent(text)
                })
            }
            Some(Ok(state)) => match self.unless_lost(build(self.run.clone(), state)).await {
                Some(Ok(built)) => return Ok((self, built)),
                Some(Err(why)) => Some(why),
                None => None,
            },
        };
        Err(Box::new(match not_built {
            Some(NotBuilt { error, retryable }) => self.fail(error, retryable).await,
            None => {
                let reason = self.lost().map_or(
                    "the lease was lost while the run was starting".to_owned(),
                    |why| format!("{} while the run was starting", describe_stop(&why)),
                );
                Ended {
                    run: self.run.clone(),
                    end: RunEnd::Lost { reason },
                    chain: None,
                    error: None,
                    left_out: None,
                }
            }
        }))
    }

    /// Ends the run as failed before any chain ran (its conversation could not be
    /// loaded, its chain not built): retried later when `retryable` and it is a queued
    /// run with attempts left.
    pub async fn fail(self, error: String, retryable: bool) -> Ended {
        let error = llmchain::secrets::masked(error);
        let failed = self.store.fail_run(&self.lease, &error, retryable).await;
        if let Ok(status) = &failed {
            let content = llmchain::telemetry::capture_content();
            tracing::info!(
                run = %self.run.id,
                attempt = self.run.attempt,
                status = status.as_str(),
                "error.type" = "start_failed",
                error = content.then_some(error.as_str()),
                "run attempt failed"
            );
        }
        let run = self.run.clone();
        let end = match failed {
            Ok(status) => RunEnd::Failed { error, status },
            Err(e) => Unrecorded::from(e).into(),
        };
        Ended {
            run,
            end,
            chain: None,
            error: None,
            left_out: None,
        }
    }

    /// Drives `chain` (built from [`chain_state`](Self::chain_state)) in `mode` under
    /// this run, and ends the run; see the module's docs.
    pub async fn drive(self, chain: LLMChain, mode: Mode, mut with: Drive) -> Ended {
        let mut sink = StoreSink::new(self.store.clone(), self.run.conversation_id.clone())
            .with_lease(self.lease.clone(), mode.name())
            .keeping(&self.run.state.extra);
        if with.hold_answers {
            sink = sink.holding_answers();
        }
        let writes: Arc<dyn ConversationSink> = Arc::new(sink.clone());
        let writes = match with.wrap_sink.take() {
            Some(wrap) => wrap(writes),
            None => writes,
        };
        // Every span of the run names its conversation (a backend's session).
        let mut chain = chain
            .with_sink(writes)
            .with_conversation_id(self.run.conversation_id.clone());
        // The lease lost (the heartbeat) or the front end's cancellation stop the chain.
        let forward = {
            let token = chain.cancellation_token();
            let lost = self.lost.clone();
            let cancel = with.cancel.clone().unwrap_or_default();
            tokio::spawn(async move {
                tokio::select! {
                    _ = lost.cancelled() => {}
                    _ = cancel.cancelled() => {}
                }
                token.cancel();
            })
        };
        // One span for this drive, in the trace of whoever started the run (kept with
        // it, so an attempt after a review or a crash continues that trace) or of the
        // front end's request.
        let span = tracing::info_span!(
            "llmchain.run",
            "otel.name" = "llmchain run",
            "otel.kind" = "internal",
            "llmchain.run.id" = %self.run.id,
            "llmchain.run.attempt" = self.run.attempt,
            "llmchain.run.worker" = %self.lease.worker_id,
            "gen_ai.conversation.id" = %self.run.conversation_id,
        );
        if let Some(parent) = with
            .traceparent
            .as_deref()
            .filter(|t| crate::trace_context::parse(t).is_some())
            .or_else(|| crate::trace_context::traceparent(&self.run.state))
        {
            crate::trace_context::set_parent(&span, parent);
        }
        let mut left_out = None;
        let explain = with.explain.take();
        let ended = async {
            let result = self.go(&mut chain, &mode, &mut with, &mut left_out).await;
            forward.abort();
            self.end(chain, &sink, &mode, result, explain.as_deref())
                .await
        };
        let mut ended = tracing::Instrument::instrument(ended, span).await;
        ended.left_out = left_out;
        ended
    }

    /// Answers what waits, adds the message, runs.
    async fn go(
        &self,
        chain: &mut LLMChain,
        mode: &Mode,
        with: &mut Drive,
        left_out: &mut Option<Message>,
    ) -> Result<RunOutcome, ChainError> {
        let conversation = &self.run.conversation_id;
        let store = self.store.as_ref();
        let waiting = chain.waiting_calls();
        if !waiting.is_empty() {
            note_decisions(store, conversation, &waiting).await;
        }
        if let Some(undecided) = &with.undecided {
            let waiting = chain.waiting_calls();
            if !waiting.is_empty() {
                let (_, open) = decisions_for(store, conversation, &waiting)
                    .await
                    .map_err(persist)?;
                let calls: Vec<ToolCall> = waiting
                    .into_iter()
                    .filter(|c| c.call_id.as_ref().is_some_and(|id| open.contains(id)))
                    .collect();
                if !calls.is_empty() {
                    undecided.decide(&self.run, &calls).await.map_err(persist)?;
                }
            }
        }
        if let Some(message) = with.message.take() {
            if let Some(waits) = answering(store, conversation, chain, None).await? {
                *left_out = Some(message);
                return Ok(waits);
            }
            chain.add_message(message).await?;
        }
        answering(store, conversation, chain, Some(mode))
            .await
            .map(|outcome| outcome.unwrap_or_else(|| waiting_outcome(chain)))
    }

    /// The one mapping of how the chain stopped to what is recorded.
    async fn end(
        self,
        chain: LLMChain,
        sink: &StoreSink<S>,
        mode: &Mode,
        result: Result<RunOutcome, ChainError>,
        explain: Option<&Explain>,
    ) -> Ended {
        let LeasedRun {
            store,
            run,
            lease,
            heartbeat,
            ..
        } = self;
        let stopped = heartbeat.stopped();
        drop(heartbeat);
        let state = |status: RunStatus| {
            let mut saved = run_state(chain.state(), mode.name());
            keep_extra(&mut saved, &run.state.extra);
            saved.status = status;
            saved
        };
        let disposition = match (&stopped, &result) {
            (Some(_), _) => Disposition::Stopped,
            (None, Ok(outcome)) => outcome.disposition(),
            (None, Err(e)) => e.disposition(),
        };
        let error = result.as_ref().err().cloned();
        let recorded: Result<RunEnd, Unrecorded> = match disposition {
            Disposition::Done => sink
                .complete(&state(RunStatus::Done))
                .await
                .map(|()| RunEnd::Done)
                .map_err(Unrecorded::from),
            Disposition::Yielded => sink
                .complete(&state(RunStatus::Pending))
                .await
                .map(|()| RunEnd::Yielded)
                .map_err(Unrecorded::from),
            Disposition::Cancelled => sink
                .complete(&state(RunStatus::Cancelled))
                .await
                .map(|()| RunEnd::Cancelled)
                .map_err(Unrecorded::from),
            Disposition::WaitsForPeople => {
                pause(
                    store.as_ref(),
                    sink,
                    &lease,
                    &run,
                    &chain,
                    state(RunStatus::Paused),
                )
                .await
            }
            Disposition::Stopped => {
                let reason = match (&stopped, &result) {
                    (Some(why), _) => describe_stop(why),
                    (None, Err(e)) => e.to_string(),
                    (None, Ok(_)) => "the lease was lost".to_owned(),
                };
                Err(Unrecorded::Lost(reason))
            }
            Disposition::Transient | Disposition::Permanent => {
                let text = match (&result, explain) {
                    (Err(e), Some(explain)) => explain(e),
                    (Err(e), None) => e.to_string(),
                    (Ok(o), _) => format!("the run ended as {o:?}"),
                };
                // Kept as the run's last error and shown: no secret of the process in it.
                let text = llmchain::secrets::masked(text);
                // A failed run keeps the chain's last state and what its sink held.
                if let Err(e) = sink.flush().await {
                    tracing::info!(run = %run.id, error = %e, "the failed run's last writes were not saved");
                }
                let failed = store
                    .fail_run(&lease, &text, disposition == Disposition::Transient)
                    .await;
                if let Ok(status) = &failed {
                    // Exported as a span event: what an error quotes of an answer only
                    // with the content opt-in.
                    let (kind, shown) = match &result {
                        Err(e) => (e.error_type(), e.telemetry_text()),
                        Ok(_) => (
                            "unexpected_outcome",
                            "the run ended without its answer".to_owned(),
                        ),
                    };
                    tracing::info!(
                        run = %run.id,
                        attempt = run.attempt,
                        status = status.as_str(),
                        "error.type" = kind,
                        error = %shown,
                        "run attempt failed"
                    );
                }
                failed
                    .map(|status| RunEnd::Failed {
                        error: text,
                        status,
                    })
                    .map_err(Unrecorded::from)
            }
        };
        let end = match recorded {
            Ok(end) => end,
            Err(why) => {
                // Nothing more is written: the lease is lost, or the store failed.
                sink.drop_held();
                if let Unrecorded::Failed(e) = &why {
                    tracing::warn!(run = %run.id, error = %e, "could not record the end of the run");
                }
                why.into()
            }
        };
        Ended {
            run,
            end,
            chain: Some(chain),
            error,
            left_out: None,
        }
    }
}

/// Pauses the run with a review per waiting call; the pending reviews of those calls.
async fn pause<S: Store + 'static>(
    store: &S,
    sink: &StoreSink<S>,
    lease: &Lease,
    run: &Run,
    chain: &LLMChain,
    state: RunState,
) -> Result<RunEnd, Unrecorded> {
    // What waits is written before the run pauses (nothing, as a rule: the state that
    // pauses it was written with it).
    sink.flush().await?;
    let wanted = new_reviews(chain);
    let status = store.pause_run(lease, &state, &wanted).await?;
    let open = store
        .list_reviews(&ReviewFilter {
            conversation: Some(run.conversation_id.clone()),
            status: Some(ReviewStatus::Pending),
            ..Default::default()
        })
        .await?;
    let reviews = wanted
        .iter()
        .filter_map(|w| {
            open.iter()
                .find(|r| r.call_id == w.call_id && r.round == w.round)
                .cloned()
        })
        .collect();
    Ok(RunEnd::Paused { status, reviews })
}

fn describe_stop(why: &HeartbeatStop) -> String {
    match why {
        HeartbeatStop::LeaseLost => "the lease was taken over or ran out".to_owned(),
        HeartbeatStop::Cancelled => "the run was cancelled".to_owned(),
        HeartbeatStop::Unreachable(e) => {
            format!("the store was unreachable for a whole lease: {e}")
        }
    }
}

fn persist(e: StoreError) -> ChainError {
    ChainError::Persist(sink_error(e))
}

/// Why a run's end was not recorded.
enum Unrecorded {
    /// The lease is lost: nothing can be written under it.
    Lost(String),
    /// The store failed.
    Failed(String),
}

impl From<Unrecorded> for RunEnd {
    fn from(why: Unrecorded) -> Self {
        match why {
            Unrecorded::Lost(reason) => RunEnd::Lost { reason },
            Unrecorded::Failed(error) => RunEnd::NotRecorded { error },
        }
    }
}

impl From<StoreError> for Unrecorded {
    fn from(e: StoreError) -> Self {
        if e.must_stop() {
            Unrecorded::Lost(e.to_string())
        } else {
            Unrecorded::Failed(e.to_string())
        }
    }
}

impl From<llmchain::chain::SinkError> for Unrecorded {
    fn from(e: llmchain::chain::SinkError) -> Self {
        if e.must_stop() {
            Unrecorded::Lost(e.to_string())
        } else {
            Unrecorded::Failed(e.to_string())
        }
    }
}

/// The decisions already made about `waiting` calls, as events of the run's span: who
/// decided what about which call, when, after how long a wait (a trace shows the pause
/// for review and its end).
async fn note_decisions<S: Store>(store: &S, conversation: &str, waiting: &[ToolCall]) {
    let Ok(reviews) = store
        .list_reviews(&ReviewFilter {
            conversation: Some(conversation.to_owned()),
            ..Default::default()
        })
        .await
    else {
        return;
    };
    for call in waiting {
        let Some(r) = reviews.iter().find(|r| {
            Some(r.call_id.as_str()) == call.call_id.as_deref()
                && r.round == call.review_round()
                && r.decided_at.is_some()
        }) else {
            continue;
        };
        let decided_at = r.decided_at.unwrap_or(r.created_at);
        tracing::info!(
            "llmchain.review.id" = %r.id,
            "llmchain.review.call_id" = %r.call_id,
            "llmchain.review.tool" = %r.tool,
            "llmchain.review.decision" = r.status.as_str(),
            "llmchain.review.decided_by" = r.decided_by.as_deref().unwrap_or(""),
            "llmchain.review.decided_at" = decided_at,
            "llmchain.review.waited_ms" = decided_at - r.created_at,
            "review decided"
        );
    }
}

/// What a chain waiting for people returns.
fn waiting_outcome(chain: &LLMChain) -> RunOutcome {
    match chain.pending_review() {
        Some(p) => RunOutcome::ReviewRequired(p.clone()),
        None => RunOutcome::Interrupted(Vec::new()),
    }
}

/// Answers the calls `chain` waits on from the review inbox: the decisions stored for
/// them (whichever run they were made under) are applied
/// ([`LLMChain::answer_waiting`]) and the chain goes on, each time it stops for a
/// person, until it waits for a decision not made yet. Then, with a `mode`, runs it
/// (`Some` when the run is done, fails, or waits); without one, only settles the last
/// answer before a message is added after it: every call answered, those that were
/// waiting with their decisions, the others through the chain (run after review; one
/// found `executing` answered "outcome unknown"), and `None` when nothing waits then.
async fn answering<S: Store>(
    store: &S,
    conversation: &str,
    chain: &mut LLMChain,
    mode: Option<&Mode>,
) -> Result<Option<RunOutcome>, ChainError> {
    // Rounds of answering (a tool that keeps interrupting), not of running.
    let mut rounds = 0;
    loop {
        let calls = chain.waiting_calls();
        let step = if !calls.is_empty() {
            let (decided, undecided) = decisions_for(store, conversation, &calls)
                .await
                .map_err(persist)?;
            if !undecided.is_empty() || rounds >= MAX_ANSWERED_ROUNDS {
                return Ok(Some(waiting_outcome(chain)));
            }
            rounds += 1;
            chain.answer_waiting(decided).await?
        } else if let Some(mode) = mode {
            match chain.run(mode.clone()).await? {
                // A decision may already be stored for these very calls.
                RunOutcome::ReviewRequired(_) | RunOutcome::Interrupted(_)
                    if !chain.waiting_calls().is_empty() =>
                {
                    continue;
                }
                other => return Ok(Some(other)),
            }
        } else if !chain.has_unanswered_calls() {
            return Ok(None);
        } else if rounds >= MAX_ANSWERED_ROUNDS {
            return Ok(Some(waiting_outcome(chain)));
        } else {
            rounds += 1;
            chain.execute_tool_calls().await?
        };
        if let Step::Break(outcome) = step {
            let waits_on_nothing = outcome.disposition() == Disposition::WaitsForPeople
                && chain.waiting_calls().is_empty();
            // Running, the chain's word stands; settling, only a wait on nothing the
            // inbox could answer does (what else stopped it is met again when it runs).
            if mode.is_some() || waits_on_nothing {
                return Ok(Some(outcome));
            }
        }
    }
}

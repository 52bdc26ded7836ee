//! [`StoreSink`]: a running [`LLMChain`] persisted into a
//! [`Store`] as it goes.
//!
//! Every appended message, every `execution_status` transition (before and after each
//! tool body) and the run state are written, so a process killed at any point leaves a
//! conversation that loads and resumes. A sink holding a run's lease writes some of them
//! with its next write, in that write's transaction, rather than in one of their own
//! (each transaction is a sync of the database): a call's final status goes with the
//! tool message that follows it, and a run state with the next write or not at all when
//! the run's completion saves a newer one. Nothing that comes before an effect waits: a
//! call's `executing` status is written (with whatever waited) before its tool runs, and
//! a state that pauses the run for a review is written at once. A process killed while
//! a status waited leaves the call `executing`, as if killed while the tool ran ("outcome
//! unknown" on resume). A sink [`holding_answers`](StoreSink::holding_answers) holds the
//! model's answers too (its caller ends the run through the sink): an answer with calls
//! goes with the first call's `executing` status, the last with the run's completion.
//! Load a conversation with
//! [`load_chain_state`], build the chain with
//! [`LLMChain::from_state`](llmchain::chain::LLMChain::from_state), and run it. Calls
//! found `executing` are answered "outcome unknown" unless their tool is idempotent
//! (the chain does this itself; [`Store::recover`] is for applications without a chain).

use std::sync::Arc;

use llmchain::chain::{
    ChainState, ConversationSink, LLMChain, SinkError, SinkErrorKind, SinkFuture,
};
use llmchain::conversation::Conversation;
use llmchain::message::{ExecutionStatus, Message, Role};
use serde_json::{Map, Value, json};

use crate::error::{StoreError, StoreResult};
use crate::model::{Change, Lease, NewConversation, RunState, RunStatus, Writer};
use crate::store::Store;

/// Persists a chain into a store: one conversation, and optionally one run whose lease
/// this worker holds. With a lease, **every** write (messages appended or replaced,
/// tool statuses, run state) is fenced by it: a worker that lost its lease cannot change
/// the conversation, and its chain stops with
/// [`ChainError::Persist`](llmchain::chain::ChainError::Persist) of kind
/// [`SinkErrorKind::LeaseLost`] (or `RunCancelled`), whose source is the [`StoreError`].
#[derive(Debug)]
pub struct StoreSink<S> {
    store: Arc<S>,
    conversation_id: String,
    run: Option<Lease>,
    mode: String,
    /// The run state's own `extra` keys (an application's job description…), kept in
    /// every save.
    keep: Map<String, Value>,
    /// The run state this sink (or a clone) last saved: a save of the same state again
    /// is skipped. The chain saves after each step, and a step that changes nothing of
    /// the run state (a tool message after the call's step) would otherwise cost a
    /// transaction, a sync on SQLite, for nothing.
    saved: Arc<std::sync::Mutex<Option<RunState>>>,
    /// What waits for the next write (with a lease only; see the module's docs).
    held: Arc<std::sync::Mutex<Held>>,
    /// Held while a write with what waited is in flight: the chain's concurrent writes
    /// (the `executing` statuses of parallel calls) go one after the other, so none
    /// commits before the one that carries what waited (the answer naming the calls).
    writing: Arc<tokio::sync::Mutex<()>>,
    /// Whether the model's answers (assistant messages) wait too
    /// ([`StoreSink::holding_answers`]).
    hold_answers: bool,
}

/// The writes a leased sink holds for its next one.
#[derive(Debug, Default)]
struct Held {
    /// Calls' final statuses, in the order they came (one per call).
    statuses: Vec<(String, ExecutionStatus)>,
    /// The newest run state.
    state: Option<RunState>,
    /// Assistant messages appended by the chain, at consecutive positions from
    /// `answers_at` (with [`StoreSink::holding_answers`] only).
    answers: Vec<Message>,
    answers_at: usize,
}

impl Held {
    /// Puts back `taken` (what a write that failed carried) before what was held since:
    /// the next write carries it. A status or state held since is newer and stays.
    fn restore(&mut self, mut taken: Held, answers: Vec<Message>) {
        let newer = std::mem::take(&mut self.statuses);
        self.statuses = std::mem::take(&mut taken.statuses);
        for (id, status) in newer {
            match self.statuses.iter_mut().find(|(i, _)| *i == id) {
                Some(entry) => entry.1 = status,
                None => self.statuses.push((id, status)),
            }
        }
        if self.state.is_none() {
            self.state = taken.state.take();
        }
        if !answers.is_empty() {
            let newer = std::mem::replace(&mut self.answers, answers);
            self.answers_at = taken.answers_at;
            self.answers.extend(newer);
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // The run ended without `complete` or `flush`: the answers were never stored. A
        // resumed run asks the model again (nothing ran on them: a call's `executing`
        // status is written with them), but a caller that opted in must end the run
        // through the sink.
        if !self.answers.is_empty() {
            tracing::warn!(
                answers = self.answers.len(),
                "a sink holding the model's answers was dropped before writing them; \
                 end the run with StoreSink::complete or StoreSink::flush"
            );
        }
    }
}

impl<S> Clone for StoreSink<S> {
    fn clone(&self) -> Self {
        StoreSink {
            store: self.store.clone(),
            conversation_id: self.conversation_id.clone(),
            run: self.run.clone(),
            mode: self.mode.clone(),
            keep: self.keep.clone(),
            saved: self.saved.clone(),
            held: self.held.clone(),
            writing: self.writing.clone(),
            hold_answers: self.hold_answers,
        }
    }
}

impl<S: Store + 'static> StoreSink<S> {
    /// A sink into `conversation_id`. Its messages so far must be the chain's messages
    /// so far (positions and sequence numbers agree).
    pub fn new(store: Arc<S>, conversation_id: impl Into<String>) -> Self {
        StoreSink {
            store,
            conversation_id: conversation_id.into(),
            run: None,
            mode: String::new(),
            keep: Map::new(),
            saved: Arc::default(),
            held: Arc::default(),
            writing: Arc::default(),
            hold_answers: false,
        }
    }

    /// Stores `chain`'s conversation as a new one (its header and the messages so far,
    /// with `title`) and attaches a sink to it, so every later change is persisted: the
    /// one call that keeps the sink's rule (the store holds exactly the chain's messages)
    /// without anything to get in the right order. Returns the chain and the new
    /// conversation's id.
    pub async fn persist(
        store: Arc<S>,
        chain: LLMChain,
        title: Option<String>,
    ) -> StoreResult<(LLMChain, String)> {
        let new = NewConversation {
            title,
            ..NewConversation::from_conversation(chain.state().conversation.clone())
        };
        let id = store.create_conversation(new).await?;
        let sink = StoreSink::new(store, id.clone());
        Ok((chain.with_sink(sink), id))
    }

    /// A sink for a claimed run: its conversation, every write fenced by its lease, and
    /// the run state's `extra` keys kept in every save. `None` when the run holds no
    /// lease.
    pub fn for_run(store: Arc<S>, run: &crate::Run, mode: impl Into<String>) -> Option<Self> {
        Some(
            StoreSink::new(store, run.conversation_id.clone())
                .with_lease(run.lease()?, mode)
                .keeping(&run.state.extra),
        )
    }

    /// Keeps these run-state `extra` keys (an application's job description…) in every
    /// save of the run state.
    #[must_use]
    pub fn keeping(mut self, extra: &Map<String, Value>) -> Self {
        self.keep = extra.clone();
        self
    }

    /// Fences every write by `lease` (the run's lease, from [`Run::lease`](crate::Run::lease))
    /// and saves the run state into its run, with `mode` named in it.
    #[must_use]
    pub fn with_lease(mut self, lease: Lease, mode: impl Into<String>) -> Self {
        self.run = Some(lease);
        self.mode = mode.into();
        self
    }

    /// With a lease, the model's answers (assistant messages) wait for the sink's next
    /// write as well, which saves a transaction per answer: one with tool calls goes
    /// with its first call's `executing` status (so before any tool runs), and the last
    /// one with the run's completion. The caller must then end the run through the
    /// sink: [`complete`](Self::complete), or [`flush`](Self::flush) before any other
    /// way of ending it (pausing, failing). A process killed while an answer waits
    /// loses that answer, and the run, resumed, asks the model again: nothing ran on it.
    #[must_use]
    pub fn holding_answers(mut self) -> Self {
        self.hold_answers = true;
        self
    }

    /// The lease the writes are fenced by, if any.
    pub fn lease(&self) -> Option<&Lease> {
        self.run.as_ref()
    }

    /// The conversation id.
    pub fn conversation_id(&self) -> &str {
        &self.conversation_id
    }

    /// Writes what waits for the sink's next write (a call's final status, a run state,
    /// an answer; see the module's docs), if anything does: for a caller that ends a run
    /// without saving the chain's state itself. Completing the run with the chain's
    /// state makes the held state moot.
    pub async fn flush(&self) -> Result<(), SinkError> {
        let Some(lease) = &self.run else {
            return Ok(());
        };
        self.write_with_held(lease, None, None).await
    }

    /// Ends the run with `state` (its status, the lease released), in one transaction
    /// with what waits (the chain's last answer): [`Store::complete_run`] through the
    /// sink. A held run state is moot. Without a lease, the store's run is not this
    /// sink's: nothing is written.
    pub async fn complete(&self, state: &RunState) -> Result<(), SinkError> {
        let Some(lease) = &self.run else {
            return Ok(());
        };
        self.lock_held().state = None;
        self.write_with_held(lease, Some(Change::Complete(state)), None)
            .await
    }

    /// Forgets what waits, unwritten: for a caller whose lease is lost (no write under
    /// it can succeed).
    pub fn drop_held(&self) {
        let mut held = self.lock_held();
        held.answers.clear();
        *held = Held::default();
    }

    fn lock_held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes `change` (if any) under `lease` with everything held, in one transaction.
    /// When `change` appends a message at `position`, checks that the store numbered it
    /// so (as it checks the held answers' numbers).
    async fn write_with_held(
        &self,
        lease: &Lease,
        change: Option<Change<'_>>,
        position: Option<usize>,
    ) -> Result<(), SinkError> {
        let _writing = self.writing.lock().await;
        let mut held = std::mem::take(&mut *self.lock_held());
        let answers = std::mem::take(&mut held.answers);
        if change.is_none()
            && held.statuses.is_empty()
            && held.state.is_none()
            && answers.is_empty()
        {
            return Ok(());
        }
        let mut changes: Vec<Change<'_>> = held
            .statuses
            .iter()
            .map(|(id, status)| Change::Status(id, *status))
            .collect();
        if !answers.is_empty() {
            changes.push(Change::Append(&answers));
        }
        changes.extend(held.state.as_ref().map(Change::RunState));
        changes.extend(change);
        let first = match self.store.write_leased(lease, &changes).await {
            Ok(first) => first,
            Err(e) => {
                // Nothing was written: what waited waits on, for the next write (a
                // later call's `executing` then carries the answer naming it).
                drop(changes);
                self.lock_held().restore(held, answers);
                return Err(sink_error(e));
            }
        };
        // The held answers were appended first, then `change`'s message.
        if !answers.is_empty() {
            numbered(&self.conversation_id, held.answers_at, first)?;
        }
        match position {
            Some(p) => numbered(&self.conversation_id, p, first + answers.len() as i64),
            None => Ok(()),
        }
    }
}

/// Checks that the store numbered the message at `position` as `seq`.
fn numbered(conversation: &str, position: usize, seq: i64) -> Result<(), SinkError> {
    if seq == position as i64 {
        return Ok(());
    }
    Err(SinkError::new(
        SinkErrorKind::Conflict,
        format!(
            "the store numbered message {position} of conversation {conversation} as {seq}: the chain \
             and the stored conversation disagree (was the chain built from the stored messages?)"
        ),
    ))
}

/// The store's [`RunState`] of a chain state (the chain's own fields go under `extra.chain`).
pub fn run_state(chain: &ChainState, mode: &str) -> RunState {
    let mut extra = Map::new();
    extra.insert(
        "chain".into(),
        json!({
            "failing_calls": chain.failing_calls,
            "run_count": chain.run_count,
            "pending_review": chain.pending_review,
            "spent": chain.spent,
            "journal": chain.journal,
            "hooks": chain.hooks,
        }),
    );
    RunState {
        mode: mode.to_owned(),
        status: if chain.pending_review.is_some() {
            RunStatus::Paused
        } else {
            RunStatus::Running
        },
        failure_count: chain.current_failure_count,
        pending_interrupts: Vec::new(),
        review_decisions: chain
            .pending_review
            .iter()
            .flat_map(|p| p.calls.iter())
            .filter_map(|c| serde_json::to_value(c).ok())
            .collect(),
        extra,
    }
}

/// Puts back into `state` the `extra` keys of `keep` that it does not set itself.
pub fn keep_extra(state: &mut RunState, keep: &Map<String, Value>) {
    for (k, v) in keep {
        state.extra.entry(k.clone()).or_insert_with(|| v.clone());
    }
}

/// Loads a conversation (and a run's state, if given) as a chain state to resume from.
/// `None` when the conversation does not exist.
pub async fn load_chain_state<S: Store>(
    store: &S,
    conversation_id: &str,
    run: Option<&RunState>,
) -> StoreResult<Option<ChainState>> {
    Ok(store
        .get_conversation(conversation_id)
        .await?
        .map(|stored| chain_state(stored.conversation, run)))
}

/// A conversation already loaded (and a run's state, if given) as a chain state to
/// resume from: what [`load_chain_state`] returns, for a caller that holds the
/// conversation and need not read it again.
pub fn chain_state(conversation: Conversation, run: Option<&RunState>) -> ChainState {
    let mut state = ChainState {
        conversation,
        ..Default::default()
    };
    if let Some(run) = run {
        state.current_failure_count = run.failure_count;
        if let Some(chain) = run.extra.get("chain") {
            if let Some(f) = chain.get("failing_calls") {
                state.failing_calls = serde_json::from_value(f.clone()).unwrap_or_default();
            }
            state.run_count = chain
                .get("run_count")
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(0);
            if let Some(p) = chain.get("pending_review").filter(|p| !p.is_null()) {
                state.pending_review = serde_json::from_value(p.clone()).ok();
            }
            // The budget's counters and the decision journal: what a resumed run must
            // not forget (a fresh count would give it a fresh budget).
            if let Some(s) = chain.get("spent").filter(|s| !s.is_null()) {
                state.spent = serde_json::from_value(s.clone()).unwrap_or_default();
            }
            if let Some(j) = chain.get("journal").filter(|j| !j.is_null()) {
                state.journal = serde_json::from_value(j.clone()).unwrap_or_default();
            }
            // The hooks' own state (their counters), by id and version.
            if let Some(h) = chain.get("hooks").filter(|h| !h.is_null()) {
                state.hooks = serde_json::from_value(h.clone()).unwrap_or_default();
            }
        }
    }
    state
}

/// The chain's view of a store error: its kind decides whether the run must stop.
pub fn sink_error(e: StoreError) -> SinkError {
    let kind = match &e {
        StoreError::LeaseLost { .. } => SinkErrorKind::LeaseLost,
        StoreError::RunCancelled { .. } => SinkErrorKind::RunCancelled,
        StoreError::ConversationNotFound(_)
        | StoreError::MessageNotFound { .. }
        | StoreError::RunNotFound(_) => SinkErrorKind::Conflict,
        _ => SinkErrorKind::Other,
    };
    SinkError::from_source(kind, e)
}

impl<S> StoreSink<S> {
    /// Who this sink writes as: the run's lease when it has one (fenced), else the
    /// conversation.
    fn writer(&self) -> Writer<'_> {
        match &self.run {
            Some(lease) => Writer::Lease(lease),
            None => Writer::Conversation(&self.conversation_id),
        }
    }
}

impl<S: Store + 'static> ConversationSink for StoreSink<S> {
    fn append_message<'a>(&'a self, position: usize, message: &'a Message) -> SinkFuture<'a> {
        Box::pin(async move {
            let one = std::slice::from_ref(message);
            let Some(lease) = &self.run else {
                let seq = self
                    .store
                    .append_messages(self.writer(), one)
                    .await
                    .map_err(sink_error)?;
                return numbered(&self.conversation_id, position, seq);
            };
            if self.hold_answers && message.role == Role::Assistant {
                let mut held = self.lock_held();
                if held.answers.is_empty() {
                    held.answers_at = position;
                }
                if held.answers_at + held.answers.len() == position {
                    held.answers.push(message.clone());
                    return Ok(());
                }
            }
            self.write_with_held(lease, Some(Change::Append(one)), Some(position))
                .await
        })
    }

    fn replace_message<'a>(&'a self, position: usize, message: &'a Message) -> SinkFuture<'a> {
        Box::pin(async move {
            // What waits is written first: it came before this change.
            self.flush().await?;
            self.store
                .replace_message(self.writer(), position as i64, message)
                .await
                .map_err(sink_error)
        })
    }

    fn set_tool_status<'a>(&'a self, call_id: &'a str, status: ExecutionStatus) -> SinkFuture<'a> {
        Box::pin(async move {
            let Some(lease) = &self.run else {
                return self
                    .store
                    .set_tool_status(self.writer(), call_id, status)
                    .await
                    .map_err(sink_error);
            };
            if status == ExecutionStatus::Executing {
                // Before the tool runs: written now, with what waited.
                return self
                    .write_with_held(lease, Some(Change::Status(call_id, status)), None)
                    .await;
            }
            let mut held = self.lock_held();
            match held.statuses.iter_mut().find(|(id, _)| id == call_id) {
                Some(entry) => entry.1 = status,
                None => held.statuses.push((call_id.to_owned(), status)),
            }
            Ok(())
        })
    }

    fn checkpoint<'a>(&'a self, state: &'a ChainState) -> SinkFuture<'a> {
        Box::pin(async move {
            self.save_state(state).await?;
            // Written now, with whatever waited (a budget's charge before its call).
            self.flush().await
        })
    }

    fn save_state<'a>(&'a self, state: &'a ChainState) -> SinkFuture<'a> {
        Box::pin(async move {
            if self.run.is_none() {
                return Ok(());
            }
            let mut saved = run_state(state, &self.mode);
            keep_extra(&mut saved, &self.keep);
            let same = self
                .saved
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_ref()
                == Some(&saved);
            if same {
                return Ok(());
            }
            *self.saved.lock().unwrap_or_else(|p| p.into_inner()) = Some(saved.clone());
            let pauses = saved.status == RunStatus::Paused;
            self.lock_held().state = Some(saved);
            if pauses {
                // A run that waits for a person: its state is written at once.
                self.flush().await?;
            }
            Ok(())
        })
    }
}

//! The [`Store`] trait: what every backend provides.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use llmchain::conversation::Conversation;
use llmchain::message::{ExecutionStatus, Message};

use crate::error::{StoreError, StoreResult};
use crate::model::{
    Change, ConversationSummary, Lease, NewConversation, Opening, Run, RunFilter, RunOptions,
    RunState, RunStatus, StoredConversation, Writer,
};
use crate::recovery::Recovery;
use crate::review::{Decided, NewReview, Review, ReviewFilter};
use llmchain::chain::HumanDecision;

/// Durable conversations, runs and tool-call statuses.
///
/// Every write is durable when its future resolves (see the crate docs for the SQLite
/// `synchronous` trade-off). Implemented by [`SqliteStore`](crate::SqliteStore),
/// [`PostgresStore`](crate::PostgresStore) and [`AnyStore`](crate::AnyStore).
pub trait Store: Send + Sync {
    /// Creates a conversation, with its initial messages if any; returns its id.
    fn create_conversation(
        &self,
        new: NewConversation,
    ) -> impl Future<Output = StoreResult<String>> + Send;

    /// Replaces the header (system prompt, tools, tool choice…) of a conversation; the
    /// `messages` of `header` are ignored.
    fn update_header(
        &self,
        id: &str,
        header: &Conversation,
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// Loads a conversation: header, every message in sequence order, and each tool call's
    /// recorded `execution_status`. `None` when there is no such conversation.
    fn get_conversation(
        &self,
        id: &str,
    ) -> impl Future<Output = StoreResult<Option<StoredConversation>>> + Send;

    /// The most recently updated conversations first.
    fn list_conversations(
        &self,
        limit: i64,
    ) -> impl Future<Output = StoreResult<Vec<ConversationSummary>>> + Send;

    /// The most recently updated conversations first, among those whose metadata holds
    /// the string `value` under `key` (an application's mark: `llmchain serve` lists
    /// only its own chats). `key` is 1-64 letters, digits or `_`.
    fn list_conversations_tagged(
        &self,
        key: &str,
        value: &str,
        limit: i64,
    ) -> impl Future<Output = StoreResult<Vec<ConversationSummary>>> + Send;

    /// Conversations whose title or stored messages contain `text` (ignoring ASCII case),
    /// most recently updated first. Messages are matched as stored (JSON: `text` is
    /// looked for as a JSON string would hold it), so a caller that shows a match reads
    /// the messages to find it in their text.
    fn search_conversations(
        &self,
        text: &str,
        limit: i64,
    ) -> impl Future<Output = StoreResult<Vec<ConversationSummary>>> + Send;

    /// Appends one message; returns its sequence number. O(1): nothing is rewritten.
    fn append_message(
        &self,
        id: &str,
        message: &Message,
    ) -> impl Future<Output = StoreResult<i64>> + Send;

    /// Appends several messages to `to`'s conversation in one transaction (with the
    /// lease check, for a [`Writer::Lease`]); returns the first sequence number.
    fn append_messages(
        &self,
        to: Writer<'_>,
        messages: &[Message],
    ) -> impl Future<Output = StoreResult<i64>> + Send;

    /// Replaces the message at sequence number `seq` of `to`'s conversation (the one
    /// exception to append-only: a tool message whose content a message expansion
    /// trimmed). Fails with
    /// [`StoreError::MessageNotFound`](crate::StoreError::MessageNotFound) when there is no
    /// such message.
    fn replace_message(
        &self,
        to: Writer<'_>,
        seq: i64,
        message: &Message,
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// Supersedes the messages of `to`'s conversation from sequence number `keep` on (an
    /// answer to regenerate): they leave the conversation (what the model is sent) but
    /// stay on record, each call with the status it had
    /// ([`superseded_messages`](Self::superseded_messages)): a call that ran, or may have,
    /// is never forgotten. Their reviews are voided (kept for the record; a later call
    /// that reuses an id is asked about anew, never answered by an old decision). Fenced
    /// for a [`Writer::Lease`]. Returns how many messages were superseded.
    fn supersede_messages(
        &self,
        to: Writer<'_>,
        keep: i64,
    ) -> impl Future<Output = StoreResult<u64>> + Send;

    /// What regenerated answers replaced in a conversation, oldest first
    /// ([`supersede_messages`](Self::supersede_messages)).
    fn superseded_messages(
        &self,
        conversation_id: &str,
    ) -> impl Future<Output = StoreResult<Vec<crate::model::Superseded>>> + Send;

    /// Records a tool call's execution status (updated in place). Under a lease the
    /// lease check shares the write's transaction: a worker whose lease was taken over
    /// can never mark a call `executing` after the new owner looked at it.
    fn set_tool_status(
        &self,
        to: Writer<'_>,
        call_id: &str,
        status: ExecutionStatus,
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// Every recorded execution status of a conversation, by call id.
    fn tool_statuses(
        &self,
        id: &str,
    ) -> impl Future<Output = StoreResult<HashMap<String, ExecutionStatus>>> + Send;

    /// Recovery after a crash ([`crate::recovery`]), for an application that stores
    /// conversations without a chain (a chain applies the same rule itself on resume):
    /// in one transaction, appends a failed "outcome unknown" result
    /// ([`ToolResult::outcome_unknown`](llmchain::message::ToolResult::outcome_unknown))
    /// for each call of a non-idempotent tool that may have run without its result being
    /// stored ([`ToolCall::may_have_run`](llmchain::message::ToolCall::may_have_run), the
    /// chain's own rule), as one tool message, marks those calls `failed` and marks
    /// re-runnable calls of idempotent tools `identified`. Calling it again finds nothing
    /// more to do for those calls.
    fn recover(
        &self,
        id: &str,
        is_idempotent: &(dyn Fn(&str) -> bool + Sync),
    ) -> impl Future<Output = StoreResult<Recovery>> + Send;

    /// Queues a run of a conversation (status taken from `state`, normally `pending`)
    /// with its attempts, schedule and priority. Fails with
    /// [`StoreError::RunAlreadyOpen`](crate::StoreError::RunAlreadyOpen) when the
    /// conversation has an open run (enforced by a unique index), and with
    /// `ConversationNotFound` when there is no such conversation.
    fn enqueue_run(
        &self,
        conversation_id: &str,
        state: &RunState,
        options: &RunOptions,
    ) -> impl Future<Output = StoreResult<Run>> + Send;

    /// [`enqueue_run`](Self::enqueue_run) with the default [`RunOptions`].
    fn create_run(
        &self,
        conversation_id: &str,
        state: &RunState,
    ) -> impl Future<Output = StoreResult<Run>> + Send {
        async move {
            self.enqueue_run(conversation_id, state, &RunOptions::default())
                .await
        }
    }

    /// A run by id.
    fn get_run(&self, run_id: &str) -> impl Future<Output = StoreResult<Option<Run>>> + Send;

    /// The runs of a conversation, oldest first.
    fn list_runs(
        &self,
        conversation_id: &str,
    ) -> impl Future<Output = StoreResult<Vec<Run>>> + Send;

    /// The newest runs first, those `filter` selects.
    fn list_all_runs(
        &self,
        filter: &RunFilter,
    ) -> impl Future<Output = StoreResult<Vec<Run>>> + Send;

    /// How many runs there are of each status (one consistent read).
    fn run_counts(&self) -> impl Future<Output = StoreResult<HashMap<RunStatus, i64>>> + Send;

    /// How many queued runs there are of each status, among those naming one of
    /// `profiles` (all queued runs when `None`): what a worker serving those profiles
    /// could still be asked to run.
    fn queued_counts(
        &self,
        profiles: Option<&[String]>,
    ) -> impl Future<Output = StoreResult<HashMap<RunStatus, i64>>> + Send;

    /// Claims the first claimable queued run for `worker_id` for `lease`: the highest
    /// priority, then the earliest `run_at`, among `pending` queued runs whose `run_at`
    /// has come and whose profile is one of `profiles` (any, when `None`). Raises the
    /// run's epoch and attempt. Exactly one worker gets each claim. Runs whose lease
    /// expired are first put back to `pending` (or `discarded`, with their attempts used
    /// up; an interactive run is marked `failed`) by
    /// [`rescue_expired`](Self::rescue_expired), so a crashed worker's run is claimed
    /// again. Interactive runs are never claimed here.
    fn claim_run_of(
        &self,
        worker_id: &str,
        lease: Duration,
        profiles: Option<&[String]>,
    ) -> impl Future<Output = StoreResult<Option<Run>>> + Send;

    /// [`claim_run_of`](Self::claim_run_of) any profile.
    fn claim_run(
        &self,
        worker_id: &str,
        lease: Duration,
    ) -> impl Future<Output = StoreResult<Option<Run>>> + Send {
        self.claim_run_of(worker_id, lease, None)
    }

    /// Waits until a run may have become claimable, or `timeout` passed: on PostgreSQL a
    /// `LISTEN` on `llmchain_runs` wakes it as soon as a run becomes pending; elsewhere
    /// it just sleeps (polling). Workers call it when the queue is empty.
    fn wait_for_runs(&self, timeout: Duration) -> impl Future<Output = ()> + Send {
        tokio::time::sleep(timeout)
    }

    /// Puts `running` runs whose lease expired back to `pending` (now), or `discarded`
    /// when their attempts are used up; returns how many. Cheap when there are none.
    fn rescue_expired(&self) -> impl Future<Output = StoreResult<u64>> + Send;

    /// Ends now every lease `worker_id` holds, so that their runs can be claimed at once:
    /// for a process restarted under a stable name (a chat server) that knows its
    /// predecessor under that name is dead, whose leases would otherwise block its own
    /// chats until they ran out. Their writes stay fenced: a write under an ended lease
    /// fails with `LeaseLost`. Returns how many leases ended.
    fn release_leases(&self, worker_id: &str) -> impl Future<Output = StoreResult<u64>> + Send;

    /// Takes the lease on a conversation's run for an interactive process (the CLI's
    /// `run` and `resume`): claims its open interactive run if it is pending, paused or
    /// its lease expired, or creates a running [`RunKind::Interactive`](crate::RunKind)
    /// one with `state`. Fails with
    /// [`StoreError::RunBusy`](crate::StoreError::RunBusy) while another process holds a
    /// live lease, so two processes never both run a conversation, and with
    /// [`StoreError::QueuedRunOpen`](crate::StoreError::QueuedRunOpen) while a queued run
    /// of the conversation is open (a worker's to run).
    fn claim_conversation(
        &self,
        conversation_id: &str,
        worker_id: &str,
        lease: Duration,
        state: &RunState,
    ) -> impl Future<Output = StoreResult<Run>> + Send;

    /// [`claim_conversation`](Store::claim_conversation) and
    /// [`get_conversation`](Store::get_conversation) in one transaction, creating the
    /// conversation from `create` first (under the id `conversation_id`) when there is
    /// none: what a chat server does at each request, in one round trip rather than
    /// three. The conversation is read under the new lease, so it is what the run goes
    /// on from. With `opening`, the messages it decides from the conversation as read
    /// (a chat's new user message) are appended in the same transaction, and the
    /// conversation returned holds them. Fails as `claim_conversation` does, with
    /// `ConversationNotFound` when there is no conversation and `create` is `None`, and
    /// with `opening`'s error, which undoes the whole (nothing created or claimed).
    fn claim_and_read(
        &self,
        conversation_id: &str,
        create: Option<NewConversation>,
        worker_id: &str,
        lease: Duration,
        state: &RunState,
        opening: Option<Opening>,
    ) -> impl Future<Output = StoreResult<(Run, StoredConversation)>> + Send;

    /// Writes `changes` in order, in one transaction under `lease` (checked once, as
    /// every leased write is): what a running chain's sink writes together, such as a
    /// tool message with its calls' final statuses. Answers the number of the first
    /// message the first [`Change::Append`](crate::Change::Append) appended, or 0 when
    /// none appends (an empty `Append` writes nothing). `LeaseLost`, `RunCancelled` or
    /// `RunNotFound` change nothing.
    fn write_leased(
        &self,
        lease: &Lease,
        changes: &[Change<'_>],
    ) -> impl Future<Output = StoreResult<i64>> + Send;

    /// Extends the lease (the heartbeat). `LeaseLost` if it is no longer held,
    /// `RunCancelled` if the run was cancelled meanwhile.
    fn renew_lease(
        &self,
        lease: &Lease,
        duration: Duration,
    ) -> impl Future<Output = StoreResult<Run>> + Send;

    /// Saves the run's state under the lease (the status stays `running`, or becomes
    /// `paused` when `state` says so and the lease is kept until [`complete_run`]).
    ///
    /// [`complete_run`]: Self::complete_run
    fn update_run(
        &self,
        lease: &Lease,
        state: &RunState,
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// Ends the lease: saves `state` with its status (`done`, `failed`, `paused` or
    /// `pending`) and clears the lease. Fenced.
    fn complete_run(
        &self,
        lease: &Lease,
        state: &RunState,
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// Pauses the run for people: saves `state` (status `paused`), ends the lease and
    /// opens one [`Review`] per call in `reviews`, all in one fenced transaction. A call
    /// whose review already exists keeps it (a run paused again after a crash); one
    /// whose review was cancelled gets it reopened. When none of the run's reviews is
    /// pending after that (every one was already decided), a queued run goes straight
    /// back to `pending`. Returns the run's new status.
    fn pause_run(
        &self,
        lease: &Lease,
        state: &RunState,
        reviews: &[NewReview],
    ) -> impl Future<Output = StoreResult<RunStatus>> + Send;

    /// The reviews `filter` selects, oldest first.
    fn list_reviews(
        &self,
        filter: &ReviewFilter,
    ) -> impl Future<Output = StoreResult<Vec<Review>>> + Send;

    /// A review by id.
    fn get_review(&self, id: &str) -> impl Future<Output = StoreResult<Option<Review>>> + Send;

    /// Decides a pending review, recording who decided (`decided_by`) and when. Refused
    /// with [`StoreError::ReviewNotPending`](crate::StoreError::ReviewNotPending) when it
    /// is not pending (decided already, or its run cancelled). When it was the last
    /// pending review of a paused queued run, the run goes back to `pending` in the same
    /// transaction (a worker resumes it with the stored decisions); an interactive run
    /// stays `paused` for its process (`llmchain conversations resume`).
    fn decide_review(
        &self,
        id: &str,
        decision: &HumanDecision,
        decided_by: &str,
    ) -> impl Future<Output = StoreResult<Decided>> + Send;

    /// Ends the lease after a failed attempt: with attempts left and `retryable`, the
    /// run goes back to `pending` after [`backoff`](crate::backoff); otherwise it is
    /// `discarded`. `error` is kept in `last_error`. Returns the new status. Fenced.
    fn fail_run(
        &self,
        lease: &Lease,
        error: &str,
        retryable: bool,
    ) -> impl Future<Output = StoreResult<RunStatus>> + Send;

    /// Resumes a paused run: status back to `pending`, with `state` saved.
    fn resume_run(
        &self,
        run_id: &str,
        state: &RunState,
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// Cancels an open run. A pending or paused run is never claimed again; a running
    /// one's worker gets `RunCancelled` at its next heartbeat or write; its pending
    /// reviews are cancelled (no one can decide them any more). Returns the run.
    fn cancel_run(&self, run_id: &str) -> impl Future<Output = StoreResult<Run>> + Send;

    /// Queues a finished (`failed`, `discarded` or `cancelled`) run again, with fresh
    /// attempts. `RunAlreadyOpen` when its conversation has another open run meanwhile.
    fn retry_run(&self, run_id: &str) -> impl Future<Output = StoreResult<Run>> + Send;

    /// Deletes a conversation with its messages, statuses and runs; `false` when there
    /// was none.
    fn delete_conversation(&self, id: &str) -> impl Future<Output = StoreResult<bool>> + Send;

    /// Deletes finished runs last changed before `before_ms` (milliseconds since the
    /// Unix epoch); returns how many.
    fn prune_runs(&self, before_ms: i64) -> impl Future<Output = StoreResult<u64>> + Send;
}

/// The JSON path of a metadata key (`$.key`), refused unless the key is 1-64 letters,
/// digits or `_` (so it needs no quoting in either backend).
pub(crate) fn metadata_path(key: &str) -> StoreResult<String> {
    let plain = !key.is_empty()
        && key.len() <= 64
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !plain {
        return Err(StoreError::Corrupt {
            conversation: String::new(),
            location: format!("metadata key {key:?}"),
            message: "a metadata key to list by is 1-64 letters, digits or '_'".into(),
        });
    }
    Ok(format!("$.{key}"))
}

/// `LIKE` patterns (escape character `\`) matching `text` anywhere: as itself (a
/// title, or JSON text such as a call's arguments stored as an object), and as a JSON
/// string holds it (a message's text).
pub(crate) fn like_patterns(text: &str) -> (String, String) {
    fn escape(s: &str) -> String {
        let mut out = String::with_capacity(s.len() + 2);
        out.push('%');
        for c in s.chars() {
            if matches!(c, '%' | '_' | '\\') {
                out.push('\\');
            }
            out.push(c);
        }
        out.push('%');
        out
    }
    let json = serde_json::to_string(text).unwrap_or_default();
    let inner = json
        .strip_prefix('"')
        .and_then(|j| j.strip_suffix('"'))
        .unwrap_or(text);
    (escape(text), escape(inner))
}

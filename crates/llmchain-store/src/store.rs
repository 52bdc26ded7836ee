//! The [`Store`] trait: what every backend provides.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use llmchain::conversation::Conversation;
use llmchain::message::{ExecutionStatus, Message};

use crate::error::StoreResult;
use crate::model::{ConversationSummary, NewConversation, Run, RunState, StoredConversation};
use crate::recovery::Recovery;

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

    /// Appends one message; returns its sequence number. O(1): nothing is rewritten.
    fn append_message(
        &self,
        id: &str,
        message: &Message,
    ) -> impl Future<Output = StoreResult<i64>> + Send;

    /// Appends several messages in one transaction; returns the first sequence number.
    fn append_messages(
        &self,
        id: &str,
        messages: &[Message],
    ) -> impl Future<Output = StoreResult<i64>> + Send;

    /// Replaces the message at sequence number `seq` (the one exception to append-only:
    /// a tool message whose content a message expansion trimmed). Fails with
    /// [`StoreError::MessageNotFound`](crate::StoreError::MessageNotFound) when there is no
    /// such message.
    fn replace_message(
        &self,
        id: &str,
        seq: i64,
        message: &Message,
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// Records a tool call's execution status (updated in place).
    fn set_tool_status(
        &self,
        id: &str,
        call_id: &str,
        status: ExecutionStatus,
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// Every recorded execution status of a conversation, by call id.
    fn tool_statuses(
        &self,
        id: &str,
    ) -> impl Future<Output = StoreResult<HashMap<String, ExecutionStatus>>> + Send;

    /// Recovery after a crash ([`crate::recovery`]): in one transaction, appends a failed
    /// "outcome unknown" result for each call of a non-idempotent tool that may have run
    /// without its result being stored (as one tool message), marks those calls `failed`
    /// and marks re-runnable calls of idempotent tools `identified`. Calling it again finds
    /// nothing more to do for those calls.
    fn recover(
        &self,
        id: &str,
        is_idempotent: &(dyn Fn(&str) -> bool + Sync),
    ) -> impl Future<Output = StoreResult<Recovery>> + Send;

    /// Creates a run of a conversation (status taken from `state`, normally `pending`).
    fn create_run(
        &self,
        conversation_id: &str,
        state: &RunState,
    ) -> impl Future<Output = StoreResult<Run>> + Send;

    /// A run by id.
    fn get_run(&self, run_id: &str) -> impl Future<Output = StoreResult<Option<Run>>> + Send;

    /// The runs of a conversation, oldest first.
    fn list_runs(
        &self,
        conversation_id: &str,
    ) -> impl Future<Output = StoreResult<Vec<Run>>> + Send;

    /// Claims the oldest claimable run — `pending`, or `running` with an expired lease —
    /// for `worker_id` for `lease`; marks it `running`. Exactly one worker gets each claim.
    fn claim_run(
        &self,
        worker_id: &str,
        lease: Duration,
    ) -> impl Future<Output = StoreResult<Option<Run>>> + Send;

    /// Extends the lease; [`StoreError::LeaseLost`](crate::StoreError::LeaseLost) if the
    /// worker no longer holds it (expired or claimed by another).
    fn renew_lease(
        &self,
        run_id: &str,
        worker_id: &str,
        lease: Duration,
    ) -> impl Future<Output = StoreResult<Run>> + Send;

    /// Saves the run's state while the worker holds the lease (the status stays `running`).
    fn update_run(
        &self,
        run_id: &str,
        worker_id: &str,
        state: &RunState,
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// Ends the worker's hold on the run: saves `state` with its status (`done`, `failed`,
    /// `paused` or `pending`) and clears the lease. Fails with `LeaseLost` if the lease
    /// is not held.
    fn complete_run(
        &self,
        run_id: &str,
        worker_id: &str,
        state: &RunState,
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// [`set_tool_status`](Self::set_tool_status) fenced by the run's lease: written only if
    /// `worker_id` still holds a live lease on `run_id`, atomically with that check — so a
    /// worker whose lease was taken over can never mark a call `executing` after the new
    /// owner's recovery looked at it.
    fn set_tool_status_leased(
        &self,
        run_id: &str,
        worker_id: &str,
        call_id: &str,
        status: ExecutionStatus,
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// Resumes a paused run: status back to `pending`, with `state` saved.
    fn resume_run(
        &self,
        run_id: &str,
        state: &RunState,
    ) -> impl Future<Output = StoreResult<()>> + Send;
}

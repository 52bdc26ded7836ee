//! [`AnyStore`]: a backend chosen at run time from a URL.

use std::collections::HashMap;
use std::time::Duration;

use llmchain::conversation::Conversation;
use llmchain::message::{ExecutionStatus, Message};

use crate::error::{StoreError, StoreResult};
use crate::model::{
    Change, ConversationSummary, Lease, NewConversation, Opening, Run, RunFilter, RunOptions,
    RunState, RunStatus, StoredConversation, Writer,
};
use crate::postgres::PostgresStore;
use crate::recovery::Recovery;
use crate::review::{Decided, NewReview, Review, ReviewFilter};
use crate::sqlite::{Durability, SqliteStore};
use crate::store::Store;
use llmchain::chain::HumanDecision;

/// Either backend, chosen by [`AnyStore::open`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum AnyStore {
    /// SQLite.
    Sqlite(SqliteStore),
    /// PostgreSQL.
    Postgres(PostgresStore),
}

impl AnyStore {
    /// Opens a store from a URL:
    /// - `sqlite://PATH` or `sqlite:PATH` (a file, created if missing; `sqlite:///abs/path`
    ///   and `sqlite://relative/path` both work), optionally with `?synchronous=full` (the
    ///   default) or `?synchronous=normal` ([`Durability`]);
    /// - `sqlite::memory:` (a private in-memory database);
    /// - `postgres://…` or `postgresql://…`.
    pub async fn open(url: &str) -> StoreResult<AnyStore> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(AnyStore::Postgres(PostgresStore::connect(url).await?));
        }
        if url == "sqlite::memory:" || url == "sqlite://:memory:" {
            return Ok(AnyStore::Sqlite(SqliteStore::in_memory().await?));
        }
        let (path, durability) = sqlite_path(url)?;
        Ok(AnyStore::Sqlite(
            SqliteStore::open_with(path, durability).await?,
        ))
    }

    /// The default SQLite file ([`default_sqlite_path`](crate::default_sqlite_path)).
    pub async fn open_default() -> StoreResult<AnyStore> {
        Ok(AnyStore::Sqlite(SqliteStore::open_default().await?))
    }
}

/// The file and durability of a `sqlite:` URL.
fn sqlite_path(url: &str) -> StoreResult<(&str, Durability)> {
    let bad = || StoreError::BadUrl(url.into());
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .ok_or_else(bad)?;
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let mut durability = Durability::default();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        durability = match pair.to_ascii_lowercase().as_str() {
            "synchronous=full" => Durability::Full,
            "synchronous=normal" => Durability::Normal,
            _ => return Err(bad()),
        };
    }
    if path.is_empty() {
        return Err(bad());
    }
    Ok((path, durability))
}

macro_rules! delegate {
    ($self:ident, $s:ident => $e:expr) => {
        match $self {
            AnyStore::Sqlite($s) => $e.await,
            AnyStore::Postgres($s) => $e.await,
        }
    };
}

impl Store for AnyStore {
    async fn create_conversation(&self, new: NewConversation) -> StoreResult<String> {
        delegate!(self, s => s.create_conversation(new))
    }
    async fn update_header(&self, id: &str, header: &Conversation) -> StoreResult<()> {
        delegate!(self, s => s.update_header(id, header))
    }
    async fn get_conversation(&self, id: &str) -> StoreResult<Option<StoredConversation>> {
        delegate!(self, s => s.get_conversation(id))
    }
    async fn list_conversations(&self, limit: i64) -> StoreResult<Vec<ConversationSummary>> {
        delegate!(self, s => s.list_conversations(limit))
    }
    async fn search_conversations(
        &self,
        text: &str,
        limit: i64,
    ) -> StoreResult<Vec<ConversationSummary>> {
        delegate!(self, s => s.search_conversations(text, limit))
    }
    async fn append_message(&self, id: &str, message: &Message) -> StoreResult<i64> {
        delegate!(self, s => s.append_message(id, message))
    }
    async fn append_messages(&self, to: Writer<'_>, messages: &[Message]) -> StoreResult<i64> {
        delegate!(self, s => s.append_messages(to, messages))
    }
    async fn replace_message(
        &self,
        to: Writer<'_>,
        seq: i64,
        message: &Message,
    ) -> StoreResult<()> {
        delegate!(self, s => s.replace_message(to, seq, message))
    }
    async fn list_conversations_tagged(
        &self,
        key: &str,
        value: &str,
        limit: i64,
    ) -> StoreResult<Vec<ConversationSummary>> {
        delegate!(self, s => s.list_conversations_tagged(key, value, limit))
    }
    async fn release_leases(&self, worker_id: &str) -> StoreResult<u64> {
        delegate!(self, s => s.release_leases(worker_id))
    }
    async fn supersede_messages(&self, to: Writer<'_>, keep: i64) -> StoreResult<u64> {
        delegate!(self, s => s.supersede_messages(to, keep))
    }
    async fn superseded_messages(&self, id: &str) -> StoreResult<Vec<crate::model::Superseded>> {
        delegate!(self, s => s.superseded_messages(id))
    }
    async fn set_tool_status(
        &self,
        to: Writer<'_>,
        call_id: &str,
        status: ExecutionStatus,
    ) -> StoreResult<()> {
        delegate!(self, s => s.set_tool_status(to, call_id, status))
    }
    async fn tool_statuses(&self, id: &str) -> StoreResult<HashMap<String, ExecutionStatus>> {
        delegate!(self, s => s.tool_statuses(id))
    }
    async fn recover(
        &self,
        id: &str,
        is_idempotent: &(dyn Fn(&str) -> bool + Sync),
    ) -> StoreResult<Recovery> {
        delegate!(self, s => s.recover(id, is_idempotent))
    }
    async fn enqueue_run(
        &self,
        conversation_id: &str,
        state: &RunState,
        options: &RunOptions,
    ) -> StoreResult<Run> {
        delegate!(self, s => s.enqueue_run(conversation_id, state, options))
    }
    async fn get_run(&self, run_id: &str) -> StoreResult<Option<Run>> {
        delegate!(self, s => s.get_run(run_id))
    }
    async fn list_runs(&self, conversation_id: &str) -> StoreResult<Vec<Run>> {
        delegate!(self, s => s.list_runs(conversation_id))
    }
    async fn list_all_runs(&self, filter: &RunFilter) -> StoreResult<Vec<Run>> {
        delegate!(self, s => s.list_all_runs(filter))
    }
    async fn queued_counts(
        &self,
        profiles: Option<&[String]>,
    ) -> StoreResult<HashMap<RunStatus, i64>> {
        delegate!(self, s => s.queued_counts(profiles))
    }
    async fn pause_run(
        &self,
        lease: &Lease,
        state: &RunState,
        reviews: &[NewReview],
    ) -> StoreResult<RunStatus> {
        delegate!(self, s => s.pause_run(lease, state, reviews))
    }
    async fn list_reviews(&self, filter: &ReviewFilter) -> StoreResult<Vec<Review>> {
        delegate!(self, s => s.list_reviews(filter))
    }
    async fn get_review(&self, id: &str) -> StoreResult<Option<Review>> {
        delegate!(self, s => s.get_review(id))
    }
    async fn decide_review(
        &self,
        id: &str,
        decision: &HumanDecision,
        decided_by: &str,
    ) -> StoreResult<Decided> {
        delegate!(self, s => s.decide_review(id, decision, decided_by))
    }
    async fn run_counts(&self) -> StoreResult<HashMap<RunStatus, i64>> {
        delegate!(self, s => s.run_counts())
    }
    async fn claim_run_of(
        &self,
        worker_id: &str,
        lease: Duration,
        profiles: Option<&[String]>,
    ) -> StoreResult<Option<Run>> {
        delegate!(self, s => s.claim_run_of(worker_id, lease, profiles))
    }
    async fn wait_for_runs(&self, timeout: Duration) {
        match self {
            AnyStore::Sqlite(s) => s.wait_for_runs(timeout).await,
            AnyStore::Postgres(s) => s.wait_for_runs(timeout).await,
        }
    }
    async fn rescue_expired(&self) -> StoreResult<u64> {
        delegate!(self, s => s.rescue_expired())
    }
    async fn write_leased(&self, lease: &Lease, changes: &[Change<'_>]) -> StoreResult<i64> {
        delegate!(self, s => s.write_leased(lease, changes))
    }

    async fn claim_and_read(
        &self,
        conversation_id: &str,
        create: Option<NewConversation>,
        worker_id: &str,
        lease: Duration,
        state: &RunState,
        opening: Option<Opening>,
    ) -> StoreResult<(Run, StoredConversation)> {
        delegate!(self, s => s.claim_and_read(conversation_id, create, worker_id, lease, state, opening))
    }

    async fn claim_conversation(
        &self,
        conversation_id: &str,
        worker_id: &str,
        lease: Duration,
        state: &RunState,
    ) -> StoreResult<Run> {
        delegate!(self, s => s.claim_conversation(conversation_id, worker_id, lease, state))
    }
    async fn renew_lease(&self, lease: &Lease, duration: Duration) -> StoreResult<Run> {
        delegate!(self, s => s.renew_lease(lease, duration))
    }
    async fn update_run(&self, lease: &Lease, state: &RunState) -> StoreResult<()> {
        delegate!(self, s => s.update_run(lease, state))
    }
    async fn complete_run(&self, lease: &Lease, state: &RunState) -> StoreResult<()> {
        delegate!(self, s => s.complete_run(lease, state))
    }
    async fn fail_run(
        &self,
        lease: &Lease,
        error: &str,
        retryable: bool,
    ) -> StoreResult<RunStatus> {
        delegate!(self, s => s.fail_run(lease, error, retryable))
    }
    async fn resume_run(&self, run_id: &str, state: &RunState) -> StoreResult<()> {
        delegate!(self, s => s.resume_run(run_id, state))
    }
    async fn cancel_run(&self, run_id: &str) -> StoreResult<Run> {
        delegate!(self, s => s.cancel_run(run_id))
    }
    async fn retry_run(&self, run_id: &str) -> StoreResult<Run> {
        delegate!(self, s => s.retry_run(run_id))
    }
    async fn delete_conversation(&self, id: &str) -> StoreResult<bool> {
        delegate!(self, s => s.delete_conversation(id))
    }
    async fn prune_runs(&self, before_ms: i64) -> StoreResult<u64> {
        delegate!(self, s => s.prune_runs(before_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_urls_carry_the_durability() {
        let full = Durability::Full;
        let normal = Durability::Normal;
        assert_eq!(
            sqlite_path("sqlite:///tmp/a.db").unwrap(),
            ("/tmp/a.db", full)
        );
        assert_eq!(sqlite_path("sqlite:a.db").unwrap(), ("a.db", full));
        assert_eq!(
            sqlite_path("sqlite://a.db?synchronous=NORMAL").unwrap(),
            ("a.db", normal)
        );
        assert_eq!(
            sqlite_path("sqlite://a.db?synchronous=full").unwrap(),
            ("a.db", full)
        );
        for bad in [
            "sqlite://",
            "sqlite://?synchronous=normal",
            "sqlite://a.db?sync=off",
            "mysql://x",
        ] {
            assert!(
                matches!(sqlite_path(bad), Err(StoreError::BadUrl(_))),
                "{bad}"
            );
        }
    }
}

//! What the two SQL backends share, written once.
//!
//! [`Dialect`] is implemented by `sqlx::Postgres` and `sqlx::Sqlite`. Its required methods
//! are the few places where they differ: how a write transaction begins (SQLite's
//! `BEGIN IMMEDIATE` takes the one writer's lock; PostgreSQL locks rows with
//! `FOR UPDATE`), whose clock a lease is compared with (the database's on PostgreSQL, so
//! workers' clocks need not agree), and how messages and statuses are appended (one
//! statement with `unnest` on PostgreSQL, the group committer's statements on SQLite).
//! Its provided methods are the behaviour both stores run on top of them: recovering a
//! conversation, replacing and superseding messages, renewing, failing, pausing and
//! completing a leased run, deciding a review, cancelling, retrying, resuming, deleting
//! and pruning. The SQL is one text for both (sqlx takes `$N` placeholders on both, and
//! so does SQLite itself): the statements that save a run's state with its decision
//! journal ([`RUN_STATE`]) and end it ([`COMPLETE_RUN`]) are run by PostgreSQL's leased
//! writes and by SQLite's group committer alike.
//!
//! What stays in each backend is what really differs: claiming (`SKIP LOCKED` and the
//! database clock against SQLite's single writer, whose claim-and-read runs on the
//! writer's own handle in one transaction), rescuing expired leases, queue counts by
//! profile (`ANY` against `json_each`), and SQLite's group commit.

use std::future::Future;
use std::time::Duration;

use llmchain::chain::HumanDecision;
use llmchain::conversation::Conversation;
use llmchain::message::{ExecutionStatus, Message};
use sqlx::{
    ColumnIndex, Database, Decode, Encode, Executor, FromRow, IntoArguments, Pool, Transaction,
    Type,
};

use crate::assemble;
use crate::error::{StoreError, StoreResult, message_body, ser};
use crate::inbox;
use crate::lease;
use crate::model::{
    ConversationSummary, Lease, Run, RunKind, RunState, RunStatus, Writer, duration_ms, now_ms,
};
use crate::read;
use crate::recovery::{self, Recovery};
use crate::review::{Decided, NewReview, ReviewRow};
use crate::truncate;

/// Saves a leased run's state (its chain's state, the decision journal with it), under
/// the lease checked in the same transaction. Parameters: state JSON, time stamp, run.
/// One text for both backends: PostgreSQL's writes and SQLite's group committer run it.
pub(crate) const RUN_STATE: &str = "UPDATE runs SET state = $1, updated_at = $2 WHERE id = $3";

/// Ends a leased run and releases its lease: its last state and status, and the time it
/// may be claimed again (a run that yielded). Parameters: status, state JSON, time stamp,
/// run. One text for both backends, as [`RUN_STATE`].
pub(crate) const COMPLETE_RUN: &str = "UPDATE runs SET status = $1, state = $2, \
     lease_owner = NULL, lease_expires_at = NULL, updated_at = $3, run_at = $3 WHERE id = $4";

/// A SQL backend: its differences (required methods) and the behaviour written once on
/// top of them (provided methods). See the module docs.
pub(crate) trait Dialect: Database + Sized
where
    for<'c> &'c mut Self::Connection: Executor<'c, Database = Self>,
    Self::Arguments: IntoArguments<Self>,
    for<'q> &'q str: Encode<'q, Self> + Type<Self>,
    for<'q> String: Encode<'q, Self> + Type<Self>,
    for<'q> Option<String>: Encode<'q, Self> + Type<Self>,
    for<'q> i64: Encode<'q, Self> + Type<Self>,
    for<'r> (i64,): FromRow<'r, Self::Row>,
    for<'r> (String,): FromRow<'r, Self::Row>,
    for<'r> (String, String): FromRow<'r, Self::Row>,
    for<'r> (i64, String): FromRow<'r, Self::Row>,
    for<'r> (i32, i32, String): FromRow<'r, Self::Row>,
    for<'r> assemble::RunRow: FromRow<'r, Self::Row>,
    for<'r> ReviewRow: FromRow<'r, Self::Row>,
    for<'a> &'a str: ColumnIndex<Self::Row>,
    for<'r> String: Decode<'r, Self> + Type<Self>,
    for<'r> Option<String>: Decode<'r, Self> + Type<Self>,
    for<'r> i64: Decode<'r, Self> + Type<Self>,
{
    /// Begins a transaction that will write.
    fn begin_write(
        pool: &Pool<Self>,
    ) -> impl Future<Output = StoreResult<Transaction<'static, Self>>> + Send;

    /// Serialises the rest of the transaction with appends to conversation `id`.
    fn lock_conversation(
        conn: &mut Self::Connection,
        id: &str,
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// Serialises the rest of the transaction with claims, rescues and cancellations of
    /// run `run_id`; answers the clock runs are scheduled by (ms since the Unix epoch).
    fn lock_run(
        conn: &mut Self::Connection,
        run_id: &str,
    ) -> impl Future<Output = StoreResult<i64>> + Send;

    /// Serialises deciding review `id` with every other decision about its run's reviews
    /// (so the last one sees none pending and requeues the run); answers the clock.
    fn lock_for_decision(
        conn: &mut Self::Connection,
        id: &str,
    ) -> impl Future<Output = StoreResult<i64>> + Send;

    /// Checks, inside a write transaction, that `lease` is its run's live lease, and
    /// keeps the run unchanged by anyone else until the transaction ends; answers the
    /// run's conversation and the clock the lease was compared with (ms since the Unix
    /// epoch).
    fn check_lease(
        conn: &mut Self::Connection,
        lease: &Lease,
    ) -> impl Future<Output = StoreResult<(String, i64)>> + Send;

    /// Appends `messages` (not empty) to conversation `id` inside the caller's
    /// transaction; answers the first one's sequence number.
    fn append_in(
        conn: &mut Self::Connection,
        id: &str,
        messages: &[Message],
    ) -> impl Future<Output = StoreResult<i64>> + Send;

    /// Records a call's execution status inside the caller's transaction.
    fn set_status_in(
        conn: &mut Self::Connection,
        id: &str,
        call_id: &str,
        status: ExecutionStatus,
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// How many rows a statement changed.
    fn affected(result: &Self::QueryResult) -> u64;

    /// [`Store::update_header`](crate::Store::update_header).
    fn update_header(
        pool: &Pool<Self>,
        id: &str,
        header: &Conversation,
    ) -> impl Future<Output = StoreResult<()>> + Send {
        async move {
            let header = assemble::header_json(header)?;
            let mut conn = pool.acquire().await?;
            let done =
                sqlx::query("UPDATE conversations SET header = $1, updated_at = $2 WHERE id = $3")
                    .bind(header)
                    .bind(now_ms())
                    .bind(id)
                    .execute(&mut *conn)
                    .await?;
            if Self::affected(&done) == 0 {
                return Err(StoreError::ConversationNotFound(id.into()));
            }
            Ok(())
        }
    }

    /// [`Store::list_conversations`](crate::Store::list_conversations).
    fn list_conversations(
        pool: &Pool<Self>,
        limit: i64,
    ) -> impl Future<Output = StoreResult<Vec<ConversationSummary>>> + Send {
        async move {
            let mut conn = pool.acquire().await?;
            let rows = sqlx::query(
                "SELECT id, title, metadata, next_seq, created_at, updated_at FROM conversations \
                 ORDER BY updated_at DESC, id LIMIT $1",
            )
            .bind(limit)
            .fetch_all(&mut *conn)
            .await?;
            read::summaries(&rows)
        }
    }

    /// [`Store::recover`](crate::Store::recover).
    fn recover(
        pool: &Pool<Self>,
        id: &str,
        is_idempotent: &(dyn Fn(&str) -> bool + Sync),
    ) -> impl Future<Output = StoreResult<Recovery>> + Send {
        async move {
            let mut tx = Self::begin_write(pool).await?;
            Self::lock_conversation(&mut tx, id).await?;
            let stored = read::conversation::<Self>(&mut tx, id)
                .await?
                .ok_or_else(|| StoreError::ConversationNotFound(id.into()))?;
            let plan = recovery::plan(&stored.conversation, is_idempotent);
            let (message, statuses) = plan.writes();
            if let Some(message) = message {
                Self::append_in(&mut tx, id, &[message]).await?;
            }
            for (call_id, status) in statuses {
                Self::set_status_in(&mut tx, id, call_id, status).await?;
            }
            tx.commit().await?;
            Ok(plan)
        }
    }

    /// [`Store::replace_message`](crate::Store::replace_message).
    fn replace_message(
        pool: &Pool<Self>,
        to: Writer<'_>,
        seq: i64,
        message: &Message,
    ) -> impl Future<Output = StoreResult<()>> + Send {
        async move {
            let body = message_body(message)?;
            let mut tx = Self::begin_write(pool).await?;
            let conversation = match to {
                Writer::Conversation(id) => id.to_owned(),
                Writer::Lease(lease) => Self::check_lease(&mut tx, lease).await?.0,
            };
            let done = sqlx::query(
                "UPDATE messages SET body = $1 WHERE conversation_id = $2 AND seq = $3",
            )
            .bind(body)
            .bind(conversation.as_str())
            .bind(seq)
            .execute(&mut *tx)
            .await?;
            if Self::affected(&done) == 0 {
                return Err(StoreError::MessageNotFound { conversation, seq });
            }
            Ok(tx.commit().await?)
        }
    }

    /// [`Store::supersede_messages`](crate::Store::supersede_messages).
    fn supersede_messages(
        pool: &Pool<Self>,
        to: Writer<'_>,
        keep: i64,
    ) -> impl Future<Output = StoreResult<u64>> + Send {
        async move {
            let mut tx = Self::begin_write(pool).await?;
            let conversation = match to {
                Writer::Conversation(id) => {
                    Self::lock_conversation(&mut tx, id).await?;
                    id.to_owned()
                }
                Writer::Lease(lease) => Self::check_lease(&mut tx, lease).await?.0,
            };
            let removed =
                truncate::messages_from::<Self>(&mut tx, &conversation, keep, now_ms()).await?;
            tx.commit().await?;
            Ok(removed)
        }
    }

    /// [`Store::renew_lease`](crate::Store::renew_lease).
    fn renew_lease(
        pool: &Pool<Self>,
        lease: &Lease,
        duration: Duration,
    ) -> impl Future<Output = StoreResult<Run>> + Send {
        async move {
            let mut tx = Self::begin_write(pool).await?;
            let (_, now) = Self::check_lease(&mut tx, lease).await?;
            let row: assemble::RunRow = sqlx::query_as(concat!(
                "UPDATE runs SET lease_expires_at = $1, updated_at = $2 WHERE id = $3 RETURNING ",
                run_columns!()
            ))
            .bind(now.saturating_add(duration_ms(duration)))
            .bind(now)
            .bind(lease.run_id.as_str())
            .fetch_one(&mut *tx)
            .await?;
            tx.commit().await?;
            assemble::run(row)
        }
    }

    /// [`Store::pause_run`](crate::Store::pause_run).
    fn pause_run(
        pool: &Pool<Self>,
        lease: &Lease,
        state: &RunState,
        reviews: &[NewReview],
    ) -> impl Future<Output = StoreResult<RunStatus>> + Send {
        async move {
            let mut tx = Self::begin_write(pool).await?;
            // Holds the run first, as deciding a review does: pausing and deciding are
            // serialised per run.
            let (conversation, now) = Self::check_lease(&mut tx, lease).await?;
            let status =
                inbox::pause::<Self>(&mut tx, &conversation, &lease.run_id, state, reviews, now)
                    .await?;
            tx.commit().await?;
            tracing::debug!(run = %lease.run_id, status = status.as_str(), "paused run for review");
            Ok(status)
        }
    }

    /// [`Store::decide_review`](crate::Store::decide_review).
    fn decide_review(
        pool: &Pool<Self>,
        id: &str,
        decision: &HumanDecision,
        decided_by: &str,
    ) -> impl Future<Output = StoreResult<Decided>> + Send {
        async move {
            let mut tx = Self::begin_write(pool).await?;
            let now = Self::lock_for_decision(&mut tx, id).await?;
            let decided = inbox::decide::<Self>(&mut tx, id, decision, decided_by, now).await?;
            tx.commit().await?;
            Ok(decided)
        }
    }

    /// [`Store::fail_run`](crate::Store::fail_run).
    fn fail_run(
        pool: &Pool<Self>,
        lease: &Lease,
        error: &str,
        retryable: bool,
    ) -> impl Future<Output = StoreResult<RunStatus>> + Send {
        async move {
            let mut tx = Self::begin_write(pool).await?;
            let (_, now) = Self::check_lease(&mut tx, lease).await?;
            let (attempt, max, kind): (i32, i32, String) =
                sqlx::query_as("SELECT attempt, max_attempts, kind FROM runs WHERE id = $1")
                    .bind(lease.run_id.as_str())
                    .fetch_one(&mut *tx)
                    .await?;
            let kind = RunKind::parse(&kind).unwrap_or(RunKind::Queued);
            let (status, run_at) = lease::after_failure(kind, attempt, max, retryable, now);
            sqlx::query(
                "UPDATE runs SET status = $1, run_at = $2, last_error = $3, lease_owner = NULL, \
                 lease_expires_at = NULL, updated_at = $4 WHERE id = $5",
            )
            .bind(status.as_str())
            .bind(run_at)
            .bind(error)
            .bind(now)
            .bind(lease.run_id.as_str())
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            // The error's text may quote a model's answer: the event with it (content
            // gated) is the caller's (`LeasedRun`), which knows the error's type.
            tracing::debug!(run = %lease.run_id, attempt, status = status.as_str(), "failed attempt recorded");
            Ok(status)
        }
    }

    /// [`Store::resume_run`](crate::Store::resume_run).
    fn resume_run(
        pool: &Pool<Self>,
        run_id: &str,
        state: &RunState,
    ) -> impl Future<Output = StoreResult<()>> + Send {
        async move {
            let state = ser("run state", state)?;
            let mut tx = Self::begin_write(pool).await?;
            let now = Self::lock_run(&mut tx, run_id).await?;
            let done = sqlx::query(
                "UPDATE runs SET status = 'pending', state = $1, lease_owner = NULL, \
                 lease_expires_at = NULL, updated_at = $2, run_at = $2 \
                 WHERE id = $3 AND status = 'paused'",
            )
            .bind(state)
            .bind(now)
            .bind(run_id)
            .execute(&mut *tx)
            .await?;
            if Self::affected(&done) == 0 {
                return Err(StoreError::RunNotFound(run_id.into()));
            }
            Ok(tx.commit().await?)
        }
    }

    /// [`Store::cancel_run`](crate::Store::cancel_run).
    fn cancel_run(
        pool: &Pool<Self>,
        run_id: &str,
    ) -> impl Future<Output = StoreResult<Run>> + Send {
        async move {
            let mut tx = Self::begin_write(pool).await?;
            let now = Self::lock_run(&mut tx, run_id).await?;
            let run = read::existing_run::<Self>(&mut tx, run_id).await?;
            if !run.state.status.is_open() {
                return Err(StoreError::RunState {
                    run: run_id.into(),
                    status: run.state.status.as_str().into(),
                    action: "cancelling it",
                });
            }
            // The lease owner stays recorded, so its worker is told "cancelled", not "lost".
            sqlx::query(
                "UPDATE runs SET status = 'cancelled', updated_at = $1, last_error = 'cancelled' \
                 WHERE id = $2",
            )
            .bind(now)
            .bind(run_id)
            .execute(&mut *tx)
            .await?;
            inbox::cancel_of::<Self>(&mut tx, run_id, now).await?;
            let run = read::existing_run::<Self>(&mut tx, run_id).await?;
            tx.commit().await?;
            tracing::info!(run = run_id, "cancelled run");
            Ok(run)
        }
    }

    /// [`Store::retry_run`](crate::Store::retry_run): a failed, discarded or cancelled
    /// run back to `pending`, its attempts afresh, unless its conversation has another
    /// open run (`RunAlreadyOpen`, looked up after the refused write rolled back).
    fn retry_run(pool: &Pool<Self>, run_id: &str) -> impl Future<Output = StoreResult<Run>> + Send {
        async move {
            let mut tx = Self::begin_write(pool).await?;
            let now = Self::lock_run(&mut tx, run_id).await?;
            let run = read::existing_run::<Self>(&mut tx, run_id).await?;
            if !matches!(
                run.state.status,
                RunStatus::Failed | RunStatus::Discarded | RunStatus::Cancelled
            ) {
                return Err(StoreError::RunState {
                    run: run_id.into(),
                    status: run.state.status.as_str().into(),
                    action: "retrying it",
                });
            }
            let done = sqlx::query(
                "UPDATE runs SET status = 'pending', attempt = 0, run_at = $1, updated_at = $1, \
                 lease_owner = NULL, lease_expires_at = NULL WHERE id = $2",
            )
            .bind(now)
            .bind(run_id)
            .execute(&mut *tx)
            .await;
            match done {
                Err(sqlx::Error::Database(d)) if d.is_unique_violation() => {
                    drop(tx);
                    let mut conn = pool.acquire().await?;
                    return Err(
                        match read::open_run::<Self>(&mut conn, &run.conversation_id).await? {
                            Some(open) => StoreError::RunAlreadyOpen {
                                conversation: run.conversation_id.clone(),
                                run: open.id,
                                status: open.state.status.as_str().into(),
                            },
                            None => sqlx::Error::Database(d).into(),
                        },
                    );
                }
                other => other?,
            };
            let run = read::existing_run::<Self>(&mut tx, run_id).await?;
            tx.commit().await?;
            Ok(run)
        }
    }

    /// [`Store::delete_conversation`](crate::Store::delete_conversation).
    fn delete_conversation(
        pool: &Pool<Self>,
        id: &str,
    ) -> impl Future<Output = StoreResult<bool>> + Send {
        async move {
            let mut conn = pool.acquire().await?;
            let done = sqlx::query("DELETE FROM conversations WHERE id = $1")
                .bind(id)
                .execute(&mut *conn)
                .await?;
            Ok(Self::affected(&done) > 0)
        }
    }

    /// [`Store::prune_runs`](crate::Store::prune_runs).
    fn prune_runs(
        pool: &Pool<Self>,
        before_ms: i64,
    ) -> impl Future<Output = StoreResult<u64>> + Send {
        async move {
            let mut conn = pool.acquire().await?;
            let done = sqlx::query(
                "DELETE FROM runs WHERE status IN ('done', 'failed', 'discarded', 'cancelled') \
                 AND updated_at < $1",
            )
            .bind(before_ms)
            .execute(&mut *conn)
            .await?;
            Ok(Self::affected(&done))
        }
    }
}

/// The methods of [`Store`](crate::Store) whose body is the same for both backends, for
/// the `impl Store` of a store whose `pool` field is a `Pool<$db>`: written once here,
/// so neither backend can drift from the other.
macro_rules! shared_store_methods {
    ($db:ty) => {
        async fn update_header(
            &self,
            id: &str,
            header: &llmchain::conversation::Conversation,
        ) -> $crate::StoreResult<()> {
            <$db as $crate::dialect::Dialect>::update_header(&self.pool, id, header).await
        }

        async fn list_conversations(
            &self,
            limit: i64,
        ) -> $crate::StoreResult<Vec<$crate::ConversationSummary>> {
            <$db as $crate::dialect::Dialect>::list_conversations(&self.pool, limit).await
        }

        async fn replace_message(
            &self,
            to: $crate::Writer<'_>,
            seq: i64,
            message: &llmchain::message::Message,
        ) -> $crate::StoreResult<()> {
            <$db as $crate::dialect::Dialect>::replace_message(&self.pool, to, seq, message).await
        }

        async fn superseded_messages(
            &self,
            id: &str,
        ) -> $crate::StoreResult<Vec<$crate::model::Superseded>> {
            $crate::truncate::superseded::<$db>(&mut *self.pool.acquire().await?, id).await
        }

        async fn supersede_messages(
            &self,
            to: $crate::Writer<'_>,
            keep: i64,
        ) -> $crate::StoreResult<u64> {
            <$db as $crate::dialect::Dialect>::supersede_messages(&self.pool, to, keep).await
        }

        async fn tool_statuses(
            &self,
            id: &str,
        ) -> $crate::StoreResult<
            std::collections::HashMap<String, llmchain::message::ExecutionStatus>,
        > {
            $crate::read::statuses::<$db>(&mut *self.pool.acquire().await?, id).await
        }

        async fn recover(
            &self,
            id: &str,
            is_idempotent: &(dyn Fn(&str) -> bool + Sync),
        ) -> $crate::StoreResult<$crate::Recovery> {
            <$db as $crate::dialect::Dialect>::recover(&self.pool, id, is_idempotent).await
        }

        async fn get_run(&self, run_id: &str) -> $crate::StoreResult<Option<$crate::Run>> {
            $crate::read::run::<$db>(&mut *self.pool.acquire().await?, run_id).await
        }

        async fn list_runs(&self, conversation_id: &str) -> $crate::StoreResult<Vec<$crate::Run>> {
            $crate::read::runs_of::<$db>(&mut *self.pool.acquire().await?, conversation_id).await
        }

        async fn list_all_runs(
            &self,
            filter: &$crate::RunFilter,
        ) -> $crate::StoreResult<Vec<$crate::Run>> {
            $crate::read::runs_where::<$db>(&mut *self.pool.acquire().await?, filter).await
        }

        async fn run_counts(
            &self,
        ) -> $crate::StoreResult<std::collections::HashMap<$crate::RunStatus, i64>> {
            $crate::read::run_counts::<$db>(&mut *self.pool.acquire().await?).await
        }

        async fn renew_lease(
            &self,
            lease: &$crate::Lease,
            duration: std::time::Duration,
        ) -> $crate::StoreResult<$crate::Run> {
            <$db as $crate::dialect::Dialect>::renew_lease(&self.pool, lease, duration).await
        }

        async fn pause_run(
            &self,
            lease: &$crate::Lease,
            state: &$crate::RunState,
            reviews: &[$crate::NewReview],
        ) -> $crate::StoreResult<$crate::RunStatus> {
            <$db as $crate::dialect::Dialect>::pause_run(&self.pool, lease, state, reviews).await
        }

        async fn list_reviews(
            &self,
            filter: &$crate::ReviewFilter,
        ) -> $crate::StoreResult<Vec<$crate::Review>> {
            $crate::inbox::list::<$db>(&mut *self.pool.acquire().await?, filter).await
        }

        async fn get_review(&self, id: &str) -> $crate::StoreResult<Option<$crate::Review>> {
            $crate::inbox::get::<$db>(&mut *self.pool.acquire().await?, id).await
        }

        async fn decide_review(
            &self,
            id: &str,
            decision: &llmchain::chain::HumanDecision,
            decided_by: &str,
        ) -> $crate::StoreResult<$crate::Decided> {
            <$db as $crate::dialect::Dialect>::decide_review(&self.pool, id, decision, decided_by)
                .await
        }

        async fn fail_run(
            &self,
            lease: &$crate::Lease,
            error: &str,
            retryable: bool,
        ) -> $crate::StoreResult<$crate::RunStatus> {
            <$db as $crate::dialect::Dialect>::fail_run(&self.pool, lease, error, retryable).await
        }

        async fn resume_run(
            &self,
            run_id: &str,
            state: &$crate::RunState,
        ) -> $crate::StoreResult<()> {
            <$db as $crate::dialect::Dialect>::resume_run(&self.pool, run_id, state).await
        }

        async fn cancel_run(&self, run_id: &str) -> $crate::StoreResult<$crate::Run> {
            <$db as $crate::dialect::Dialect>::cancel_run(&self.pool, run_id).await
        }

        async fn retry_run(&self, run_id: &str) -> $crate::StoreResult<$crate::Run> {
            <$db as $crate::dialect::Dialect>::retry_run(&self.pool, run_id).await
        }

        async fn complete_run(
            &self,
            lease: &$crate::Lease,
            state: &$crate::RunState,
        ) -> $crate::StoreResult<()> {
            self.write_leased(lease, &[$crate::Change::Complete(state)])
                .await?;
            tracing::debug!(run = %lease.run_id, status = state.status.as_str(), "completed run");
            Ok(())
        }

        async fn delete_conversation(&self, id: &str) -> $crate::StoreResult<bool> {
            <$db as $crate::dialect::Dialect>::delete_conversation(&self.pool, id).await
        }

        async fn prune_runs(&self, before_ms: i64) -> $crate::StoreResult<u64> {
            <$db as $crate::dialect::Dialect>::prune_runs(&self.pool, before_ms).await
        }
    };
}
pub(crate) use shared_store_methods;

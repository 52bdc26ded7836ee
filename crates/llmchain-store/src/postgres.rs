//! The PostgreSQL backend: several processes, on one machine or many.
//!
//! Runs are claimed with `SELECT … FOR UPDATE SKIP LOCKED`, so each claim goes to
//! exactly one worker; leases are compared with the database's clock, so workers'
//! clocks need not agree. A worker whose lease expired gets
//! [`StoreError::LeaseLost`] on its next fenced write.
//!
//! Messages and documents are stored as `TEXT` (not `jsonb`, which would reorder object
//! keys): what is read back is exactly what was written. Connections are plain TCP or
//! Unix sockets (no TLS is compiled in); put TLS in front (e.g. a local proxy) across
//! untrusted networks.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use llmchain::message::{ExecutionStatus, Message};
use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};

use crate::assemble;
use crate::dialect::Dialect;
use crate::error::{StoreError, StoreResult, message_body, ser};
use crate::lease::{self, LeaseRow};
use crate::model::{
    Change, ConversationSummary, Lease, NewConversation, Opening, Run, RunKind, RunOptions,
    RunState, RunStatus, StoredConversation, Writer, duration_ms, new_id, now_ms,
};
use crate::read;
use crate::schema;
use crate::store::Store;

/// Conversations in PostgreSQL.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: PgPool,
    wake: Arc<Wake>,
}

/// Wakes waiting workers when a run becomes pending: one `LISTEN` connection per store,
/// started by the first [`Store::wait_for_runs`].
#[derive(Debug, Default)]
struct Wake {
    notify: tokio::sync::Notify,
    started: std::sync::atomic::AtomicBool,
    /// When this store last rescued expired leases (ms since the Unix epoch, local
    /// clock): claims rescue at most every [`RESCUE_EVERY_MS`], or when they find
    /// nothing, so a busy queue pays one statement per claim.
    last_rescue: std::sync::atomic::AtomicI64,
}

/// How often a busy store rescues expired leases.
const RESCUE_EVERY_MS: i64 = 1000;

/// The channel the schema's trigger notifies.
const RUNS_CHANNEL: &str = "llmchain_runs";

/// Listens for new pending runs until the pool closes; reconnects after a failure
/// (sqlx's listener reconnects on the next receive; notifications sent meanwhile are
/// lost, so waiters are woken after each reconnect and the poll interval stays the
/// fallback).
async fn listen(pool: PgPool, wake: Arc<Wake>) {
    let mut backoff = Duration::from_millis(100);
    loop {
        if pool.is_closed() {
            return;
        }
        let listener = async {
            let mut l = sqlx::postgres::PgListener::connect_with(&pool).await?;
            l.listen(RUNS_CHANNEL).await?;
            Ok::<_, sqlx::Error>(l)
        };
        match listener.await {
            Ok(mut l) => {
                backoff = Duration::from_millis(100);
                wake.notify.notify_waiters();
                loop {
                    match l.try_recv().await {
                        Ok(Some(_)) => wake.notify.notify_waiters(),
                        Ok(None) => wake.notify.notify_waiters(), // reconnected
                        Err(e) => {
                            tracing::debug!(error = %e, "LISTEN connection failed; reconnecting");
                            break;
                        }
                    }
                }
            }
            Err(e) => tracing::debug!(error = %e, "cannot LISTEN for runs; polling meanwhile"),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// The database clock in milliseconds since the Unix epoch: leases use it, so the
/// workers' clocks need not agree.
macro_rules! db_now {
    () => {
        "(extract(epoch from clock_timestamp()) * 1000)::bigint"
    };
}

/// Key of the advisory lock that serialises migrations between processes.
const MIGRATION_LOCK: i64 = 0x6c6c_6d63_6861_696e;

/// Pool settings: a connection is pinged when it goes back to the pool (sqlx always does),
/// so one taken out again soon after needs no second ping; one idle for a while is
/// checked before use (the server or a proxy may have closed it).
/// How long connecting to the database may take before it fails with its cause.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

fn pool_options(max_connections: u32) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for > Duration::from_secs(30) {
                    conn.ping().await?;
                }
                Ok(true)
            })
        })
}

impl PostgresStore {
    /// Connects (`postgres://USER:PASSWORD@HOST:PORT/DB`) and brings the schema up to date.
    pub async fn connect(url: &str) -> StoreResult<PostgresStore> {
        PostgresStore::connect_with(url, 8).await
    }

    /// [`connect`](Self::connect) with a maximum pool size.
    pub async fn connect_with(url: &str, max_connections: u32) -> StoreResult<PostgresStore> {
        let options: PgConnectOptions = url.parse()?;
        PostgresStore::connect_options(options, max_connections).await
    }

    /// Connects with explicit options (e.g. a `search_path` through
    /// [`PgConnectOptions::options`]) and brings the schema up to date.
    pub async fn connect_options(
        options: PgConnectOptions,
        max_connections: u32,
    ) -> StoreResult<PostgresStore> {
        // Every transaction of ours lasts milliseconds. One left open by a process that
        // stopped mid-way (a frozen VM, SIGSTOP) would hold its row locks, and so block
        // the decisions, claims and cancellations that need those rows, until its TCP
        // connection times out: the server ends such a transaction after 10 s instead.
        let options = options.options([("idle_in_transaction_session_timeout", "10s")]);
        // One plain connection first: a pool that cannot connect reports only "pool timed
        // out", after its 30 s acquire timeout; this says why ("Connection refused",
        // "password authentication failed"), within CONNECT_TIMEOUT.
        match tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect_with(&options)).await {
            Ok(Ok(conn)) => {
                let _ = conn.close().await;
            }
            Ok(Err(e)) => return Err(e.into()),
            Err(_) => {
                return Err(StoreError::Database(sqlx::Error::Io(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "no answer from PostgreSQL at {}:{} within {CONNECT_TIMEOUT:?}",
                        options.get_host(),
                        options.get_port()
                    ),
                ))));
            }
        }
        let pool = pool_options(max_connections).connect_with(options).await?;
        PostgresStore::init(pool).await
    }

    /// The connection pool, for callers that keep their own tables beside ours.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    async fn init(pool: PgPool) -> StoreResult<PostgresStore> {
        let mut tx = pool.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(MIGRATION_LOCK)
            .execute(&mut *tx)
            .await?;
        sqlx::query(schema::CREATE_VERSION_TABLE)
            .execute(&mut *tx)
            .await?;
        let current: Option<i64> = sqlx::query_scalar("SELECT MAX(version) FROM llmchain_schema")
            .fetch_one(&mut *tx)
            .await?;
        let current = current.unwrap_or(0);
        if current > schema::SCHEMA_VERSION {
            return Err(StoreError::SchemaTooNew {
                found: current,
                supported: schema::SCHEMA_VERSION,
            });
        }
        for (version, sql) in schema::POSTGRES.iter().filter(|(v, _)| *v > current) {
            sqlx::raw_sql(*sql).execute(&mut *tx).await?;
            sqlx::query("INSERT INTO llmchain_schema (version) VALUES ($1)")
                .bind(version)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(PostgresStore {
            pool,
            wake: Arc::default(),
        })
    }
}
/// Appends in one statement: the counter update and the inserts are one atomic round
/// trip, inside the caller's transaction or on their own (autocommit).
async fn append_in(conn: &mut PgConnection, id: &str, messages: &[Message]) -> StoreResult<i64> {
    let bodies = messages
        .iter()
        .map(message_body)
        .collect::<StoreResult<Vec<String>>>()?;
    let first: Option<i64> = sqlx::query_scalar(
        "WITH c AS ( \
             UPDATE conversations SET next_seq = next_seq + cardinality($1::text[]), updated_at = $2 \
             WHERE id = $3 RETURNING next_seq - cardinality($1::text[]) AS first \
         ), m AS ( \
             INSERT INTO messages (conversation_id, seq, body, created_at) \
             SELECT $3, c.first + b.ord - 1, b.body, $2 \
             FROM c, unnest($1::text[]) WITH ORDINALITY AS b (body, ord) \
         ) SELECT first FROM c",
    )
    .bind(bodies)
    .bind(now_ms())
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    first.ok_or_else(|| StoreError::ConversationNotFound(id.into()))
}

async fn set_status_in(
    conn: &mut PgConnection,
    id: &str,
    call_id: &str,
    status: ExecutionStatus,
) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO tool_calls (conversation_id, call_id, status, updated_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (conversation_id, call_id) DO UPDATE SET status = excluded.status, updated_at = excluded.updated_at",
    )
    .bind(id)
    .bind(call_id)
    .bind(status.as_str())
    .bind(now_ms())
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The database clock, evaluated once per statement (an uncorrelated scalar subquery is
/// an InitPlan: a constant the planner can compare an index with).
macro_rules! db_now_once {
    () => {
        "(SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint)"
    };
}

/// Checks, inside a transaction, that `lease` is the run's live lease, and locks the
/// run's row until the transaction ends (so no claim, rescue or cancellation can change
/// it meanwhile); returns the run's conversation and the database clock.
async fn check_lease(conn: &mut PgConnection, lease: &Lease) -> StoreResult<(String, i64)> {
    let row: Option<(LeaseRow, i64)> = sqlx::query_as(concat!(
        "SELECT conversation_id, status, lease_owner, lease_expires_at, epoch, ",
        db_now!(),
        " FROM runs WHERE id = $1 FOR UPDATE"
    ))
    .bind(&lease.run_id)
    .fetch_optional(&mut *conn)
    .await?
    .map(
        |(c, s, o, e, ep, now): (String, String, Option<String>, Option<i64>, i64, i64)| {
            ((c, s, o, e, ep), now)
        },
    );
    let now = row.as_ref().map_or(0, |r| r.1);
    Ok((lease::verdict(row.map(|r| r.0), lease, now)?, now))
}

/// The conversation's open run, locked for the transaction.
async fn open_run_in(conn: &mut PgConnection, conversation: &str) -> StoreResult<Option<Run>> {
    let row: Option<assemble::RunRow> = sqlx::query_as(concat!(
        "SELECT ",
        run_columns!(),
        " FROM runs WHERE conversation_id = $1 AND status IN ('pending', 'running', 'paused') FOR UPDATE"
    ))
    .bind(conversation)
    .fetch_optional(&mut *conn)
    .await?;
    row.map(assemble::run).transpose()
}

/// `RunAlreadyOpen` for a unique violation of `runs_one_open` (looked up after the
/// failed transaction rolled back), the error itself otherwise.
async fn open_conflict(pool: &PgPool, conversation: &str, e: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(d) = &e
        && d.is_unique_violation()
        && let Ok(mut conn) = pool.acquire().await
        && let Ok(Some(run)) = open_run_in(&mut conn, conversation).await
    {
        return StoreError::RunAlreadyOpen {
            conversation: conversation.into(),
            run: run.id,
            status: run.state.status.as_str().into(),
        };
    }
    e.into()
}
/// Inserts conversation `new` under `id` with its messages unless one with that id
/// exists; answers whether it did.
async fn insert_conversation_in(
    conn: &mut PgConnection,
    id: &str,
    new: &NewConversation,
) -> StoreResult<bool> {
    let now = now_ms();
    let inserted = sqlx::query(
        "INSERT INTO conversations (id, title, metadata, header, next_seq, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, 0, $5, $6) ON CONFLICT (id) DO NOTHING",
    )
    .bind(id)
    .bind(&new.title)
    .bind(ser("metadata", &new.metadata)?)
    .bind(assemble::header_json(&new.conversation)?)
    .bind(now)
    .bind(now)
    .execute(&mut *conn)
    .await?;
    if inserted.rows_affected() == 0 {
        return Ok(false);
    }
    if !new.conversation.messages.is_empty() {
        append_in(conn, id, &new.conversation.messages).await?;
    }
    Ok(true)
}

/// [`Store::claim_conversation`]'s statements, in the caller's transaction.
async fn claim_in(
    conn: &mut PgConnection,
    conversation_id: &str,
    worker_id: &str,
    lease: Duration,
    state: &RunState,
) -> StoreResult<assemble::RunRow> {
    // Serialises claims of this conversation (the row lock), so the open-run check
    // and the insert below cannot race another process's.
    let exists: Option<i64> = sqlx::query_scalar(concat!(
        "SELECT ",
        db_now!(),
        " FROM conversations WHERE id = $1 FOR UPDATE"
    ))
    .bind(conversation_id)
    .fetch_optional(&mut *conn)
    .await?;
    let now = exists.ok_or_else(|| StoreError::ConversationNotFound(conversation_id.into()))?;
    let row: assemble::RunRow = match open_run_in(conn, conversation_id).await? {
        Some(run) if run.kind == RunKind::Queued => {
            return Err(crate::sqlite::queued_open(conversation_id, run));
        }
        Some(run)
            if run.state.status == RunStatus::Running
                && run.lease_expires_at.is_some_and(|e| e > now) =>
        {
            return Err(StoreError::RunBusy {
                conversation: conversation_id.into(),
                owner: run.lease_owner.unwrap_or_default(),
                remaining_ms: run.lease_expires_at.unwrap_or(now) - now,
                run: run.id,
            });
        }
        Some(run) => {
            sqlx::query_as(concat!(
                "UPDATE runs SET status = 'running', lease_owner = $1, lease_expires_at = $2 + $3, \
                 updated_at = $2, epoch = epoch + 1, attempt = attempt + 1 WHERE id = $4 RETURNING ",
                run_columns!()
            ))
            .bind(worker_id)
            .bind(now)
            .bind(duration_ms(lease))
            .bind(&run.id)
            .fetch_one(&mut *conn)
            .await?
        }
        None => {
            sqlx::query_as(concat!(
                "INSERT INTO runs (id, conversation_id, status, state, lease_owner, lease_expires_at, \
                 created_at, updated_at, epoch, attempt, run_at, kind) \
                 VALUES ($1, $2, 'running', $3, $4, $5 + $6, $5, $5, 1, 1, $5, 'interactive') RETURNING ",
                run_columns!()
            ))
            .bind(new_id())
            .bind(conversation_id)
            .bind(ser("run state", state)?)
            .bind(worker_id)
            .bind(now)
            .bind(duration_ms(lease))
            .fetch_one(&mut *conn)
            .await?
        }
    };
    Ok(row)
}

impl Dialect for sqlx::Postgres {
    async fn begin_write(pool: &PgPool) -> StoreResult<sqlx::Transaction<'static, Self>> {
        Ok(pool.begin().await?)
    }

    async fn lock_conversation(conn: &mut PgConnection, id: &str) -> StoreResult<()> {
        sqlx::query("SELECT id FROM conversations WHERE id = $1 FOR UPDATE")
            .bind(id)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }

    async fn lock_run(conn: &mut PgConnection, run_id: &str) -> StoreResult<i64> {
        let now: Option<i64> = sqlx::query_scalar(concat!(
            "SELECT ",
            db_now!(),
            " FROM runs WHERE id = $1 FOR UPDATE"
        ))
        .bind(run_id)
        .fetch_optional(&mut *conn)
        .await?;
        Ok(now.unwrap_or_else(now_ms))
    }

    async fn lock_for_decision(conn: &mut PgConnection, id: &str) -> StoreResult<i64> {
        // The review's run first, then the review.
        let now: Option<i64> = sqlx::query_scalar(concat!(
            "SELECT ",
            db_now!(),
            " FROM runs WHERE id = (SELECT run_id FROM reviews WHERE id = $1) FOR UPDATE"
        ))
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
        sqlx::query("SELECT id FROM reviews WHERE id = $1 FOR UPDATE")
            .bind(id)
            .execute(&mut *conn)
            .await?;
        Ok(now.unwrap_or_else(now_ms))
    }

    async fn check_lease(conn: &mut PgConnection, lease: &Lease) -> StoreResult<(String, i64)> {
        check_lease(conn, lease).await
    }

    async fn append_in(
        conn: &mut PgConnection,
        id: &str,
        messages: &[Message],
    ) -> StoreResult<i64> {
        append_in(conn, id, messages).await
    }

    async fn set_status_in(
        conn: &mut PgConnection,
        id: &str,
        call_id: &str,
        status: ExecutionStatus,
    ) -> StoreResult<()> {
        set_status_in(conn, id, call_id, status).await
    }

    fn affected(result: &sqlx::postgres::PgQueryResult) -> u64 {
        result.rows_affected()
    }
}

impl Store for PostgresStore {
    crate::dialect::shared_store_methods!(sqlx::Postgres);

    async fn create_conversation(&self, new: NewConversation) -> StoreResult<String> {
        let id = new.id.clone().unwrap_or_else(new_id);
        let mut tx = self.pool.begin().await?;
        if !insert_conversation_in(&mut tx, &id, &new).await? {
            return Err(StoreError::ConversationExists(id));
        }
        tx.commit().await?;
        Ok(id)
    }

    async fn get_conversation(&self, id: &str) -> StoreResult<Option<StoredConversation>> {
        // One snapshot of header, statuses and messages.
        let mut tx = self
            .pool
            .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .await?;
        let out = read::conversation::<sqlx::Postgres>(&mut tx, id).await?;
        tx.commit().await?;
        Ok(out)
    }

    async fn list_conversations_tagged(
        &self,
        key: &str,
        value: &str,
        limit: i64,
    ) -> StoreResult<Vec<ConversationSummary>> {
        crate::store::metadata_path(key)?;
        let rows = sqlx::query(
            "SELECT id, title, metadata, next_seq, created_at, updated_at FROM conversations \
             WHERE metadata::jsonb ->> $1 = $2 ORDER BY updated_at DESC, id LIMIT $3",
        )
        .bind(key)
        .bind(value)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        read::summaries(&rows)
    }

    async fn search_conversations(
        &self,
        text: &str,
        limit: i64,
    ) -> StoreResult<Vec<ConversationSummary>> {
        let (title, body) = crate::store::like_patterns(text);
        let rows = sqlx::query(
            "SELECT c.id, c.title, c.metadata, c.next_seq, c.created_at, c.updated_at \
             FROM conversations c WHERE c.title ILIKE $1 ESCAPE '\\' OR EXISTS (SELECT 1 FROM \
             messages m WHERE m.conversation_id = c.id AND (m.body ILIKE $2 ESCAPE '\\' \
             OR m.body ILIKE $1 ESCAPE '\\')) ORDER BY c.updated_at DESC, c.id LIMIT $3",
        )
        .bind(title)
        .bind(body)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        read::summaries(&rows)
    }

    async fn append_message(&self, id: &str, message: &Message) -> StoreResult<i64> {
        // One statement, so one round trip and one commit: the counter update locks the
        // conversation row (serialising appends) and the insert takes the old value.
        let seq: Option<i64> = sqlx::query_scalar(
            "WITH c AS (UPDATE conversations SET next_seq = next_seq + 1, updated_at = $3 \
             WHERE id = $1 RETURNING next_seq - 1 AS seq) \
             INSERT INTO messages (conversation_id, seq, body, created_at) \
             SELECT $1, seq, $2, $3 FROM c RETURNING seq",
        )
        .bind(id)
        .bind(message_body(message)?)
        .bind(now_ms())
        .fetch_optional(&self.pool)
        .await?;
        seq.ok_or_else(|| StoreError::ConversationNotFound(id.into()))
    }

    async fn append_messages(&self, to: Writer<'_>, messages: &[Message]) -> StoreResult<i64> {
        match to {
            // One statement: atomic without an explicit transaction.
            Writer::Conversation(id) => {
                append_in(&mut *self.pool.acquire().await?, id, messages).await
            }
            Writer::Lease(lease) => {
                let mut tx = self.pool.begin().await?;
                let (conv, _) = check_lease(&mut tx, lease).await?;
                let first = append_in(&mut tx, &conv, messages).await?;
                tx.commit().await?;
                Ok(first)
            }
        }
    }

    async fn set_tool_status(
        &self,
        to: Writer<'_>,
        call_id: &str,
        status: ExecutionStatus,
    ) -> StoreResult<()> {
        match to {
            Writer::Conversation(id) => {
                let mut conn = self.pool.acquire().await?;
                set_status_in(&mut conn, id, call_id, status).await
            }
            Writer::Lease(lease) => {
                let mut tx = self.pool.begin().await?;
                let (conv, _) = check_lease(&mut tx, lease).await?;
                set_status_in(&mut tx, &conv, call_id, status).await?;
                Ok(tx.commit().await?)
            }
        }
    }

    async fn enqueue_run(
        &self,
        conversation_id: &str,
        state: &RunState,
        options: &RunOptions,
    ) -> StoreResult<Run> {
        let id = new_id();
        let now = now_ms();
        let row: Result<assemble::RunRow, sqlx::Error> = sqlx::query_as(concat!(
            "INSERT INTO runs (id, conversation_id, status, state, created_at, updated_at, \
             max_attempts, run_at, priority, kind, profile) VALUES ($1, $2, $3, $4, $5, $5, $6, COALESCE($7, ",
            db_now!(),
            "), $8, 'queued', $9) RETURNING ",
            run_columns!()
        ))
        .bind(&id)
        .bind(conversation_id)
        .bind(state.status.as_str())
        .bind(ser("run state", state)?)
        .bind(now)
        .bind(options.max_attempts.max(1))
        .bind(options.run_at)
        .bind(options.priority)
        .bind(options.profile.as_deref())
        .fetch_one(&self.pool)
        .await;
        match row {
            Ok(row) => assemble::run(row),
            Err(sqlx::Error::Database(d)) if d.is_foreign_key_violation() => {
                Err(StoreError::ConversationNotFound(conversation_id.into()))
            }
            Err(e) => Err(open_conflict(&self.pool, conversation_id, e).await),
        }
    }

    async fn queued_counts(
        &self,
        profiles: Option<&[String]>,
    ) -> StoreResult<HashMap<RunStatus, i64>> {
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT status, COUNT(*) FROM runs WHERE kind = 'queued' \
             AND ($1::text[] IS NULL OR profile = ANY($1)) GROUP BY status",
        )
        .bind(profiles)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(s, n)| (RunStatus::read(&s), n))
            .collect())
    }

    async fn claim_run_of(
        &self,
        worker_id: &str,
        lease: Duration,
        profiles: Option<&[String]>,
    ) -> StoreResult<Option<Run>> {
        use std::sync::atomic::Ordering;
        let now = now_ms();
        let last = self.wake.last_rescue.load(Ordering::Relaxed);
        if now - last >= RESCUE_EVERY_MS
            && self
                .wake
                .last_rescue
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.rescue_expired().await?;
        }
        let claimed = self.claim_pending(worker_id, lease, profiles).await?;
        if claimed.is_some() {
            return Ok(claimed);
        }
        // Nothing pending: a run whose worker died may be waiting for its rescue.
        if self.rescue_expired().await? > 0 {
            self.wake.last_rescue.store(now_ms(), Ordering::Relaxed);
            return self.claim_pending(worker_id, lease, profiles).await;
        }
        Ok(None)
    }

    async fn wait_for_runs(&self, timeout: Duration) {
        use std::sync::atomic::Ordering;
        let notified = self.wake.notify.notified();
        if !self.wake.started.swap(true, Ordering::AcqRel) {
            tokio::spawn(listen(self.pool.clone(), self.wake.clone()));
        }
        let _ = tokio::time::timeout(timeout, notified).await;
    }

    async fn rescue_expired(&self) -> StoreResult<u64> {
        let done = sqlx::query(concat!(
            "UPDATE runs SET \
                status = CASE WHEN kind = 'interactive' THEN 'failed' \
                    WHEN attempt >= max_attempts THEN 'discarded' ELSE 'pending' END, \
                lease_owner = NULL, lease_expires_at = NULL, run_at = ",
            db_now!(),
            ", updated_at = ",
            db_now!(),
            ", last_error = CASE WHEN kind = 'interactive' \
                    THEN 'the process ' || coalesce(lease_owner, '?') || ' holding it stopped (its lease expired)' \
                    ELSE 'the lease of ' || coalesce(lease_owner, '?') || ' expired' END \
             WHERE id IN (SELECT id FROM runs WHERE status = 'running' AND lease_expires_at <= ",
            db_now_once!(),
            " ORDER BY lease_expires_at LIMIT 100 FOR UPDATE SKIP LOCKED)"
        ))
        .execute(&self.pool)
        .await?;
        if done.rows_affected() > 0 {
            tracing::info!(
                runs = done.rows_affected(),
                "rescued runs whose lease expired"
            );
        }
        Ok(done.rows_affected())
    }

    async fn release_leases(&self, worker_id: &str) -> StoreResult<u64> {
        let done = sqlx::query(concat!(
            "UPDATE runs SET lease_expires_at = ",
            db_now!(),
            ", updated_at = ",
            db_now!(),
            " WHERE status = 'running' AND lease_owner = $1 AND lease_expires_at > ",
            db_now!()
        ))
        .bind(worker_id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    async fn claim_conversation(
        &self,
        conversation_id: &str,
        worker_id: &str,
        lease: Duration,
        state: &RunState,
    ) -> StoreResult<Run> {
        let mut tx = self.pool.begin().await?;
        let row = claim_in(&mut tx, conversation_id, worker_id, lease, state).await?;
        tx.commit().await?;
        assemble::run(row)
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
        let mut tx = self.pool.begin().await?;
        if let Some(new) = &create {
            insert_conversation_in(&mut tx, conversation_id, new).await?;
        }
        let row = claim_in(&mut tx, conversation_id, worker_id, lease, state).await?;
        // The conversation's row is locked by the claim: no other claim changes it
        // before this transaction ends.
        let mut stored = read::conversation::<sqlx::Postgres>(&mut tx, conversation_id)
            .await?
            .ok_or_else(|| StoreError::ConversationNotFound(conversation_id.into()))?;
        if let Some(opening) = &opening {
            let messages = opening(&stored)?;
            if !messages.is_empty() {
                append_in(&mut tx, conversation_id, &messages).await?;
                stored.extend(messages);
            }
        }
        tx.commit().await?;
        Ok((assemble::run(row)?, stored))
    }

    async fn update_run(&self, lease: &Lease, state: &RunState) -> StoreResult<()> {
        self.write_leased(lease, &[Change::RunState(state)])
            .await
            .map(|_| ())
    }

    async fn write_leased(&self, lease: &Lease, changes: &[Change<'_>]) -> StoreResult<i64> {
        Change::check_order(changes, lease)?;
        let mut tx = self.pool.begin().await?;
        let (conversation, _) = check_lease(&mut tx, lease).await?;
        let mut first = None;
        for change in changes {
            match *change {
                Change::Append([]) => {}
                Change::Append(messages) => {
                    let n = append_in(&mut tx, &conversation, messages).await?;
                    first.get_or_insert(n);
                }
                Change::Status(call_id, status) => {
                    set_status_in(&mut tx, &conversation, call_id, status).await?;
                }
                Change::RunState(state) => {
                    sqlx::query(crate::dialect::RUN_STATE)
                        .bind(ser("run state", state)?)
                        .bind(now_ms())
                        .bind(&lease.run_id)
                        .execute(&mut *tx)
                        .await?;
                }
                Change::Complete(state) => {
                    sqlx::query(crate::dialect::COMPLETE_RUN)
                        .bind(state.status.as_str())
                        .bind(ser("run state", state)?)
                        .bind(now_ms())
                        .bind(&lease.run_id)
                        .execute(&mut *tx)
                        .await?;
                }
            }
        }
        tx.commit().await?;
        Ok(first.unwrap_or(0))
    }
}

impl PostgresStore {
    /// Claims the first pending run whose time has come.
    async fn claim_pending(
        &self,
        worker_id: &str,
        lease: Duration,
        profiles: Option<&[String]>,
    ) -> StoreResult<Option<Run>> {
        // Pending runs only, in `runs_pending`'s order: the scan stops at the first
        // unlocked row whose time has come, whatever the backlog.
        let row: Option<assemble::RunRow> = sqlx::query_as(concat!(
            "UPDATE runs SET status = 'running', lease_owner = $1, lease_expires_at = ",
            db_now!(),
            " + $2, updated_at = ",
            db_now!(),
            ", epoch = epoch + 1, attempt = attempt + 1 \
             WHERE id = (SELECT id FROM runs WHERE status = 'pending' AND kind = 'queued' \
                AND ($3::text[] IS NULL OR profile = ANY($3)) AND run_at <= ",
            db_now_once!(),
            " ORDER BY priority DESC, run_at, created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING ",
            run_columns!()
        ))
        .bind(worker_id)
        .bind(duration_ms(lease))
        .bind(profiles)
        .fetch_optional(&self.pool)
        .await?;
        let run = row.map(assemble::run).transpose()?;
        if let Some(run) = &run {
            tracing::debug!(run = %run.id, worker = worker_id, attempt = run.attempt, "claimed run");
        }
        Ok(run)
    }
}

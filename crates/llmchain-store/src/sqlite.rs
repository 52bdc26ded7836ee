//! The SQLite backend: the embedded default.
//!
//! # Durability: WAL with `synchronous=FULL`
//!
//! A write must be durable when its call returns. In WAL mode:
//! - `synchronous=NORMAL` syncs the WAL only at checkpoints. A *process* crash
//!   (SIGKILL, panic) loses nothing, since committed frames are in the OS page cache, but
//!   a *power loss or kernel crash* can lose the last transactions that had returned.
//! - `synchronous=FULL` syncs the WAL at every commit, so a returned write survives power
//!   loss too, at the cost of one `fsync` per transaction.
//!
//! We default to [`Durability::Full`], because the chain's crash rules (a call marked
//! `executing` is never re-run blindly) are only sound if a recorded status cannot
//! silently vanish. [`Durability::Normal`] (or `?synchronous=normal` in an
//! [`AnyStore`](crate::AnyStore) URL) is for callers that accept losing the last writes on
//! power loss (tests, scratch data).
//!
//! # Cost of a write
//!
//! Under `FULL` each commit waits for one `fdatasync` (0.1–0.3 ms on a quiet SSD-backed
//! VM disk), which caps one caller appending one message at a time at a few thousand
//! messages per second. Appends, tool statuses and the writes under a run's lease (its
//! state, its completion) therefore go through one writer thread that commits the
//! writes arriving together in one transaction (group commit): each caller still
//! returns only after its commit, and concurrent conversations share the sync.
//! [`Store::append_messages`] writes a batch in one transaction. Creating a
//! conversation, claiming its run and reading it back run on the same thread's
//! `rusqlite` connection as one job each: through sqlx every statement would be a round
//! trip to the connection's worker thread. Measured figures and the trade-off:
//! `docs/storage.md`, `docs/benchmarks.md` (the serve benchmark) and the crate README.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use llmchain::message::{ExecutionStatus, Message};
use sqlx::Connection;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};

use crate::assemble;
use crate::dialect::Dialect;
use crate::direct;
use crate::error::{StoreError, StoreResult, message_body, ser};
use crate::group_commit::{self, GroupCommitter, LeasedWrite, Write};
use crate::lease::{self, LeaseRow};
use crate::model::{
    Change, ConversationSummary, Lease, NewConversation, Opening, Run, RunOptions, RunState,
    RunStatus, StoredConversation, Writer, duration_ms, new_id, now_ms,
};
use crate::read;
use crate::schema;
use crate::store::Store;

/// How hard SQLite syncs (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Durability {
    /// `synchronous=FULL`: a returned write survives power loss. The default.
    #[default]
    Full,
    /// `synchronous=NORMAL`: a returned write survives a process crash, not power loss.
    Normal,
}

/// The default database file: `$XDG_DATA_HOME/llmchain/llmchain.db`, else
/// `~/.local/share/llmchain/llmchain.db`.
pub fn default_sqlite_path() -> StoreResult<PathBuf> {
    let base = match std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            let home = std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .ok_or(StoreError::NoDataDir)?;
            PathBuf::from(home).join(".local").join("share")
        }
    };
    Ok(base.join("llmchain").join("llmchain.db"))
}

/// Creates the database's directory (0700: only this user) and file (0600) when they
/// do not exist yet. SQLite gives its `-wal` and `-shm` files the database file's
/// permissions, so conversations (and what tools read into them) stay private. Existing
/// files and directories keep theirs.
fn private_file(path: &Path) -> StoreResult<()> {
    let io = |what: &Path| {
        let what = what.display().to_string();
        move |cause| StoreError::Io {
            context: format!("cannot create {what}"),
            cause,
        }
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && !dir.exists()
    {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(dir).map_err(io(dir))?;
    }
    if !path.exists() {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(false);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        options.open(path).map_err(io(path))?;
    }
    tighten(path)?;
    Ok(())
}

/// A database file that already existed, and its `-wal` and `-shm` files, made private
/// to their owner (0600) when others could read or write them: a conversation holds
/// what tools read. When that is not possible (another owner), the open fails saying
/// how to fix it, rather than going on with a readable file.
fn tighten(path: &Path) -> StoreResult<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mut files = vec![path.to_path_buf()];
        for suffix in ["-wal", "-shm"] {
            let mut p = path.as_os_str().to_owned();
            p.push(suffix);
            files.push(PathBuf::from(p));
        }
        for file in files {
            let Ok(meta) = std::fs::metadata(&file) else {
                continue;
            };
            // Not a regular file (a device such as /dev/null): not ours to change.
            if !meta.is_file() || meta.permissions().mode() & 0o077 == 0 {
                continue;
            }
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).map_err(
                |cause| StoreError::Io {
                    context: format!(
                        "{} can be read by other users (mode {:o}) and cannot be made private; fix it with `chmod 600 {}`",
                        file.display(),
                        meta.permissions().mode() & 0o777,
                        file.display()
                    ),
                    cause,
                },
            )?;
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// How long a statement waits out a lock held by another connection or process (a
/// writer in another process, a busy machine) before it fails.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(60);

/// How long taking a connection from the pool may wait: longer than [`BUSY_TIMEOUT`], so
/// a connection held by a statement waiting out a lock is waited for, not reported as
/// "pool timed out".
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(90);

/// Conversations in SQLite.
///
/// Appends and tool-call statuses of a file database go through one writer thread that
/// commits the writes arriving together in one transaction (group commit, see
/// [`append_message`](Store::append_message)); everything else uses a small pool of
/// connections. Cloning shares both.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    /// `None` for an in-memory database, whose one connection is the pool's.
    writer: Option<GroupCommitter>,
}

const BEGIN_WRITE: &str = "BEGIN IMMEDIATE";

impl SqliteStore {
    /// Opens (creating it and its directory if needed) a database file with
    /// [`Durability::Full`], and brings its schema up to date.
    pub async fn open(path: impl AsRef<Path>) -> StoreResult<SqliteStore> {
        SqliteStore::open_with(path, Durability::Full).await
    }

    /// [`open`](Self::open) with a chosen durability.
    pub async fn open_with(
        path: impl AsRef<Path>,
        durability: Durability,
    ) -> StoreResult<SqliteStore> {
        let path = path.as_ref();
        private_file(path)?;
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(match durability {
                Durability::Full => SqliteSynchronous::Full,
                Durability::Normal => SqliteSynchronous::Normal,
            })
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true);
        // No ping when a connection leaves the pool: an embedded database cannot hang up.
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .test_before_acquire(false)
            .connect_with(options.clone())
            .await?;
        let mut store = SqliteStore::init(pool).await?;
        let synchronous = match durability {
            Durability::Full => "FULL",
            Durability::Normal => "NORMAL",
        };
        store.writer = Some(GroupCommitter::start(path, synchronous)?);
        Ok(store)
    }

    /// Opens the default database file ([`default_sqlite_path`]).
    pub async fn open_default() -> StoreResult<SqliteStore> {
        SqliteStore::open(default_sqlite_path()?).await
    }

    /// A private in-memory database (gone when the store is dropped).
    pub async fn in_memory() -> StoreResult<SqliteStore> {
        let options = SqliteConnectOptions::from_str("sqlite::memory:")?.foreign_keys(true);
        // One connection that never closes: each in-memory connection is its own database.
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .test_before_acquire(false)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options)
            .await?;
        SqliteStore::init(pool).await
    }

    /// Performs a write through the writer thread (or, in memory, on the pool's connection).
    async fn write(&self, write: Write) -> StoreResult<i64> {
        match &self.writer {
            Some(writer) => writer.write(write).await,
            None => {
                let mut conn = self.pool.acquire().await?;
                let mut tx = conn.begin_with(BEGIN_WRITE).await?;
                let first = group_commit::within(&mut tx, &write).await?;
                tx.commit().await?;
                Ok(first)
            }
        }
    }

    /// Runs `job` on a `rusqlite` connection, in one hop: the writer thread's (between
    /// its batches) for a file, the pool's only connection in memory. For operations of
    /// several statements that sqlx would run one round trip each.
    async fn direct<T: Send + 'static>(
        &self,
        job: impl FnOnce(&mut rusqlite::Connection) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        match &self.writer {
            Some(writer) => writer.job(job).await,
            None => {
                let mut conn = self.pool.acquire().await?;
                let mut handle = conn.lock_handle().await?;
                direct::on_sqlx_connection(&mut handle, job)
            }
        }
    }

    /// Runs `run`'s statements in a write transaction, committed unless `run` fails: as a
    /// part of the writer thread's next batch for a file (one sync shared with the writes
    /// queued beside it), on the pool's only connection in memory. `run` may be called
    /// again if its batch is retried part by part.
    async fn transaction<T: Send + 'static>(
        &self,
        mut run: impl FnMut(&rusqlite::Connection) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        match &self.writer {
            Some(writer) => writer.transaction(run).await,
            // In memory: `direct` runs it on the pool's only connection.
            None => {
                self.direct(move |conn| {
                    let tx =
                        conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
                    let out = run(&tx)?;
                    tx.commit()?;
                    Ok(out)
                })
                .await
            }
        }
    }

    /// The connection pool, for callers that keep their own tables beside ours.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    async fn init(pool: SqlitePool) -> StoreResult<SqliteStore> {
        let mut conn = pool.acquire().await?;
        let mut tx = conn.begin_with(BEGIN_WRITE).await?;
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
        for (version, sql) in schema::SQLITE.iter().filter(|(v, _)| *v > current) {
            sqlx::raw_sql(*sql).execute(&mut *tx).await?;
            sqlx::query("INSERT INTO llmchain_schema (version) VALUES (?)")
                .bind(version)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        drop(conn);
        Ok(SqliteStore { pool, writer: None })
    }
}

/// Appends inside the caller's transaction; `messages` must not be empty.
async fn append_in(
    conn: &mut SqliteConnection,
    id: &str,
    messages: &[Message],
) -> StoreResult<i64> {
    let write = Write::Append {
        conversation: id.to_owned(),
        bodies: bodies(messages)?,
        at: now_ms(),
    };
    group_commit::within(conn, &write).await
}

pub(crate) fn bodies(messages: &[Message]) -> StoreResult<Vec<String>> {
    messages.iter().map(message_body).collect()
}

fn status_write(id: &str, call_id: &str, status: ExecutionStatus) -> Write {
    Write::Status {
        conversation: id.to_owned(),
        call_id: call_id.to_owned(),
        status: status.as_str(),
        at: now_ms(),
    }
}

async fn set_status_in(
    conn: &mut SqliteConnection,
    id: &str,
    call_id: &str,
    status: ExecutionStatus,
) -> StoreResult<()> {
    group_commit::within(conn, &status_write(id, call_id, status)).await?;
    Ok(())
}

/// Checks, inside a write transaction (`BEGIN IMMEDIATE`: SQLite has one writer, so
/// nothing can change the run until it commits), that `lease` is the run's live lease;
/// returns the run's conversation and the clock it was compared with.
async fn check_lease(conn: &mut SqliteConnection, lease: &Lease) -> StoreResult<(String, i64)> {
    let row: Option<LeaseRow> = sqlx::query_as(
        "SELECT conversation_id, status, lease_owner, lease_expires_at, epoch FROM runs WHERE id = ?",
    )
    .bind(&lease.run_id)
    .fetch_optional(&mut *conn)
    .await?;
    let now = now_ms();
    Ok((lease::verdict(row, lease, now)?, now))
}

/// Profiles as a JSON array for `json_each`, or `None` for any.
fn profiles_json(profiles: Option<&[String]>) -> StoreResult<Option<String>> {
    profiles.map(|p| ser("profiles", p)).transpose()
}

pub(crate) fn queued_open(conversation: &str, run: Run) -> StoreError {
    StoreError::QueuedRunOpen {
        conversation: conversation.into(),
        run: run.id,
        status: run.state.status.as_str().into(),
    }
}

fn already_open(conversation: &str, run: Run) -> StoreError {
    StoreError::RunAlreadyOpen {
        conversation: conversation.into(),
        run: run.id,
        status: run.state.status.as_str().into(),
    }
}

/// A new conversation's row, serialised.
fn new_row(new: NewConversation) -> StoreResult<direct::NewRow> {
    Ok(direct::NewRow {
        id: new.id.unwrap_or_else(new_id),
        title: new.title,
        metadata: ser("metadata", &new.metadata)?,
        header: assemble::header_json(&new.conversation)?,
        bodies: bodies(&new.conversation.messages)?,
        at: now_ms(),
    })
}

/// An interactive claim of `conversation_id`, serialised.
fn claim(
    conversation_id: &str,
    worker_id: &str,
    lease: Duration,
    state: &RunState,
) -> StoreResult<direct::Claim> {
    let now = now_ms();
    Ok(direct::Claim {
        conversation: conversation_id.to_owned(),
        worker: worker_id.to_owned(),
        new_run: new_id(),
        state: ser("run state", state)?,
        now,
        expires: now.saturating_add(duration_ms(lease)),
    })
}

impl Dialect for sqlx::Sqlite {
    async fn begin_write(pool: &SqlitePool) -> StoreResult<sqlx::Transaction<'static, Self>> {
        Ok(pool.begin_with(BEGIN_WRITE).await?)
    }

    // `BEGIN IMMEDIATE` took the one writer's lock: nothing else writes until the
    // transaction ends, so there is no row to lock, and leases read the local clock.

    async fn lock_conversation(_: &mut SqliteConnection, _: &str) -> StoreResult<()> {
        Ok(())
    }

    async fn lock_run(_: &mut SqliteConnection, _: &str) -> StoreResult<i64> {
        Ok(now_ms())
    }

    async fn lock_for_decision(_: &mut SqliteConnection, _: &str) -> StoreResult<i64> {
        Ok(now_ms())
    }

    async fn check_lease(conn: &mut SqliteConnection, lease: &Lease) -> StoreResult<(String, i64)> {
        check_lease(conn, lease).await
    }

    async fn append_in(
        conn: &mut SqliteConnection,
        id: &str,
        messages: &[Message],
    ) -> StoreResult<i64> {
        append_in(conn, id, messages).await
    }

    async fn set_status_in(
        conn: &mut SqliteConnection,
        id: &str,
        call_id: &str,
        status: ExecutionStatus,
    ) -> StoreResult<()> {
        set_status_in(conn, id, call_id, status).await
    }

    fn affected(result: &sqlx::sqlite::SqliteQueryResult) -> u64 {
        result.rows_affected()
    }
}

impl Store for SqliteStore {
    crate::dialect::shared_store_methods!(sqlx::Sqlite);

    async fn create_conversation(&self, new: NewConversation) -> StoreResult<String> {
        let row = new_row(new)?;
        self.transaction(move |tx| direct::create_conversation(tx, &row))
            .await
    }

    async fn get_conversation(&self, id: &str) -> StoreResult<Option<StoredConversation>> {
        // One read transaction: a consistent snapshot of header, statuses and messages.
        let id = id.to_owned();
        self.direct(move |conn| direct::conversation(conn, &id))
            .await
    }

    async fn list_conversations_tagged(
        &self,
        key: &str,
        value: &str,
        limit: i64,
    ) -> StoreResult<Vec<ConversationSummary>> {
        let path = crate::store::metadata_path(key)?;
        let rows = sqlx::query(
            "SELECT id, title, metadata, next_seq, created_at, updated_at FROM conversations \
             WHERE json_extract(metadata, ?) = ? ORDER BY updated_at DESC, id LIMIT ?",
        )
        .bind(path)
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
             FROM conversations c WHERE c.title LIKE ? ESCAPE '\\' OR EXISTS (SELECT 1 FROM \
             messages m WHERE m.conversation_id = c.id AND (m.body LIKE ? ESCAPE '\\' \
             OR m.body LIKE ? ESCAPE '\\')) ORDER BY c.updated_at DESC, c.id LIMIT ?",
        )
        .bind(&title)
        .bind(body)
        .bind(&title)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        read::summaries(&rows)
    }

    async fn append_message(&self, id: &str, message: &Message) -> StoreResult<i64> {
        self.append_messages(id.into(), std::slice::from_ref(message))
            .await
    }

    async fn append_messages(&self, to: Writer<'_>, messages: &[Message]) -> StoreResult<i64> {
        let id = match to {
            Writer::Conversation(id) => id,
            Writer::Lease(lease) => {
                return self
                    .write(Write::Leased {
                        lease: lease.clone(),
                        write: LeasedWrite::Append {
                            bodies: bodies(messages)?,
                        },
                        at: now_ms(),
                    })
                    .await;
            }
        };
        if messages.is_empty() {
            return sqlx::query_scalar("SELECT next_seq FROM conversations WHERE id = ?")
                .bind(id)
                .fetch_optional(&self.pool)
                .await?
                .ok_or_else(|| StoreError::ConversationNotFound(id.into()));
        }
        let write = Write::Append {
            conversation: id.to_owned(),
            bodies: bodies(messages)?,
            at: now_ms(),
        };
        self.write(write).await
    }

    async fn set_tool_status(
        &self,
        to: Writer<'_>,
        call_id: &str,
        status: ExecutionStatus,
    ) -> StoreResult<()> {
        match to {
            Writer::Conversation(id) => {
                self.write(status_write(id, call_id, status)).await?;
            }
            Writer::Lease(lease) => {
                self.write(Write::Leased {
                    lease: lease.clone(),
                    write: LeasedWrite::Status {
                        call_id: call_id.to_owned(),
                        status: status.as_str(),
                    },
                    at: now_ms(),
                })
                .await?;
            }
        }
        Ok(())
    }

    async fn enqueue_run(
        &self,
        conversation_id: &str,
        state: &RunState,
        options: &RunOptions,
    ) -> StoreResult<Run> {
        let id = new_id();
        let now = now_ms();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await?;
        let row: Result<assemble::RunRow, sqlx::Error> = sqlx::query_as(concat!(
            "INSERT INTO runs (id, conversation_id, status, state, created_at, updated_at, \
             max_attempts, run_at, priority, kind, profile) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?) RETURNING ",
            run_columns!()
        ))
        .bind(&id)
        .bind(conversation_id)
        .bind(state.status.as_str())
        .bind(ser("run state", state)?)
        .bind(now)
        .bind(now)
        .bind(options.max_attempts.max(1))
        .bind(options.run_at.unwrap_or(now))
        .bind(options.priority)
        .bind(options.profile.as_deref())
        .fetch_one(&mut *tx)
        .await;
        let row = match row {
            Ok(row) => row,
            Err(sqlx::Error::Database(d)) if d.is_foreign_key_violation() => {
                return Err(StoreError::ConversationNotFound(conversation_id.into()));
            }
            Err(sqlx::Error::Database(d)) if d.is_unique_violation() => {
                let open = read::open_run::<sqlx::Sqlite>(&mut tx, conversation_id).await?;
                return Err(match open {
                    Some(run) => already_open(conversation_id, run),
                    None => sqlx::Error::Database(d).into(),
                });
            }
            Err(e) => return Err(e.into()),
        };
        tx.commit().await?;
        assemble::run(row)
    }

    async fn queued_counts(
        &self,
        profiles: Option<&[String]>,
    ) -> StoreResult<HashMap<RunStatus, i64>> {
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT status, COUNT(*) FROM runs WHERE kind = 'queued' \
             AND (?1 IS NULL OR profile IN (SELECT value FROM json_each(?1))) GROUP BY status",
        )
        .bind(profiles_json(profiles)?)
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
        self.rescue_expired().await?;
        // SQLite has one writer at a time: the statement is atomic.
        let now = now_ms();
        let row: Option<assemble::RunRow> = sqlx::query_as(concat!(
            "UPDATE runs SET status = 'running', lease_owner = ?1, lease_expires_at = ?2, \
             updated_at = ?3, epoch = epoch + 1, attempt = attempt + 1 \
             WHERE id = (SELECT id FROM runs WHERE status = 'pending' AND kind = 'queued' \
                AND run_at <= ?3 \
                AND (?4 IS NULL OR profile IN (SELECT value FROM json_each(?4))) \
                ORDER BY priority DESC, run_at, created_at, id LIMIT 1) \
             RETURNING ",
            run_columns!()
        ))
        .bind(worker_id)
        .bind(now.saturating_add(duration_ms(lease)))
        .bind(now)
        .bind(profiles_json(profiles)?)
        .fetch_optional(&self.pool)
        .await?;
        row.map(assemble::run).transpose()
    }

    async fn rescue_expired(&self) -> StoreResult<u64> {
        let now = now_ms();
        let done = sqlx::query(
            "UPDATE runs SET \
                status = CASE WHEN kind = 'interactive' THEN 'failed' \
                    WHEN attempt >= max_attempts THEN 'discarded' ELSE 'pending' END, \
                lease_owner = NULL, lease_expires_at = NULL, run_at = ?1, updated_at = ?1, \
                last_error = CASE WHEN kind = 'interactive' \
                    THEN 'the process ' || coalesce(lease_owner, '?') || ' holding it stopped (its lease expired)' \
                    ELSE 'the lease of ' || coalesce(lease_owner, '?') || ' expired' END \
             WHERE status = 'running' AND lease_expires_at <= ?1",
        )
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    async fn release_leases(&self, worker_id: &str) -> StoreResult<u64> {
        let done = sqlx::query(
            "UPDATE runs SET lease_expires_at = ?1, updated_at = ?1 \
             WHERE status = 'running' AND lease_owner = ?2 AND lease_expires_at > ?1",
        )
        .bind(now_ms())
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
        let claim = claim(conversation_id, worker_id, lease, state)?;
        self.transaction(move |tx| direct::claim_conversation(tx, &claim))
            .await
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
        let claim = claim(conversation_id, worker_id, lease, state)?;
        let create = create
            .map(|new| new_row(new.with_id(conversation_id)))
            .transpose()?;
        self.transaction(move |tx| {
            direct::claim_and_read(tx, create.as_ref(), &claim, opening.as_ref())
        })
        .await
    }

    async fn update_run(&self, lease: &Lease, state: &RunState) -> StoreResult<()> {
        self.write(Write::Leased {
            lease: lease.clone(),
            write: LeasedWrite::RunState(ser("run state", state)?),
            at: now_ms(),
        })
        .await?;
        Ok(())
    }

    async fn write_leased(&self, lease: &Lease, changes: &[Change<'_>]) -> StoreResult<i64> {
        Change::check_order(changes, lease)?;
        let writes = changes
            .iter()
            .filter(|change| !matches!(change, Change::Append([])))
            .map(|change| {
                Ok(match *change {
                    Change::Append(messages) => LeasedWrite::Append {
                        bodies: bodies(messages)?,
                    },
                    Change::Status(call_id, status) => LeasedWrite::Status {
                        call_id: call_id.to_owned(),
                        status: status.as_str(),
                    },
                    Change::RunState(state) => LeasedWrite::RunState(ser("run state", state)?),
                    Change::Complete(state) => LeasedWrite::Complete {
                        status: state.status.as_str(),
                        state: ser("run state", state)?,
                    },
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        self.write(Write::LeasedMany {
            lease: lease.clone(),
            writes,
            at: now_ms(),
        })
        .await
    }
}

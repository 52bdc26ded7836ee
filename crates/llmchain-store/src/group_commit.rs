//! Group commit for SQLite: appends and tool-call statuses go to one writer thread that
//! commits the writes waiting at the same moment in one transaction.
//!
//! Under `synchronous=FULL` every commit costs one sync of the WAL (`fdatasync`, about
//! 0.1 ms on the disk we measured), so one transaction per write caps a database at a few
//! thousand writes per second however fast the rest is. The writer takes every request
//! queued while the previous transaction was syncing (up to [`MAX_BATCH`]), runs them in
//! one `BEGIN IMMEDIATE … COMMIT`, and answers each caller only after that commit
//! returned: a write is still durable when its call returns, and concurrent writers share
//! the sync. A lone write (the common case of one conversation) is a single statement in
//! autocommit mode: one call into SQLite, one sync.
//!
//! The writer is a plain thread that owns a `rusqlite` connection and calls SQLite
//! directly. An async sqlx connection runs its statements on a worker thread of its own,
//! so each write would cross three threads (caller, writer, sqlx worker) and back; the
//! futex hand-offs cost more than the statement (measured: 71% of an append's time was in
//! the kernel, 2,230 appends/s against 3,000 wanted). Both drivers link the same
//! `libsqlite3-sys`, and the statements and the code that runs them live here once
//! ([`apply`]) for both: the writer thread's connection, and a connection sqlx holds
//! (writes inside a caller's transaction, and in-memory databases, whose one connection
//! is the pool's), through a `rusqlite` view of it ([`within`]).
//!
//! The writer keeps working whatever runtime the callers use and whatever happens to a
//! caller's future: a caller that gives up still has its write committed or not, exactly
//! as it would without batching. The thread ends when the last handle to the store is
//! dropped.
//!
//! Writes under a run's lease (a worker's or a chat server's: its messages, statuses and
//! run state, and the run's completion) come here too, as [`Write::Leased`]: the lease is
//! checked and the write made in the same transaction, so the run cannot change in
//! between (SQLite has one writer). A lease that is no longer live fails that write
//! alone and changes nothing. Before, each was a sqlx transaction of four round trips
//! (begin, lease check, write, commit), which made a chat served by `llmchain-web` spend
//! most of its CPU switching threads.
//!
//! A claim, and a conversation created with its first messages, join the batch too
//! ([`GroupCommitter::transaction`]): their statements run in the batch's transaction
//! under a savepoint of their own, so a claim that fails (a run busy elsewhere) undoes
//! only itself, and a chat turn's first step shares a sync with the other chats' writes
//! instead of costing one of its own. Reads still run between batches, on their own.
//!
//! If a statement of a batch fails (an SQL error such as a status for an unknown
//! conversation, not an append to one, which simply answers `ConversationNotFound`), the
//! transaction rolls back and each request of the batch is retried on its own, so one bad
//! write cannot fail the others.

use std::path::Path;

use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use sqlx::sqlite::SqliteConnection;
use tokio::sync::{mpsc, oneshot};

use crate::error::{StoreError, StoreResult};
use crate::lease::{self, LeaseRow};
use crate::model::{Lease, now_ms};

/// At most this many requests share one transaction.
pub(crate) const MAX_BATCH: usize = 256;

/// Requests waiting for the writer beyond this many make callers wait to enqueue.
const QUEUE: usize = 4 * MAX_BATCH;

/// The number the conversation's next message takes (no row when the conversation does
/// not exist). Parameter: the conversation.
pub(crate) const NEXT_SEQ: &str = "SELECT next_seq FROM conversations WHERE id = ?1";

/// Inserts one message under a number read with [`NEXT_SEQ`] in the same write
/// transaction (SQLite has one writer: nothing takes the number in between); the
/// schema's trigger advances `next_seq`. A separate read rather than `INSERT … SELECT …
/// RETURNING`: SQLite buffers a `RETURNING` row in a temporary b-tree, opened and freed
/// per statement, which cost more than the insert itself. Parameters: conversation,
/// number, body, time stamp.
pub(crate) const INSERT_MESSAGE: &str =
    "INSERT INTO messages (conversation_id, seq, body, created_at) VALUES (?1, ?2, ?3, ?4)";

/// Records a tool call's status. Parameters: conversation, call id, status, time stamp.
pub(crate) const SET_STATUS: &str = "INSERT INTO tool_calls (conversation_id, call_id, status, updated_at) \
     VALUES (?1, ?2, ?3, ?4) \
     ON CONFLICT (conversation_id, call_id) DO UPDATE SET status = excluded.status, updated_at = excluded.updated_at";

/// Reads a run's lease fields for [`lease::verdict`]. Parameter: the run.
pub(crate) const LEASE_ROW: &str =
    "SELECT conversation_id, status, lease_owner, lease_expires_at, epoch FROM runs WHERE id = ?1";

use crate::dialect::{COMPLETE_RUN, RUN_STATE};

/// A write made under a run's lease, to the run's conversation or the run itself.
#[derive(Debug)]
pub(crate) enum LeasedWrite {
    /// Append messages (serialised, at least one) to the run's conversation; answers the
    /// first sequence number.
    Append {
        /// The storage-format JSON of each message.
        bodies: Vec<String>,
    },
    /// Record a tool call's status in the run's conversation; answers 0.
    Status {
        /// The tool call.
        call_id: String,
        /// The status's storage name.
        status: &'static str,
    },
    /// Save the run's state (JSON); answers 0.
    RunState(String),
    /// Finish the run with `status` and its state (JSON), releasing the lease; answers 0.
    Complete {
        /// The run's new status's storage name.
        status: &'static str,
        /// The state JSON.
        state: String,
    },
}

/// One write the writer thread performs.
#[derive(Debug)]
pub(crate) enum Write {
    /// Append messages (already serialised, at least one: an empty list answers
    /// `ConversationNotFound`) to a conversation; answers the first sequence number.
    Append {
        /// The conversation.
        conversation: String,
        /// The storage-format JSON of each message.
        bodies: Vec<String>,
        /// The time stamp (ms since the Unix epoch).
        at: i64,
    },
    /// Record a tool call's execution status; answers 0.
    Status {
        /// The conversation.
        conversation: String,
        /// The tool call.
        call_id: String,
        /// The status's storage name.
        status: &'static str,
        /// The time stamp (ms since the Unix epoch).
        at: i64,
    },
    /// A write under `lease`, checked in the same transaction: fails with `LeaseLost`,
    /// `RunCancelled` or `RunNotFound` (changing nothing) unless the lease is live.
    Leased {
        /// The lease the writer holds.
        lease: Lease,
        /// What it writes.
        write: LeasedWrite,
        /// The time stamp (ms since the Unix epoch).
        at: i64,
    },
    /// Several writes under `lease`, in order, after one check of it; answers the number
    /// the first `Append` of them answered, or 0.
    LeasedMany {
        /// The lease the writer holds.
        lease: Lease,
        /// What it writes.
        writes: Vec<LeasedWrite>,
        /// The time stamp (ms since the Unix epoch).
        at: i64,
    },
}

impl Write {
    /// The statement this write runs, with its parameters, once the lease named
    /// `conversation`.
    fn leased_step<'a>(
        write: &'a LeasedWrite,
        conversation: &'a str,
        at: i64,
        run: &'a str,
    ) -> Step<'a> {
        match write {
            LeasedWrite::Append { bodies } => Step::Append {
                conversation,
                bodies,
                at,
            },
            LeasedWrite::Status { call_id, status } => {
                Step::status(conversation, call_id, status, at)
            }
            LeasedWrite::RunState(state) => Step::Execute(
                RUN_STATE,
                vec![Param::Text(state), Param::Int(at), Param::Text(run)],
            ),
            LeasedWrite::Complete { status, state } => Step::Execute(
                COMPLETE_RUN,
                vec![
                    Param::Text(status),
                    Param::Text(state),
                    Param::Int(at),
                    Param::Text(run),
                ],
            ),
        }
    }
}

/// A statement parameter.
enum Param<'a> {
    Text(&'a str),
    Int(i64),
}

/// What a write does once its lease (if any) passed.
enum Step<'a> {
    /// Append each body to `conversation` ([`NEXT_SEQ`], [`INSERT_MESSAGE`]); answers the
    /// first number.
    Append {
        conversation: &'a str,
        bodies: &'a [String],
        at: i64,
    },
    /// One statement; answers 0.
    Execute(&'static str, Vec<Param<'a>>),
}

impl<'a> Step<'a> {
    /// [`SET_STATUS`] for a call of `conversation`.
    fn status(conversation: &'a str, call_id: &'a str, status: &'a str, at: i64) -> Step<'a> {
        Step::Execute(
            SET_STATUS,
            vec![
                Param::Text(conversation),
                Param::Text(call_id),
                Param::Text(status),
                Param::Int(at),
            ],
        )
    }
}

/// One part of a batch: its statements run in the batch's transaction, and it answers
/// its caller once that transaction committed, or with the error that stopped it.
trait Part: Send {
    /// Runs the part's statements on `conn` (in the batch's open transaction, or alone).
    /// An `Err` is an SQL failure: the transaction must roll back. The part's own
    /// outcome (a lease no longer held, a conversation that does not exist) is kept for
    /// [`Part::answer`].
    fn apply(&mut self, conn: &Connection) -> rusqlite::Result<()>;
    /// Whether the part is a single statement, atomic in autocommit mode.
    fn single(&self) -> bool {
        false
    }
    /// Whether its own outcome is a failure: alone, its transaction is rolled back.
    fn failed(&self) -> bool;
    /// Answers its caller: its outcome, or `error` when its transaction did not commit.
    fn answer(self: Box<Self>, error: Option<StoreError>);
}

/// A [`Write`] and its caller.
struct Request {
    write: Write,
    outcome: Option<StoreResult<i64>>,
    reply: oneshot::Sender<StoreResult<i64>>,
}

impl Part for Request {
    fn apply(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        self.outcome = Some(apply(conn, &self.write)?);
        Ok(())
    }

    fn single(&self) -> bool {
        match &self.write {
            Write::Append { bodies, .. } => bodies.len() <= 1,
            Write::Status { .. } => true,
            // The lease check and the write(s).
            Write::Leased { .. } | Write::LeasedMany { .. } => false,
        }
    }

    fn failed(&self) -> bool {
        matches!(self.outcome, Some(Err(_)))
    }

    fn answer(self: Box<Self>, error: Option<StoreError>) {
        // A caller that gave up no longer listens; its write stands.
        let _ = self.reply.send(answer(self.outcome, error));
    }
}

/// A transaction's statements (a claim, a conversation created with its messages) run as
/// a part of a batch, under a savepoint of their own: a failure of theirs undoes only
/// what they did. `run` may be called again (a batch that failed is retried part by
/// part), so it reads what it writes from its captures and does not consume them.
struct Txn<T, F> {
    run: F,
    outcome: Option<StoreResult<T>>,
    reply: oneshot::Sender<StoreResult<T>>,
}

impl<T, F> Part for Txn<T, F>
where
    T: Send,
    F: FnMut(&Connection) -> StoreResult<T> + Send,
{
    fn apply(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        conn.prepare_cached("SAVEPOINT part")?.execute([])?;
        // The caller's code (an `Opening`) runs on the writer thread: a panic of its
        // must fail its part, not stop the thread every chat writes through.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (self.run)(conn)))
            .unwrap_or_else(|panic| {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "no message".into());
                Err(StoreError::Panicked(what))
            });
        if outcome.is_err() {
            conn.prepare_cached("ROLLBACK TO part")?.execute([])?;
        }
        conn.prepare_cached("RELEASE part")?.execute([])?;
        self.outcome = Some(outcome);
        Ok(())
    }

    fn failed(&self) -> bool {
        matches!(self.outcome, Some(Err(_)))
    }

    fn answer(self: Box<Self>, error: Option<StoreError>) {
        let _ = self.reply.send(answer(self.outcome, error));
    }
}

/// What a part answers: the error that stopped its transaction, else its own outcome.
fn answer<T>(outcome: Option<StoreResult<T>>, error: Option<StoreError>) -> StoreResult<T> {
    match (error, outcome) {
        (Some(e), _) => Err(e),
        (None, Some(outcome)) => outcome,
        (None, None) => Err(StoreError::WriterStopped),
    }
}

/// Work that needs a connection to itself between batches (a read): the writer runs it
/// on its connection. It answers its caller itself.
pub(crate) type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// What the writer thread is sent.
enum Work {
    Part(Box<dyn Part>),
    Job(Job),
}

/// The handle to a writer thread; cloning it shares the thread.
#[derive(Debug, Clone)]
pub(crate) struct GroupCommitter {
    queue: mpsc::Sender<Work>,
}

impl GroupCommitter {
    /// Opens its own connection to the database file at `path` (which must exist, in WAL
    /// mode, with its schema) with `synchronous` (`FULL` or `NORMAL`), and starts the
    /// writer thread that owns it.
    pub(crate) fn start(path: &Path, synchronous: &'static str) -> StoreResult<GroupCommitter> {
        let conn = open(path, synchronous)?;
        let (queue, requests) = mpsc::channel(QUEUE);
        std::thread::Builder::new()
            .name("llmchain-sqlite-writer".into())
            .spawn(move || run(conn, requests))
            .map_err(|cause| StoreError::Io {
                context: "cannot start the SQLite writer thread".into(),
                cause,
            })?;
        Ok(GroupCommitter { queue })
    }

    /// Performs `write`; returns once the transaction holding it committed.
    pub(crate) async fn write(&self, write: Write) -> StoreResult<i64> {
        self.ask(|reply| {
            Work::Part(Box::new(Request {
                write,
                outcome: None,
                reply,
            }))
        })
        .await
    }

    /// Runs `run`'s statements as a part of a batch (see [`Txn`]); returns once the
    /// transaction holding them committed. Its changes are undone if it fails.
    pub(crate) async fn transaction<T: Send + 'static>(
        &self,
        run: impl FnMut(&Connection) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        self.ask(|reply| {
            Work::Part(Box::new(Txn {
                run,
                outcome: None,
                reply,
            }))
        })
        .await
    }

    /// Runs `job` on the writer's connection, between batches: one hop to the thread and
    /// back for the whole job, whatever number of statements it runs. The job opens and
    /// commits its own transaction.
    pub(crate) async fn job<T: Send + 'static>(
        &self,
        job: impl FnOnce(&mut Connection) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        self.ask(|reply: oneshot::Sender<StoreResult<T>>| {
            Work::Job(Box::new(move |conn| {
                let _ = reply.send(job(conn));
            }))
        })
        .await
    }

    /// Sends the writer the work `make` builds around the reply's sender, and waits for
    /// the answer.
    async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<StoreResult<T>>) -> Work,
    ) -> StoreResult<T> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send(make(reply))
            .await
            .map_err(|_| StoreError::WriterStopped)?;
        answer.await.map_err(|_| StoreError::WriterStopped)?
    }
}

fn open(path: &Path, synchronous: &'static str) -> StoreResult<Connection> {
    // The connection stays on one thread: SQLite's own per-connection mutex is not needed.
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(crate::sqlite::BUSY_TIMEOUT)?;
    // `synchronous` and `foreign_keys` are per connection; WAL is a property of the file.
    conn.pragma_update(None, "synchronous", synchronous)?;
    conn.pragma_update(None, "foreign_keys", true)?;
    Ok(conn)
}

fn run(mut conn: Connection, mut work: mpsc::Receiver<Work>) {
    let mut batch: Vec<Box<dyn Part>> = Vec::with_capacity(MAX_BATCH);
    // A job met while gathering a batch, run after that batch (in arrival order).
    let mut next = None;
    while let Some(first) = next.take().or_else(|| work.blocking_recv()) {
        match first {
            Work::Job(job) => {
                job(&mut conn);
                continue;
            }
            Work::Part(part) => batch.push(part),
        }
        while batch.len() < MAX_BATCH {
            match work.try_recv() {
                Ok(Work::Part(part)) => batch.push(part),
                Ok(job) => {
                    next = Some(job);
                    break;
                }
                Err(_) => break,
            }
        }
        commit(&mut conn, &mut batch);
    }
}

/// Commits a batch and answers each part: one part on its own, several in one
/// transaction.
fn commit(conn: &mut Connection, batch: &mut Vec<Box<dyn Part>>) {
    if batch.len() > 1 && together(conn, batch).is_ok() {
        for part in batch.drain(..) {
            part.answer(None);
        }
        return;
    }
    // One part, or a batch rolled back: each on its own, so only a faulty one fails.
    for mut part in batch.drain(..) {
        let error = alone(conn, part.as_mut()).err();
        part.answer(error);
    }
}

/// Runs a batch in one transaction. `BEGIN IMMEDIATE` holds the write lock from the
/// start, so each append's number stays ours. Dropping the transaction on an error rolls
/// it back.
fn together(conn: &mut Connection, batch: &mut [Box<dyn Part>]) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    for part in batch.iter_mut() {
        part.apply(&tx)?;
    }
    tx.commit()
}

/// Runs one part in its own transaction, committed unless the part failed; an error is
/// what stopped the transaction. A single statement needs no explicit one (in autocommit
/// mode a statement, with its triggers, is atomic and commits when done).
fn alone(conn: &mut Connection, part: &mut dyn Part) -> StoreResult<()> {
    if part.single() {
        return Ok(part.apply(conn)?);
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    part.apply(&tx)?;
    if !part.failed() {
        tx.commit()?;
    }
    Ok(())
}

/// Runs a write's statements. The outer error is an SQL failure (the transaction must be
/// rolled back); the inner one is the write's own outcome (a missing conversation), which
/// changed nothing.
pub(crate) fn apply(conn: &Connection, write: &Write) -> rusqlite::Result<StoreResult<i64>> {
    let (lease, writes, at) = match write {
        Write::Append {
            conversation,
            bodies,
            at,
        } => {
            let step = Step::Append {
                conversation,
                bodies,
                at: *at,
            };
            return run_step(conn, step);
        }
        Write::Status {
            conversation,
            call_id,
            status,
            at,
        } => return run_step(conn, Step::status(conversation, call_id, status, *at)),
        Write::Leased { lease, write, at } => (lease, std::slice::from_ref(write), at),
        Write::LeasedMany { lease, writes, at } => (lease, writes.as_slice(), at),
    };
    let row: Option<LeaseRow> = conn
        .prepare_cached(LEASE_ROW)?
        .query_row(params![lease.run_id], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .optional()?;
    let conversation = match lease::verdict(row, lease, now_ms()) {
        Ok(c) => c,
        Err(e) => return Ok(Err(e)),
    };
    // Once the lease named an existing conversation, only an SQL error (which fails
    // the whole transaction) can fail one of the writes.
    let mut first = None;
    for w in writes {
        let step = Write::leased_step(w, &conversation, *at, &lease.run_id);
        let n = match run_step(conn, step)? {
            Ok(n) => n,
            Err(e) => return Ok(Err(e)),
        };
        if let LeasedWrite::Append { .. } = w {
            first.get_or_insert(n);
        }
    }
    Ok(Ok(first.unwrap_or(0)))
}

/// Appends `bodies` (at least one) to `conversation` ([`INSERT_MESSAGE`]); answers the first
/// number, or `ConversationNotFound`.
pub(crate) fn append(
    conn: &Connection,
    conversation: &str,
    bodies: &[String],
    at: i64,
) -> rusqlite::Result<StoreResult<i64>> {
    run_step(
        conn,
        Step::Append {
            conversation,
            bodies,
            at,
        },
    )
}

fn run_step(conn: &Connection, step: Step<'_>) -> rusqlite::Result<StoreResult<i64>> {
    match step {
        Step::Append {
            conversation,
            bodies,
            at,
        } => {
            let first: Option<i64> = conn
                .prepare_cached(NEXT_SEQ)?
                .query_row(params![conversation], |row| row.get(0))
                .optional()?;
            let (Some(first), false) = (first, bodies.is_empty()) else {
                return Ok(Err(StoreError::ConversationNotFound(conversation.into())));
            };
            let mut insert = conn.prepare_cached(INSERT_MESSAGE)?;
            for (seq, body) in (first..).zip(bodies) {
                insert.execute(params![conversation, seq, body, at])?;
            }
            Ok(Ok(first))
        }
        Step::Execute(sql, values) => {
            let mut statement = conn.prepare_cached(sql)?;
            for (i, value) in values.iter().enumerate() {
                match value {
                    Param::Text(t) => statement.raw_bind_parameter(i + 1, t)?,
                    Param::Int(n) => statement.raw_bind_parameter(i + 1, n)?,
                }
            }
            statement.raw_execute()?;
            Ok(Ok(0))
        }
    }
}

/// Performs one write on a connection sqlx holds, inside the caller's transaction (or in
/// autocommit mode if the write is a single statement): writes that belong to a larger
/// transaction, and every write of an in-memory database. The statements are
/// [`apply`]'s, run through a `rusqlite` view of the connection, so each write is written
/// once for both kinds of connection.
pub(crate) async fn within(conn: &mut SqliteConnection, write: &Write) -> StoreResult<i64> {
    let mut handle = conn.lock_handle().await?;
    crate::direct::on_sqlx_connection(&mut handle, |c| apply(c, write)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{NewConversation, SqliteStore, Store};
    use std::time::Duration;

    type Answer = oneshot::Receiver<StoreResult<i64>>;

    fn request(write: Write) -> (Box<dyn Part>, Answer) {
        let (reply, answer) = oneshot::channel();
        let part = Request {
            write,
            outcome: None,
            reply,
        };
        (Box::new(part), answer)
    }

    /// What each part of `batch` answered.
    fn answers(answers: Vec<Answer>) -> Vec<StoreResult<i64>> {
        answers
            .into_iter()
            .map(|mut a| a.try_recv().expect("answered"))
            .collect()
    }

    /// Runs `batch` in one transaction, which must commit; what each part answered.
    fn together_ok(
        conn: &mut Connection,
        batch: impl IntoIterator<Item = (Box<dyn Part>, Answer)>,
    ) -> Vec<StoreResult<i64>> {
        let (mut parts, replies): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
        together(conn, &mut parts).expect("one transaction");
        for part in parts {
            part.answer(None);
        }
        answers(replies)
    }

    /// Commits `batch` as the writer does; what each part answered.
    fn committed(
        conn: &mut Connection,
        batch: impl IntoIterator<Item = (Box<dyn Part>, Answer)>,
    ) -> Vec<StoreResult<i64>> {
        let (mut parts, replies): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
        commit(conn, &mut parts);
        answers(replies)
    }

    fn append(conversation: &str, bodies: &[&str]) -> (Box<dyn Part>, Answer) {
        request(Write::Append {
            conversation: conversation.into(),
            bodies: bodies.iter().map(|b| b.to_string()).collect(),
            at: 1,
        })
    }

    fn status(conversation: &str, call_id: &str, status: &'static str) -> (Box<dyn Part>, Answer) {
        request(Write::Status {
            conversation: conversation.into(),
            call_id: call_id.into(),
            status,
            at: 1,
        })
    }

    fn rows(conn: &Connection, sql: &'static str) -> Vec<(String, String)> {
        let mut statement = conn.prepare(sql).unwrap();
        statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[tokio::test]
    async fn a_batch_numbers_each_append_and_a_bad_write_fails_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let store = SqliteStore::open(&path).await.unwrap();
        for id in ["a", "b"] {
            store
                .create_conversation(NewConversation::default().with_id(id))
                .await
                .unwrap();
        }
        let mut conn = open(&path, "FULL").unwrap();
        let m = |n: u8| format!("{{\"role\":\"user\",\"content\":\"{n} \\\" é\"}}");
        let (m0, m1, m2, m3) = (m(0), m(1), m(2), m(3));
        // One transaction: appends to two conversations, one to a missing one, statuses.
        let batch = [
            append("a", &[&m0]),
            append("b", &[&m1, &m2]),
            append("missing", &[&m3]),
            status("a", "c1", "executing"),
            append("a", &[&m3]),
            status("a", "c1", "completed"),
        ];
        let results = together_ok(&mut conn, batch);
        let got: Vec<Option<i64>> = results.iter().map(|r| r.as_ref().ok().copied()).collect();
        assert_eq!(got, [Some(0), Some(0), None, Some(0), Some(1), Some(0)]);
        assert!(matches!(
            results[2],
            Err(StoreError::ConversationNotFound(_))
        ));
        // A status for an unknown conversation breaks the transaction: each write is then
        // retried alone, and only that one fails.
        let batch = [
            append("b", &[&m3]),
            status("missing", "c9", "failed"),
            append("a", &[&m0]),
        ];
        let results = committed(&mut conn, batch);
        assert_eq!(results[0].as_ref().ok(), Some(&2));
        assert!(matches!(results[1], Err(StoreError::Sqlite(_))));
        assert_eq!(results[2].as_ref().ok(), Some(&2));

        let messages = rows(
            &conn,
            "SELECT conversation_id || ':' || seq, body FROM messages ORDER BY 1",
        );
        let expected = [
            ("a:0", &m0),
            ("a:1", &m3),
            ("a:2", &m0),
            ("b:0", &m1),
            ("b:1", &m2),
            ("b:2", &m3),
        ];
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(messages, expected, "bodies are stored byte for byte");
        let counters = rows(
            &conn,
            "SELECT id, CAST(next_seq AS TEXT) FROM conversations ORDER BY id",
        );
        assert_eq!(
            counters,
            [("a".into(), "3".into()), ("b".into(), "3".into())]
        );
        let statuses = rows(&conn, "SELECT call_id, status FROM tool_calls");
        assert_eq!(statuses, [("c1".into(), "completed".into())]);
        // The store reads what the writer wrote.
        let a = store.get_conversation("a").await.unwrap().unwrap();
        assert_eq!(a.conversation.messages.len(), 3);
    }

    #[tokio::test]
    async fn leased_writes_check_their_lease_in_the_batch_and_a_lost_one_fails_alone() {
        use crate::RunState;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let store = SqliteStore::open(&path).await.unwrap();
        let id = store
            .create_conversation(NewConversation::default())
            .await
            .unwrap();
        let run = store
            .claim_conversation(&id, "w", Duration::from_secs(60), &RunState::default())
            .await
            .unwrap();
        let live = run.lease().unwrap();
        let stale = Lease {
            epoch: live.epoch - 1,
            ..live.clone()
        };
        let leased = |lease: &Lease, write| {
            request(Write::Leased {
                lease: lease.clone(),
                write,
                at: 7,
            })
        };
        let body = r#"{"role":"user","content":"hi"}"#.to_owned();
        let mut conn = open(&path, "FULL").unwrap();
        let batch = [
            leased(
                &live,
                LeasedWrite::Append {
                    bodies: vec![body.clone(), body.clone()],
                },
            ),
            leased(
                &stale,
                LeasedWrite::Append {
                    bodies: vec![body.clone()],
                },
            ),
            leased(
                &live,
                LeasedWrite::Status {
                    call_id: "c1".into(),
                    status: "completed",
                },
            ),
            leased(&stale, LeasedWrite::RunState("{}".into())),
            leased(
                &live,
                LeasedWrite::RunState(r#"{"status":"running"}"#.into()),
            ),
        ];
        let results = together_ok(&mut conn, batch);
        assert_eq!(results[0].as_ref().ok(), Some(&0));
        assert!(
            matches!(results[1], Err(StoreError::LeaseLost { .. })),
            "{:?}",
            results[1]
        );
        assert_eq!(results[2].as_ref().ok(), Some(&0));
        assert!(matches!(results[3], Err(StoreError::LeaseLost { .. })));
        assert_eq!(results[4].as_ref().ok(), Some(&0));
        let stored = store.get_conversation(&id).await.unwrap().unwrap();
        assert_eq!(
            stored.conversation.messages.len(),
            2,
            "the stale append wrote nothing"
        );
        let statuses = rows(&conn, "SELECT call_id, status FROM tool_calls");
        assert_eq!(statuses, [("c1".into(), "completed".into())]);
        // Completing releases the lease: a write under it afterwards fails and changes
        // nothing; alone, outside a batch, the same.
        let complete = committed(
            &mut conn,
            [request(Write::Leased {
                lease: live.clone(),
                write: LeasedWrite::Complete {
                    status: "done",
                    state: "{}".into(),
                },
                at: 8,
            })],
        );
        assert_eq!(complete[0].as_ref().ok(), Some(&0));
        let late = committed(
            &mut conn,
            [request(Write::Leased {
                lease: live.clone(),
                write: LeasedWrite::Append { bodies: vec![body] },
                at: 9,
            })],
        );
        assert!(
            matches!(late[0], Err(StoreError::LeaseLost { .. })),
            "{late:?}"
        );
        let run = store.get_run(&run.id).await.unwrap().unwrap();
        assert_eq!(run.state.status, crate::RunStatus::Done);
        assert_eq!(
            store
                .get_conversation(&id)
                .await
                .unwrap()
                .unwrap()
                .conversation
                .messages
                .len(),
            2
        );
    }

    /// A store in a new file holding conversation `a` (the directory lives as long as
    /// the first element).
    async fn with_conversation_a() -> (tempfile::TempDir, std::path::PathBuf, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let store = SqliteStore::open(&path).await.unwrap();
        store
            .create_conversation(NewConversation::default().with_id("a"))
            .await
            .unwrap();
        (dir, path, store)
    }

    #[tokio::test]
    async fn a_transaction_in_a_batch_that_fails_undoes_only_itself() {
        let (_dir, path, store) = with_conversation_a().await;
        let mut conn = open(&path, "FULL").unwrap();
        let txn = |title: &'static str, fail: bool| {
            let (reply, answer) = oneshot::channel();
            let part = Txn {
                run: move |c: &Connection| -> StoreResult<i64> {
                    c.execute(
                        "UPDATE conversations SET title = ?1 WHERE id = 'a'",
                        [title],
                    )?;
                    if fail {
                        return Err(StoreError::ConversationExists("a".into()));
                    }
                    Ok(7)
                },
                outcome: None,
                reply,
            };
            (Box::new(part) as Box<dyn Part>, answer)
        };
        let m = r#"{"role":"user","content":"hi"}"#;
        let results = committed(
            &mut conn,
            [txn("kept", false), append("a", &[m]), txn("undone", true)],
        );
        assert_eq!(results[0].as_ref().ok(), Some(&7));
        assert_eq!(results[1].as_ref().ok(), Some(&0));
        assert!(matches!(results[2], Err(StoreError::ConversationExists(_))));
        let title: String = conn
            .query_row("SELECT title FROM conversations WHERE id = 'a'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(
            title, "kept",
            "the failed part's change is rolled back, the rest stays"
        );
        let stored = store.get_conversation("a").await.unwrap().unwrap();
        assert_eq!(stored.conversation.messages.len(), 1);
        // Alone, a failed part leaves nothing either.
        let results = committed(&mut conn, [txn("alone", true)]);
        assert!(results[0].is_err());
        let title: String = conn
            .query_row("SELECT title FROM conversations WHERE id = 'a'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(title, "kept");
    }

    #[tokio::test]
    async fn a_transaction_that_panics_fails_alone_and_the_writer_goes_on() {
        let (_dir, path, _store) = with_conversation_a().await;
        let writer = GroupCommitter::start(&path, "FULL").unwrap();
        let panics = writer.transaction(|c: &Connection| -> StoreResult<()> {
            c.execute("UPDATE conversations SET title = 'no' WHERE id = 'a'", [])?;
            panic!("the opening broke");
        });
        let m = r#"{"role":"user","content":"hi"}"#.to_owned();
        let appends = writer.write(Write::Append {
            conversation: "a".into(),
            bodies: vec![m],
            at: 1,
        });
        let (panicked, appended) = tokio::join!(panics, appends);
        assert!(
            matches!(&panicked, Err(StoreError::Panicked(m)) if m == "the opening broke"),
            "{panicked:?}"
        );
        assert_eq!(appended.unwrap(), 0);
        // The thread is alive, and the panicking part's change was undone.
        let title: Option<String> = writer
            .transaction(|c: &Connection| {
                Ok(
                    c.query_row("SELECT title FROM conversations WHERE id = 'a'", [], |r| {
                        r.get(0)
                    })?,
                )
            })
            .await
            .unwrap();
        assert_eq!(title, None);
    }
}

//! [`StoreError`]: every failure of a store operation.

/// A store operation that failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database was written by a newer llmchain-store: upgrade llmchain to open it.
    #[error(
        "the database schema is version {found}, newer than version {supported} that this llmchain-store supports; upgrade llmchain to open it"
    )]
    SchemaTooNew {
        /// The version found in the database.
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },
    /// No conversation with this id.
    #[error("no conversation with id {0:?}")]
    ConversationNotFound(String),
    /// A conversation with this id already exists.
    #[error("a conversation with id {0:?} already exists")]
    ConversationExists(String),
    /// No message at this sequence number.
    #[error("conversation {conversation:?} has no message number {seq}")]
    MessageNotFound {
        /// The conversation.
        conversation: String,
        /// The sequence number asked for.
        seq: i64,
    },
    /// No run with this id.
    #[error("no run with id {0:?}")]
    RunNotFound(String),
    /// The worker no longer holds the run's lease (it expired, or another worker claimed
    /// the run): stop working on it.
    #[error("worker {worker:?} no longer holds the lease on run {run:?}")]
    LeaseLost {
        /// The run.
        run: String,
        /// The worker that asked.
        worker: String,
    },
    /// The run was cancelled ([`Store::cancel_run`](crate::Store::cancel_run)): stop
    /// working on it.
    #[error("run {run:?} was cancelled")]
    RunCancelled {
        /// The run.
        run: String,
    },
    /// The conversation already has an open run (pending, running or paused): a
    /// conversation is advanced by one run at a time.
    #[error(
        "conversation {conversation:?} already has an open run {run:?} ({status}); wait for it, or cancel it first"
    )]
    RunAlreadyOpen {
        /// The conversation.
        conversation: String,
        /// The open run.
        run: String,
        /// Its status.
        status: String,
    },
    /// Another process holds a live lease on the conversation's run.
    #[error(
        "conversation {conversation:?} is being run by {owner:?} (run {run:?}, lease for {remaining_ms} ms more); wait for it to finish, or cancel the run"
    )]
    RunBusy {
        /// The conversation.
        conversation: String,
        /// The run.
        run: String,
        /// Who holds its lease.
        owner: String,
        /// How long the lease still runs, in milliseconds.
        remaining_ms: i64,
    },
    /// The conversation's open run was queued for a worker: an interactive process
    /// (`run -c`, `resume`) does not take it over.
    #[error(
        "conversation {conversation:?} has a queued run {run:?} ({status}) that a worker runs; wait for it{}, or cancel it with `llmchain runs cancel {run}`",
        if status == "paused" { " (it waits for review: `llmchain reviews list`)" } else { "" }
    )]
    QueuedRunOpen {
        /// The conversation.
        conversation: String,
        /// The queued run.
        run: String,
        /// Its status.
        status: String,
    },
    /// No review with this id.
    #[error("no review with id {0:?}")]
    ReviewNotFound(String),
    /// The review was already decided (or its run cancelled): a decision is taken once,
    /// for a call that is still waiting.
    #[error(
        "review {review:?} (call {call_id} of conversation {conversation}) is {status}, not pending: it cannot be decided again"
    )]
    ReviewNotPending {
        /// The review.
        review: String,
        /// Its call.
        call_id: String,
        /// Its conversation.
        conversation: String,
        /// Its status.
        status: String,
    },
    /// The run is not in a state that allows this (e.g. retrying a run that is pending).
    #[error("run {run:?} is {status}: {action} is not possible")]
    RunState {
        /// The run.
        run: String,
        /// Its status.
        status: String,
        /// What was asked.
        action: &'static str,
    },
    /// A stored document could not be read back.
    #[error("stored data of conversation {conversation:?} is corrupt at {location}: {message}")]
    Corrupt {
        /// The conversation.
        conversation: String,
        /// Where, e.g. `message seq 12`.
        location: String,
        /// What is wrong.
        message: String,
    },
    /// The database URL is not one this crate understands.
    #[error(
        "unsupported database URL {0:?}: use sqlite://PATH (optionally ?synchronous=normal), sqlite::memory: or postgres://USER@HOST/DB"
    )]
    BadUrl(String),
    /// The user's data directory could not be determined (neither `XDG_DATA_HOME` nor `HOME` is set).
    #[error("cannot find the data directory: set XDG_DATA_HOME or HOME, or pass a database URL")]
    NoDataDir,
    /// A value could not be serialised.
    #[error("cannot serialise {what}: {cause}")]
    Serialize {
        /// What was being serialised.
        what: &'static str,
        /// The cause (its text is in this error's; not repeated as `source()`).
        cause: serde_json::Error,
    },
    /// An I/O failure outside the database driver (e.g. creating the data directory).
    #[error("{context}: {cause}")]
    Io {
        /// What was being done.
        context: String,
        /// The cause (its text is in this error's; not repeated as `source()`).
        cause: std::io::Error,
    },
    /// A message too large for the database to keep whole (TEXT holds at most about
    /// 1 GB in SQLite and PostgreSQL): refused before anything is written.
    #[error(
        "the message is {bytes} bytes as stored, more than the {limit} bytes a database keeps in one value; nothing was written"
    )]
    MessageTooLarge {
        /// Its size in the storage format.
        bytes: usize,
        /// The most a store keeps ([`MAX_MESSAGE_BYTES`]).
        limit: usize,
    },
    /// A conversation that holds as many messages as its application allows was sent
    /// another: nothing was written.
    #[error("conversation {conversation} holds {max} messages, the most it may; start another")]
    ConversationFull {
        /// The conversation.
        conversation: String,
        /// The most it may hold.
        max: usize,
    },
    /// Code the store ran for its caller inside a transaction (an
    /// [`Opening`](crate::Opening)) panicked: what it did was undone, and the store goes on.
    #[error("code run inside the store's transaction panicked ({0}); what it did was undone")]
    Panicked(String),
    /// The SQLite writer thread is gone (it could not keep its connection): reopen the
    /// store.
    #[error("the SQLite writer thread stopped; reopen the store")]
    WriterStopped,
    /// The database driver failed (connection, SQL, constraint).
    #[error("database error: {0}")]
    Database(sqlx::Error),
    /// SQLite failed under the writer thread, which calls it directly (SQL, constraint,
    /// disk full, the database busy for longer than the 30 s busy timeout).
    #[error("SQLite error: {0}")]
    Sqlite(rusqlite::Error),
}

// The convention of `std::error::Error`: a cause is shown in this error's own text or
// returned from `source()`, never both (a reporter would print it twice). The store's
// errors show it, so they return none.
impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        StoreError::Database(e)
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError::Sqlite(e)
    }
}

impl StoreError {
    /// A short, stable name of this failure (`conversation_not_found`, `lease_lost`,
    /// `database`…), for scripts (the CLI's `--json` `error.type`) and telemetry.
    pub fn error_type(&self) -> &'static str {
        match self {
            StoreError::SchemaTooNew { .. } => "schema_too_new",
            StoreError::ConversationNotFound(_) => "conversation_not_found",
            StoreError::ConversationExists(_) => "conversation_exists",
            StoreError::MessageNotFound { .. } => "message_not_found",
            StoreError::RunNotFound(_) => "run_not_found",
            StoreError::LeaseLost { .. } => "lease_lost",
            StoreError::RunCancelled { .. } => "run_cancelled",
            StoreError::RunAlreadyOpen { .. } => "run_already_open",
            StoreError::RunBusy { .. } => "run_busy",
            StoreError::QueuedRunOpen { .. } => "queued_run_open",
            StoreError::ReviewNotFound(_) => "review_not_found",
            StoreError::ReviewNotPending { .. } => "review_not_pending",
            StoreError::RunState { .. } => "run_state",
            StoreError::Corrupt { .. } => "corrupt",
            StoreError::BadUrl(_) => "bad_url",
            StoreError::NoDataDir => "no_data_dir",
            StoreError::Serialize { .. } => "serialize",
            StoreError::Io { .. } => "io",
            StoreError::MessageTooLarge { .. } => "message_too_large",
            StoreError::ConversationFull { .. } => "conversation_full",
            StoreError::Panicked(_) => "panicked",
            StoreError::WriterStopped => "writer_stopped",
            StoreError::Database(_) | StoreError::Sqlite(_) => "database",
        }
    }

    /// `true` for [`LeaseLost`](Self::LeaseLost) and [`RunCancelled`](Self::RunCancelled):
    /// the worker must stop working on the run and write nothing more.
    pub fn must_stop(&self) -> bool {
        matches!(
            self,
            StoreError::LeaseLost { .. } | StoreError::RunCancelled { .. }
        )
    }

    /// `true` when retrying later may succeed: the database is unreachable, restarting,
    /// or dropped the connection (not a bad request, a missing row or a lost lease).
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Database(e) => match e {
                sqlx::Error::Io(_)
                | sqlx::Error::PoolTimedOut
                | sqlx::Error::PoolClosed
                | sqlx::Error::WorkerCrashed
                | sqlx::Error::Protocol(_)
                | sqlx::Error::Tls(_) => true,
                sqlx::Error::Database(d) => {
                    // Class 08 (connection), 57P0x (shutdown, crash, cannot connect now),
                    // 40001/40P01 (serialization, deadlock), SQLite BUSY/LOCKED (5, 6).
                    let code = d.code().unwrap_or_default();
                    code.starts_with("08")
                        || code.starts_with("57P")
                        || code == "40001"
                        || code == "40P01"
                        || code == "5"
                        || code == "6"
                }
                _ => false,
            },
            StoreError::Sqlite(rusqlite::Error::SqliteFailure(e, _)) => matches!(
                e.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            ),
            StoreError::WriterStopped => true,
            _ => false,
        }
    }
}

/// The largest message, in bytes of its storage-format JSON, that a store keeps: SQLite's
/// default `SQLITE_MAX_LENGTH` (PostgreSQL's TEXT allows a little more, 1 GiB).
pub const MAX_MESSAGE_BYTES: usize = 1_000_000_000;

/// A message's storage-format JSON, refused when larger than [`MAX_MESSAGE_BYTES`].
pub(crate) fn message_body(message: &llmchain::message::Message) -> StoreResult<String> {
    body_within(message, MAX_MESSAGE_BYTES)
}

fn body_within(message: &llmchain::message::Message, limit: usize) -> StoreResult<String> {
    // No secret of the process reaches the store, whoever echoed it (a tool's output, a
    // model's text): masked as it is written ([`llmchain::secrets`]).
    let body = llmchain::secrets::masked(ser("message", message)?);
    if body.len() > limit {
        return Err(StoreError::MessageTooLarge {
            bytes: body.len(),
            limit,
        });
    }
    Ok(body)
}

/// The result of a store operation.
pub type StoreResult<T> = Result<T, StoreError>;

pub(crate) fn ser<T: serde::Serialize + ?Sized>(
    what: &'static str,
    value: &T,
) -> StoreResult<String> {
    serde_json::to_string(value).map_err(|cause| StoreError::Serialize { what, cause })
}

#[cfg(test)]
mod tests {
    use super::*;
    use llmchain::message::Message;

    #[test]
    fn a_message_over_the_limit_is_refused_with_its_size() {
        let m = Message::user("x".repeat(100));
        let size = ser("message", &m).unwrap().len();
        assert!(body_within(&m, size).is_ok());
        let e = body_within(&m, size - 1).unwrap_err();
        assert!(matches!(e, StoreError::MessageTooLarge { bytes, .. } if bytes == size));
        assert!(e.to_string().contains("nothing was written"), "{e}");
        assert!(!e.is_transient() && !e.must_stop());
    }
}

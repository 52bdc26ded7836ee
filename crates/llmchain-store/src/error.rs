//! [`StoreError`]: every failure of a store operation.

/// A store operation that failed.
#[derive(Debug, thiserror::Error)]
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
    #[error("cannot serialise {what}: {source}")]
    Serialize {
        /// What was being serialised.
        what: &'static str,
        /// The cause.
        source: serde_json::Error,
    },
    /// An I/O failure outside the database driver (e.g. creating the data directory).
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The SQLite writer thread is gone (it could not keep its connection): reopen the
    /// store.
    #[error("the SQLite writer thread stopped; reopen the store")]
    WriterStopped,
    /// The database driver failed (connection, SQL, constraint).
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
}

/// The result of a store operation.
pub type StoreResult<T> = Result<T, StoreError>;

pub(crate) fn ser<T: serde::Serialize + ?Sized>(
    what: &'static str,
    value: &T,
) -> StoreResult<String> {
    serde_json::to_string(value).map_err(|source| StoreError::Serialize { what, source })
}

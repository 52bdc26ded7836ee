//! Versioned, embedded schema migrations.
//!
//! Our own small scheme rather than `sqlx::migrate!` (which needs sqlx's proc-macro
//! crate): a table `llmchain_schema(version)` holds the applied version; each
//! migration runs in the transaction that records it, so a crash mid-migration leaves
//! the previous version intact. A database whose version is above [`SCHEMA_VERSION`]
//! gives [`StoreError::SchemaTooNew`](crate::StoreError::SchemaTooNew).

/// The newest schema version this build writes and reads.
pub const SCHEMA_VERSION: i64 = 4;

/// SQLite migrations: (version, SQL).
pub(crate) const SQLITE: &[(i64, &str)] = &[
    (1, include_str!("../migrations/sqlite/0001_init.sql")),
    (2, include_str!("../migrations/sqlite/0002_run_queue.sql")),
    (
        3,
        include_str!("../migrations/sqlite/0003_reviews_and_profiles.sql"),
    ),
    (
        4,
        include_str!("../migrations/sqlite/0004_superseded_messages.sql"),
    ),
];

/// PostgreSQL migrations: (version, SQL).
pub(crate) const POSTGRES: &[(i64, &str)] = &[
    (1, include_str!("../migrations/postgres/0001_init.sql")),
    (2, include_str!("../migrations/postgres/0002_run_queue.sql")),
    (
        3,
        include_str!("../migrations/postgres/0003_reviews_and_profiles.sql"),
    ),
    (
        4,
        include_str!("../migrations/postgres/0004_superseded_messages.sql"),
    ),
];

pub(crate) const CREATE_VERSION_TABLE: &str =
    "CREATE TABLE IF NOT EXISTS llmchain_schema (version BIGINT NOT NULL)";

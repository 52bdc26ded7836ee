//! # llmchain-store
//!
//! Durable llmchain conversations behind one async [`Store`] trait, with two backends:
//!
//! - [`SqliteStore`], the embedded default: a file in the user's data directory
//!   ([`default_sqlite_path`]) or in memory; WAL with `synchronous=FULL` (see
//!   [`sqlite`] for the trade-off against `NORMAL`, chosen with [`Durability`]), appends
//!   and tool statuses committed together by one writer thread (group commit);
//! - [`PostgresStore`], for several processes on one or more machines: runs are claimed
//!   by exactly one worker (`FOR UPDATE SKIP LOCKED`) under leases that expire.
//!
//! No feature flags: everything is built; it depends on `llmchain` with its default
//! features (`runtime`, `http`).
//!
//! ## Runs, leases and workers
//! A run is claimed under a [`Lease`] whose epoch is a fencing token: every write made
//! on the run's behalf ([`Writer::Lease`] for messages and statuses,
//! [`Store::update_run`], [`Store::complete_run`]…)
//! is checked against it in the write's own transaction, so a worker that lost its lease
//! cannot change the conversation ([`StoreError::LeaseLost`]). [`sink::StoreSink`] with a
//! lease fences every write of a chain; a tool body starts only after its `executing`
//! status was stored. A conversation has at most one open run (a unique index); runs
//! have attempts, back-off, `discarded`, scheduling, priorities and cancellation;
//! [`Heartbeat`] keeps a lease alive and stops the chain when it is lost; [`Worker`] is
//! the supervised claim loop (LISTEN/NOTIFY on PostgreSQL).
//!
//! [`AnyStore::open`] picks one from a URL (`sqlite://PATH`, `sqlite::memory:`,
//! `postgres://…`).
//!
//! ## What is stored
//! - conversations: id, title, metadata, times, and the header of the storage format
//!   (system prompt, tools, tool choice, parallel tool calls);
//! - messages, append-only, as the storage-format JSON of
//!   [`llmchain::message::Message`], numbered 0, 1, 2… per conversation (unique
//!   `(conversation, seq)`); an append is one row insert and one counter update;
//! - each tool call's `execution_status`, keyed by `(conversation, call_id)` and updated
//!   in place, put back onto the calls when a conversation loads;
//! - runs: a [`RunState`] JSON document (mode, status, failure count, pending interrupts,
//!   review decisions, anything else) with the lease owner, expiry and epoch, attempts,
//!   schedule, priority and last error; their kind ([`RunKind`]: queued for workers, or
//!   held by an interactive process) and the operator's profile a queued run names;
//! - the review inbox ([`review`]): a call that waited for a person, and what was
//!   decided about it, by whom and when.
//!
//! ## Review and authority
//! A worker never asks a person: a call that needs one pauses its run
//! ([`Store::pause_run`]) with a [`Review`] per waiting call; any process decides one
//! ([`Store::decide_review`], refused unless it is pending); the last decision requeues
//! the run and a worker resumes it with exactly the stored decisions. What a queued run
//! may execute comes from the worker's own configuration: a run names a profile
//! ([`Run::profile`]) and a worker claims only runs of its profiles
//! ([`Worker::profiles`]); nothing in a row can make it start a command or reach a URL.
//!
//! ## Crash safety
//! Every write is one transaction, durable when its call returns. A process killed at
//! any point leaves a database that loads with contiguous sequence numbers; after a
//! crash, [`Store::recover`] gives calls found `executing` (and calls whose result was
//! lost) a failed "outcome unknown" result unless their tool is idempotent, in which
//! case they are marked to run again ([`recovery`]).
//!
//! ## Schema
//! Versioned migrations are embedded ([`schema`]); a database written by a newer
//! version gives [`StoreError::SchemaTooNew`].
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use llmchain::message::Message;
//! use llmchain_store::{NewConversation, SqliteStore, Store};
//!
//! let store = SqliteStore::in_memory().await?;
//! let id = store.create_conversation(NewConversation::default()).await?;
//! assert_eq!(store.append_message(&id, &Message::user("hi")).await?, 0);
//! let loaded = store.get_conversation(&id).await?.unwrap();
//! assert_eq!(loaded.conversation.messages.len(), 1);
//! # Ok::<_, llmchain_store::StoreError>(())
//! # }).unwrap();
//! ```

#![deny(missing_docs)]

/// The columns of a run, in `assemble::RunRow`'s order (a macro, for `concat!`).
macro_rules! run_columns {
    () => {
        "id, conversation_id, status, state, lease_owner, lease_expires_at, created_at, \
         updated_at, epoch, attempt, max_attempts, run_at, priority, last_error, kind, profile"
    };
}

mod any;
mod assemble;
mod dialect;
mod direct;
mod error;
mod group_commit;
pub mod heartbeat;
mod inbox;
mod lease;
pub mod leased_run;
mod model;
pub mod postgres;
mod read;
pub mod recovery;
pub mod review;
pub mod schema;
pub mod sink;
pub mod sqlite;
mod store;
pub mod trace_context;
mod truncate;
pub mod worker;

pub use any::AnyStore;
pub use error::{MAX_MESSAGE_BYTES, StoreError, StoreResult};
pub use heartbeat::{Heartbeat, HeartbeatStop};
pub use leased_run::{Claim, Drive, Ended, LeasedRun, NotBuilt, RunEnd, Undecided};
pub use model::{
    Change, ConversationSummary, DEFAULT_MAX_ATTEMPTS, Lease, NewConversation, Opening, Run,
    RunFilter, RunKind, RunOptions, RunState, RunStatus, StoredConversation, Superseded, Writer,
    backoff, title_of,
};
pub use postgres::PostgresStore;
pub use recovery::Recovery;
pub use review::{Decided, NewReview, Review, ReviewFilter, ReviewStatus};
pub use sqlite::{Durability, SqliteStore, default_sqlite_path};
pub use store::Store;
pub use worker::{ChainFactory, Worker, WorkerCounts, WorkerEvent, WorkerStats};

//! [`ConversationSink`]: where a chain persists its conversation as it goes, and
//! [`SinkError`], why it could not.

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::message::{ExecutionStatus, Message};

use super::state::ChainState;

/// Boxed future of a sink operation.
pub type SinkFuture<'a> = Pin<Box<dyn Future<Output = Result<(), SinkError>> + Send + 'a>>;

/// Receives every change to a chain's conversation, in order, and makes it durable
/// before the chain goes on (the store crate implements it for SQLite and PostgreSQL).
///
/// The chain only appends whole messages; `execution_status` changes are written before
/// and after each tool body runs, so a crash leaves a conversation that resumes safely.
/// A tool body starts only after its `executing` status was written: when that write
/// fails, the body does not run and the run stops with [`ChainError::Persist`](super::ChainError::Persist).
pub trait ConversationSink: Send + Sync {
    /// A message was appended at `position` (0-based) of the conversation.
    fn append_message<'a>(&'a self, position: usize, message: &'a Message) -> SinkFuture<'a>;
    /// The message at `position` changed (a tool message trimmed by an expansion).
    fn replace_message<'a>(&'a self, position: usize, message: &'a Message) -> SinkFuture<'a>;
    /// A call's execution status changed.
    fn set_tool_status<'a>(&'a self, call_id: &'a str, status: ExecutionStatus) -> SinkFuture<'a>;
    /// The run state changed (failure count, pending review, run count).
    fn save_state<'a>(&'a self, state: &'a ChainState) -> SinkFuture<'a>;
    /// The run state must be durable before the chain goes on: a budget's charge for a
    /// model or tool call about to be made. A sink that writes `save_state` at once
    /// need not override it; one that holds states to write them with the next
    /// message must write now, and a sink that wraps another must forward it.
    fn checkpoint<'a>(&'a self, state: &'a ChainState) -> SinkFuture<'a> {
        self.save_state(state)
    }
}

/// A shared sink is a sink (`with_sink(Arc::new(store_sink))` and `with_sink(store_sink)`
/// both work).
impl<S: ConversationSink + ?Sized> ConversationSink for Arc<S> {
    fn append_message<'a>(&'a self, position: usize, message: &'a Message) -> SinkFuture<'a> {
        (**self).append_message(position, message)
    }
    fn replace_message<'a>(&'a self, position: usize, message: &'a Message) -> SinkFuture<'a> {
        (**self).replace_message(position, message)
    }
    fn set_tool_status<'a>(&'a self, call_id: &'a str, status: ExecutionStatus) -> SinkFuture<'a> {
        (**self).set_tool_status(call_id, status)
    }
    fn save_state<'a>(&'a self, state: &'a ChainState) -> SinkFuture<'a> {
        (**self).save_state(state)
    }
    fn checkpoint<'a>(&'a self, state: &'a ChainState) -> SinkFuture<'a> {
        (**self).checkpoint(state)
    }
}

/// What kind of failure a [`SinkError`] is, for a caller deciding what to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SinkErrorKind {
    /// The writer no longer holds the run's lease (it expired, or another worker took
    /// the run over): nothing more may be written; stop working on the run.
    LeaseLost,
    /// The run was cancelled by someone else: stop working on it.
    RunCancelled,
    /// The conversation and the store disagree (positions, missing conversation).
    Conflict,
    /// Anything else (the database is unreachable, a constraint failed…): the write may
    /// succeed if retried later.
    Other,
}

/// A sink write that failed. Keeps its cause, so a caller can downcast it to the
/// store's own error type ([`SinkError::downcast_source`]).
#[derive(Clone)]
pub struct SinkError {
    kind: SinkErrorKind,
    message: String,
    source: Option<Arc<dyn StdError + Send + Sync>>,
}

impl SinkError {
    /// An error of this kind with a message a person can act on.
    pub fn new(kind: SinkErrorKind, message: impl Into<String>) -> Self {
        SinkError {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// An error of this kind caused by `source` (its text is the message).
    pub fn from_source(kind: SinkErrorKind, source: impl StdError + Send + Sync + 'static) -> Self {
        SinkError {
            kind,
            message: source.to_string(),
            source: Some(Arc::new(source)),
        }
    }

    /// The kind.
    pub fn kind(&self) -> SinkErrorKind {
        self.kind
    }

    /// `true` for [`SinkErrorKind::LeaseLost`] and [`SinkErrorKind::RunCancelled`]:
    /// the writer must stop and write nothing more.
    pub fn must_stop(&self) -> bool {
        matches!(
            self.kind,
            SinkErrorKind::LeaseLost | SinkErrorKind::RunCancelled
        )
    }

    /// The cause, downcast to the sink's own error type (e.g. `llmchain_store::StoreError`).
    pub fn downcast_source<E: StdError + 'static>(&self) -> Option<&E> {
        self.source.as_deref()?.downcast_ref::<E>()
    }
}

impl fmt::Debug for SinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SinkError")
            .field("kind", &self.kind)
            .field("message", &self.message)
            .finish()
    }
}

impl fmt::Display for SinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Its cause's text is its message, so `source()` does not return the cause again (the
/// convention of `std::error::Error`); [`SinkError::downcast_source`] reaches it.
impl StdError for SinkError {}

/// Equal when kind and message are (the cause is not compared).
impl PartialEq for SinkError {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && self.message == other.message
    }
}

impl From<String> for SinkError {
    fn from(message: String) -> Self {
        SinkError::new(SinkErrorKind::Other, message)
    }
}

impl From<&str> for SinkError {
    fn from(message: &str) -> Self {
        SinkError::new(SinkErrorKind::Other, message)
    }
}

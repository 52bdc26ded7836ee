//! [`ConversationSink`]: where a chain persists its conversation as it goes.

use std::future::Future;
use std::pin::Pin;

use crate::message::{ExecutionStatus, Message};

use super::state::ChainState;

/// Boxed future of a sink operation.
pub type SinkFuture<'a> = Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>>;

/// Receives every change to a chain's conversation, in order, and makes it durable
/// before the chain goes on (the store crate implements it for SQLite and PostgreSQL).
///
/// The chain only appends whole messages; `execution_status` changes are written before
/// and after each tool body runs, so a crash leaves a conversation that resumes safely.
pub trait ConversationSink: Send + Sync {
    /// A message was appended at `position` (0-based) of the conversation.
    fn append_message<'a>(&'a self, position: usize, message: &'a Message) -> SinkFuture<'a>;
    /// The message at `position` changed (a tool message trimmed by an expansion).
    fn replace_message<'a>(&'a self, position: usize, message: &'a Message) -> SinkFuture<'a>;
    /// A call's execution status changed.
    fn set_tool_status<'a>(&'a self, call_id: &'a str, status: ExecutionStatus) -> SinkFuture<'a>;
    /// The run state changed (failure count, pending review, run count).
    fn save_state<'a>(&'a self, state: &'a ChainState) -> SinkFuture<'a>;
}

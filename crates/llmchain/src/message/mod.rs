//! The message model: [`ToolCall`], [`ToolResult`], [`ContentPart`], [`Message`],
//! [`MessageDelta`] and [`MessageExpansion`].
//!
//! Pure data and logic: no I/O, no async runtime. The serde form of these types is the
//! versioned storage format documented in `docs/storage-format.md`.

mod chat;
mod content_part;
mod delta;
mod error;
mod expansion;
mod tool_call;
mod tool_result;
mod usage;

pub use chat::{InvalidToolCall, Message, MessageStatus, Role, USAGE_KEY};
pub use content_part::{Content, ContentPart, ContentType, parts_to_string};
pub use delta::{
    CompletedDelta, DEFAULT_MAX_ARGUMENT_BYTES, DeltaError, DeltaStatus, MessageDelta,
};
pub use error::{FieldError, MergeError, ValidationErrors};
pub use expansion::{KeepContent, MessageExpansion};
pub use tool_call::{
    Arguments, EXECUTION_STATUS_KEY, ExecutionStatus, INVALID_JSON, NOT_AN_OBJECT, REVIEW_KEY,
    ToolCall, ToolCallAttrs, ToolCallStatus, ToolType,
};
pub use tool_result::{ResultKind, ToolException, ToolResult};
pub use usage::TokenUsage;

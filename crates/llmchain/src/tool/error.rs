//! [`ToolError`]: why a tool or an executor could not be built.

use thiserror::Error;

/// A mistake in a tool definition, found when the tool or the executor is built
/// (never while running a call: run-time problems become [`ToolResult`](crate::message::ToolResult)s).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The name is not 1–64 characters of `[a-zA-Z0-9_-]`.
    #[error("invalid tool name {name:?}: {reason}")]
    InvalidName {
        /// The rejected name.
        name: String,
        /// Why.
        reason: String,
    },
    /// The parameters schema is not a JSON Schema object that compiles.
    #[error("tool {name:?} has an invalid parameters schema: {reason}")]
    InvalidSchema {
        /// The tool.
        name: String,
        /// Why.
        reason: String,
    },
    /// The builder was finished without a body.
    #[error(
        "tool {name:?} has no handler: call `.handler(..)`, `.typed_handler(..)` or `.handler_impl(..)`"
    )]
    MissingHandler {
        /// The tool.
        name: String,
    },
    /// Two tools in one executor share a name.
    #[error("two tools are named {name:?}: tool names must be unique")]
    DuplicateTool {
        /// The shared name.
        name: String,
    },
    /// A concurrency limit of zero would never run anything.
    #[error("tool {name:?}: max_concurrency must be at least 1")]
    ZeroConcurrency {
        /// The tool (or `"executor"`).
        name: String,
    },
}

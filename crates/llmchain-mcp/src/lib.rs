//! llmchain-mcp: the tools of MCP servers as llmchain [`Tool`](llmchain::tool::Tool)s,
//! and llmchain tools served over MCP. Built on [rmcp](https://docs.rs/rmcp) (pinned).
//!
//! No feature flags: everything is built; it depends on `llmchain` with its default
//! features (`runtime`, `http`).
//!
//! # Client
//!
//! [`McpClient::connect`] starts a server as a child process speaking stdio
//! ([`ServerSpec::stdio`], or [`ServerSpec::parse_command`] for a `"CMD ARGS"` string) or
//! connects to a streamable-HTTP endpoint ([`ServerSpec::http`]). [`McpClient::tools`]
//! lists its tools as [`McpTool`]s: an llmchain `Tool` (schema, description, title as
//! display text, `idempotent` from `idempotentHint`, a per-call timeout) plus the
//! server's [`ToolHints`] (read-only, destructive, idempotent, open-world) for review
//! policies. [`connect_all`] connects to several servers and resolves name collisions
//! (see [`Prefix`]).
//!
//! A call maps the MCP result to a `ToolResult`:
//!
//! | MCP | llmchain |
//! |---|---|
//! | `text` content | text part |
//! | `image` content | image part (base64 + media type) |
//! | `audio` content | file part (base64 + media type) |
//! | `resource` (embedded) | text part (text resource) or file part (blob, with its media type and `uri`) |
//! | `resource_link` | text part naming the URI |
//! | `structuredContent` | `processed_content` (the text content still goes to the model) |
//! | a block of a type MCP adds later | text part holding its JSON |
//!
//! Where each kind then goes on each provider's wire is `docs/content-placement.md`.
//! | `isError: true` | `is_error` |
//! | JSON-RPC `-32602` invalid params | refusal (`is_error` + `is_refusal`): nothing ran |
//! | other JSON-RPC errors, a closed transport | `is_error` |
//! | a result larger than [`McpOptions::max_result_bytes`] | `is_error`, naming the size and the cap |
//!
//! Cancelling the `ToolContext` token (or the tool's timeout) drops the request, which
//! sends `notifications/cancelled` to the server. A stdio server that exited is
//! started again on the next call. A server that cannot start is a typed
//! [`McpError`] naming the command.
//!
//! ```no_run
//! # async fn demo() -> Result<(), llmchain_mcp::McpError> {
//! use llmchain_mcp::{McpClient, McpOptions, ServerSpec};
//! let client = McpClient::connect(ServerSpec::parse_command("uvx mcp-server-time")?, McpOptions::default()).await?;
//! for t in client.tools().await? {
//!     println!("{} read_only={}", t.tool.name(), t.hints.read_only);
//! }
//! # Ok(()) }
//! ```
//!
//! # Server
//!
//! [`serve_stdio`] serves a set of llmchain tools to any MCP client over stdin/stdout;
//! [`ToolServer`] is the rmcp handler if you want another transport.

#![deny(missing_docs)]

mod backpressure;
mod child;
mod client;
mod error;
mod hints;
mod http_transport;
mod result;
mod server;
mod spec;

pub use client::{
    DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_RESULT_BYTES, DEFAULT_TIMEOUT, McpClient, McpOptions,
    McpTool, Prefix, connect_all,
};
pub use error::McpError;
pub use hints::ToolHints;
pub use result::map_call_result;
pub use server::{DEFAULT_MAX_IN_FLIGHT, ToolServer, serve, serve_stdio};
pub use spec::ServerSpec;

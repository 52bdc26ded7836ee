//! [`McpError`]: why connecting to an MCP server or listing its tools failed.

/// Why connecting to an MCP server or listing its tools failed. Tool *calls* never
/// return it: their failures become error results the model can read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// A `--mcp` command string could not be split into words.
    #[error("bad MCP server command {command:?}: {reason}")]
    BadCommand {
        /// The command string.
        command: String,
        /// Why.
        reason: String,
    },
    /// The server process could not be started (not found, not executable, ...).
    #[error("MCP server `{command}` could not start: {cause}")]
    Spawn {
        /// The program.
        command: String,
        /// The OS error (its text is in this error's; not repeated as `source()`).
        cause: std::io::Error,
    },
    /// The server started (or the URL answered) but the MCP handshake failed: it
    /// exited, spoke something that is not MCP, or did not answer in time.
    #[error("MCP server `{server}` did not complete the MCP handshake: {reason}")]
    Handshake {
        /// The command or URL.
        server: String,
        /// Why.
        reason: String,
    },
    /// `tools/list` failed.
    #[error("MCP server `{server}`: listing its tools failed: {reason}")]
    ListTools {
        /// The command or URL.
        server: String,
        /// Why.
        reason: String,
    },
    /// A tool's name cannot be made valid, or two tools still collide after prefixing.
    #[error("MCP server `{server}`: tool {name:?} cannot be used: {reason}")]
    BadTool {
        /// The command or URL.
        server: String,
        /// The MCP tool name.
        name: String,
        /// Why.
        reason: String,
    },
}

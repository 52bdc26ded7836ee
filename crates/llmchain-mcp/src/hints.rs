//! [`ToolHints`]: an MCP tool's annotations. They live in
//! [`llmchain::tool::ToolHints`] (a tool of llmchain declares the same hints); this path
//! stays for code that names them here.

pub use llmchain::tool::ToolHints;

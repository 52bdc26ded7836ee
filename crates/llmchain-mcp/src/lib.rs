//! llmchain-mcp: see the crate README; built in a later issue.

//! The `#[tool]` attribute macro (built with the tools issue).

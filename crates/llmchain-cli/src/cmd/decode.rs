//! `llmchain decode` (built with the codecs issue).

use crate::error::{CliError, CliResult};

/// Arguments of `llmchain decode`.
#[derive(Debug, clap::Args)]
pub struct DecodeArgs {
    /// The wire format.
    #[arg(long)]
    pub format: String,
}

/// Runs the command.
pub fn run(_args: DecodeArgs) -> CliResult {
    Err(CliError::Runtime("not implemented yet".into()))
}

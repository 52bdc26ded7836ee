//! `llmchain encode` (built with the codecs issue).

use crate::error::{CliError, CliResult};

/// Arguments of `llmchain encode`.
#[derive(Debug, clap::Args)]
pub struct EncodeArgs {
    /// The wire format.
    #[arg(long)]
    pub format: String,
}

/// Runs the command.
pub fn run(_args: EncodeArgs) -> CliResult {
    Err(CliError::Runtime("not implemented yet".into()))
}

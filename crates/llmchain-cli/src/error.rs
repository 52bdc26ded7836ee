//! [`CliError`]: every failure maps to an exit code and a one-line message.

use std::process::ExitCode;

/// A command failure. `Usage` exits 2 (usage or bad input), `Runtime` exits 1,
/// `Interrupted` exits 130.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// Bad usage or bad input: exit code 2.
    #[error("{0}")]
    Usage(String),
    /// A runtime failure: exit code 1.
    #[error("{0}")]
    Runtime(String),
    /// Interrupted by the user (Ctrl-C): exit code 130, as shells report SIGINT.
    #[error("{0}")]
    Interrupted(String),
}

impl CliError {
    /// The process exit code.
    pub(crate) fn exit_code(&self) -> ExitCode {
        match self {
            CliError::Usage(_) => ExitCode::from(2),
            CliError::Runtime(_) => ExitCode::from(1),
            CliError::Interrupted(_) => ExitCode::from(130),
        }
    }
}

/// The result of a command.
pub(crate) type CliResult = Result<(), CliError>;

//! [`CliError`]: how a command failed — its exit class, a stable type a script can
//! match on, what to tell a person, and the error that caused it.

use std::error::Error;
use std::fmt;
use std::process::ExitCode;

use llmchain::chain::ChainError;
use llmchain_store::StoreError;

/// How a failure ends the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// Bad usage or bad input: exit code 2.
    Usage,
    /// A runtime failure: exit code 1.
    Runtime,
    /// Interrupted by the user (Ctrl-C): exit code 130, as shells report SIGINT.
    Interrupted,
}

impl Exit {
    /// The name `--json` gives it (`error.kind`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Exit::Usage => "usage",
            Exit::Runtime => "runtime",
            Exit::Interrupted => "interrupted",
        }
    }

    /// The process exit code.
    pub(crate) fn code(self) -> u8 {
        match self {
            Exit::Usage => 2,
            Exit::Runtime => 1,
            Exit::Interrupted => 130,
        }
    }
}

/// A command failure.
///
/// It follows the `std::error::Error` convention: its `Display` is its own words, and
/// what caused it is its [`source`](Error::source). An error made from a store, chain or
/// model error without words of its own is transparent: it shows the cause's words and
/// answers the cause's source. [`CliError::report`] is the whole chain on one line.
#[derive(Debug)]
pub(crate) struct CliError {
    exit: Exit,
    /// A stable, short name of what failed (`conversation_not_found`, `connect`,
    /// `rate_limit`…), `--json`'s `error.type`.
    error_type: &'static str,
    /// Its own words; `None` when it only carries `source`.
    message: Option<String>,
    source: Option<Box<dyn Error + Send + Sync + 'static>>,
}

impl CliError {
    fn new(exit: Exit, message: String) -> CliError {
        CliError {
            exit,
            error_type: exit.as_str(),
            message: Some(message),
            source: None,
        }
    }

    /// Bad usage or bad input (exit code 2).
    pub(crate) fn usage(message: impl Into<String>) -> CliError {
        CliError::new(Exit::Usage, message.into())
    }

    /// A runtime failure (exit code 1).
    pub(crate) fn runtime(message: impl Into<String>) -> CliError {
        CliError::new(Exit::Runtime, message.into())
    }

    /// Interrupted by the user (exit code 130).
    pub(crate) fn interrupted(message: impl Into<String>) -> CliError {
        CliError::new(Exit::Interrupted, message.into())
    }

    /// A runtime failure whose words are `context`, caused by `source` (an I/O error, a
    /// library's): `Display` shows `context`, the report `context: source`.
    pub(crate) fn io(
        context: impl Into<String>,
        source: impl Error + Send + Sync + 'static,
    ) -> CliError {
        CliError {
            exit: Exit::Runtime,
            error_type: "io",
            message: Some(context.into()),
            source: Some(Box::new(source)),
        }
    }

    /// The same failure under a more precise type.
    /// This error with `note` after its words (its cause's, for a transparent one): the
    /// same exit and type.
    pub(crate) fn noting(self, note: &str) -> CliError {
        let words = self.to_string();
        CliError {
            exit: self.exit,
            error_type: self.error_type,
            message: Some(format!("{words}. {note}")),
            source: None,
        }
    }

    pub(crate) fn typed(mut self, error_type: &'static str) -> CliError {
        self.error_type = error_type;
        self
    }

    /// A failure of the store, transparent: a missing conversation or a bad URL is the
    /// user's to fix (exit code 2), anything else a runtime failure.
    pub(crate) fn store(e: StoreError) -> CliError {
        let exit = match e {
            StoreError::BadUrl(_) | StoreError::ConversationNotFound(_) | StoreError::NoDataDir => {
                Exit::Usage
            }
            _ => Exit::Runtime,
        };
        CliError::transparent(exit, e.error_type(), e)
    }

    /// A chain's failure, transparent, typed by its class (a model's failure by the
    /// model's: `connect`, `http`, `timeout`…).
    pub(crate) fn chain(e: ChainError) -> CliError {
        let exit = match e {
            ChainError::Cancelled => Exit::Interrupted,
            _ => Exit::Runtime,
        };
        CliError::transparent(exit, e.error_type(), e)
    }

    fn transparent(
        exit: Exit,
        error_type: &'static str,
        source: impl Error + Send + Sync + 'static,
    ) -> CliError {
        CliError {
            exit,
            error_type,
            message: None,
            source: Some(Box::new(source)),
        }
    }

    /// How it ends the process.
    pub(crate) fn exit(&self) -> Exit {
        self.exit
    }

    /// Its stable type (`--json`'s `error.type`).
    pub(crate) fn error_type(&self) -> &'static str {
        self.error_type
    }

    /// The process exit code.
    pub(crate) fn exit_code(&self) -> ExitCode {
        ExitCode::from(self.exit.code())
    }

    /// Its words and every cause's, `: `-separated, on one line; a cause whose words
    /// are already said (a library that shows its source in its own `Display`) is not
    /// said twice.
    pub(crate) fn report(&self) -> String {
        let mut out = self.to_string();
        let mut next = Error::source(self);
        while let Some(cause) = next {
            let words = cause.to_string();
            if !words.is_empty() && !out.contains(&words) {
                out.push_str(": ");
                out.push_str(&words);
            }
            next = cause.source();
        }
        out
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.message, &self.source) {
            (Some(message), _) => f.write_str(message),
            (None, Some(source)) => source.fmt(f),
            (None, None) => f.write_str(self.error_type),
        }
    }
}

impl Error for CliError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        let source = self.source.as_deref()?;
        if self.message.is_some() {
            Some(source)
        } else {
            // Transparent: the cause's words are this error's own.
            source.source()
        }
    }
}

impl From<StoreError> for CliError {
    fn from(e: StoreError) -> CliError {
        CliError::store(e)
    }
}

/// The result of a command.
pub(crate) type CliResult = Result<(), CliError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_error_keeps_its_type_its_exit_and_its_source() {
        let e = CliError::store(StoreError::ConversationNotFound("c1".into()));
        assert_eq!(e.exit(), Exit::Usage);
        assert_eq!(e.error_type(), "conversation_not_found");
        assert_eq!(e.to_string(), "no conversation with id \"c1\"");
        assert_eq!(e.report(), e.to_string());
        let e = CliError::store(StoreError::RunNotFound("r1".into()));
        assert_eq!((e.exit(), e.error_type()), (Exit::Runtime, "run_not_found"));
    }

    #[test]
    fn the_report_says_each_cause_once() {
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
        let e = CliError::io("cannot write out.json", io);
        assert_eq!(e.to_string(), "cannot write out.json");
        assert_eq!(e.report(), "cannot write out.json: denied");
        assert_eq!(e.error_type(), "io");
        assert!(Error::source(&e).is_some());
        // A cause whose words are already in the text is not repeated.
        let io = std::io::Error::other("disk full");
        let e = CliError::io("cannot write: disk full", io);
        assert_eq!(e.report(), "cannot write: disk full");
    }

    #[test]
    fn a_chain_error_is_typed_by_its_class_and_a_cancellation_is_an_interrupt() {
        let e = CliError::chain(ChainError::Cancelled);
        assert_eq!((e.exit(), e.error_type()), (Exit::Interrupted, "cancelled"));
        let e = CliError::chain(ChainError::Model(llmchain::model::ModelError::Cancelled));
        assert_eq!((e.exit(), e.error_type()), (Exit::Runtime, "cancelled"));
        let e = CliError::usage("bad flag").typed("config");
        assert_eq!((e.exit(), e.error_type()), (Exit::Usage, "config"));
    }
}

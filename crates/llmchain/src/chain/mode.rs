//! Run modes: how a chain loops between the model and the tools.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::error::ChainError;
use super::llm_chain::LLMChain;
use super::state::{PendingReview, ToolInterrupt};
use crate::message::ToolResult;

/// The default max-runs guard of the looping modes (reference: 25).
pub const DEFAULT_MAX_RUNS: u32 = 25;

/// How a run ended (when it did not end with an error).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RunOutcome {
    /// The model answered; nothing is pending.
    Done,
    /// `until_tool_used`: the first result of a target tool in the newest tool message.
    ToolUsed(Box<ToolResult>),
    /// Tools paused for a human. Resume with [`LLMChain::replace_tool_result`] and run again.
    Interrupted(Vec<ToolInterrupt>),
    /// The review handler asked a human to decide. Resume with [`LLMChain::resume`].
    ReviewRequired(PendingReview),
    /// `check_pause` asked the run to stop; run again to continue.
    Paused,
    /// A decision ended the run before its end (a budget ran out): every open call
    /// was answered "not run", and the reason is journaled.
    Stopped(super::budget::RunStop),
}

impl RunOutcome {
    /// What this outcome asks of whoever holds the run (the one mapping, checked by the
    /// compiler here: an outcome added later must say which it is).
    pub fn disposition(&self) -> Disposition {
        match self {
            RunOutcome::Done | RunOutcome::ToolUsed(_) | RunOutcome::Stopped(_) => {
                Disposition::Done
            }
            RunOutcome::Interrupted(_) | RunOutcome::ReviewRequired(_) => {
                Disposition::WaitsForPeople
            }
            RunOutcome::Paused => Disposition::Yielded,
        }
    }
}

/// What the end of a run asks of whoever holds it (a store's run, a job queue): every
/// [`RunOutcome`] and every [`ChainError`](super::ChainError) is one of these
/// ([`RunOutcome::disposition`], [`ChainError::disposition`](super::ChainError::disposition)).
///
/// Deliberately **not** `#[non_exhaustive]`, unlike the outcomes and errors themselves:
/// those may grow, and each new one is classified where it is defined, so a holder of
/// runs (`llmchain-store`'s `LeasedRun`) matches this closed set with no wildcard arm
/// and never guesses what an outcome it does not know means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Disposition {
    /// Finished: nothing is pending.
    Done,
    /// Calls wait for people: a review, or a tool's own interrupt.
    WaitsForPeople,
    /// Stopped with more to do, needing no one (`check_pause`): run it again to go on.
    Yielded,
    /// Cancelled by its caller (Ctrl-C, a server shutting down).
    Cancelled,
    /// Must stop writing: its lease was lost, or the run was cancelled from elsewhere.
    Stopped,
    /// Failed in a way that may pass when run again: the model or its fallbacks, the
    /// network, the store.
    Transient,
    /// Failed in a way running again will not fix.
    Permanent,
}

/// `step` mode's continuation test.
pub type ShouldContinue = Arc<dyn Fn(&LLMChain) -> bool + Send + Sync>;

/// Boxed future of a custom mode.
pub type ModeFuture<'a> = Pin<Box<dyn Future<Output = Result<RunOutcome, ChainError>> + Send + 'a>>;

/// A mode composed from [`Steps`](super::Steps).
///
/// ```
/// use llmchain::chain::{CustomMode, LLMChain, ModeFuture, RunOutcome, Steps, step};
///
/// /// Calls the model, runs tools, stops at interrupts; never expands results.
/// struct Plain;
/// impl CustomMode for Plain {
///     fn run<'a>(&'a self, chain: &'a mut LLMChain) -> ModeFuture<'a> {
///         Box::pin(async move {
///             loop {
///                 step!(Steps::call_llm(chain).await);
///                 step!(Steps::execute_tools(chain).await);
///                 step!(Ok(Steps::check_tool_interrupts(chain)));
///                 step!(Steps::check_max_runs(chain, 10));
///                 step!(Ok(Steps::continue_or_done(chain)));
///             }
///         })
///     }
/// }
/// ```
pub trait CustomMode: Send + Sync {
    /// Runs the chain to an outcome.
    fn run<'a>(&'a self, chain: &'a mut LLMChain) -> ModeFuture<'a>;

    /// The mode's name, as a stored run records it ([`Mode::name`]); `custom` unless
    /// the mode names itself.
    fn name(&self) -> &'static str {
        "custom"
    }
}

/// A run mode.
#[derive(Clone)]
#[non_exhaustive]
pub enum Mode {
    /// One model call; tools are not executed.
    Single,
    /// Runs tools and calls the model while a response is needed.
    WhileNeedsResponse {
        /// Max-runs guard.
        max_runs: u32,
    },
    /// Loops until a tool batch succeeds or the model answers without tools.
    UntilSuccess {
        /// Max-runs guard.
        max_runs: u32,
    },
    /// One step at a time (pending tools, else a model call) while `should_continue`.
    Step {
        /// Continue after each step?
        should_continue: Option<ShouldContinue>,
        /// Max-runs guard.
        max_runs: u32,
    },
    /// Loops until one of the named tools was used.
    UntilToolUsed {
        /// Target tool names.
        names: Vec<String>,
        /// Max-runs guard.
        max_runs: u32,
    },
    /// A mode composed from steps.
    Custom(Arc<dyn CustomMode>),
}

impl std::fmt::Debug for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mode::Single => f.write_str("Single"),
            Mode::WhileNeedsResponse { max_runs } => write!(f, "WhileNeedsResponse({max_runs})"),
            Mode::UntilSuccess { max_runs } => write!(f, "UntilSuccess({max_runs})"),
            Mode::Step { max_runs, .. } => write!(f, "Step({max_runs})"),
            Mode::UntilToolUsed { names, max_runs } => {
                write!(f, "UntilToolUsed({names:?}, {max_runs})")
            }
            Mode::Custom(_) => f.write_str("Custom"),
        }
    }
}

impl Mode {
    /// `while_needs_response` with the default guard.
    pub fn while_needs_response() -> Self {
        Mode::WhileNeedsResponse {
            max_runs: DEFAULT_MAX_RUNS,
        }
    }

    /// `until_success` with the default guard.
    pub fn until_success() -> Self {
        Mode::UntilSuccess {
            max_runs: DEFAULT_MAX_RUNS,
        }
    }

    /// `step` with a continuation test.
    pub fn step(should_continue: impl Fn(&LLMChain) -> bool + Send + Sync + 'static) -> Self {
        Mode::Step {
            should_continue: Some(Arc::new(should_continue)),
            max_runs: DEFAULT_MAX_RUNS,
        }
    }

    /// `until_tool_used(names, max_runs)`.
    pub fn until_tool_used<S: Into<String>>(
        names: impl IntoIterator<Item = S>,
        max_runs: u32,
    ) -> Self {
        Mode::UntilToolUsed {
            names: names.into_iter().map(Into::into).collect(),
            max_runs,
        }
    }

    /// A custom mode.
    pub fn custom(mode: impl CustomMode + 'static) -> Self {
        Mode::Custom(Arc::new(mode))
    }

    /// The typed mode a stored run recorded in its state, for whoever resumes it in
    /// another process: an [`Extract`](super::Extract) run resumes as one (see
    /// [`Extract::recorded`](super::Extract::recorded)); `None` when the run recorded
    /// none (the built-in modes are named in the store's run state instead).
    pub fn recorded(state: &super::ChainState) -> Option<Result<Mode, ChainError>> {
        super::Extract::recorded(state).map(|r| r.map(Mode::custom))
    }

    /// The mode's name, as stored with a run.
    pub fn name(&self) -> &'static str {
        match self {
            Mode::Single => "single",
            Mode::WhileNeedsResponse { .. } => "while_needs_response",
            Mode::UntilSuccess { .. } => "until_success",
            Mode::Step { .. } => "step",
            Mode::UntilToolUsed { .. } => "until_tool_used",
            Mode::Custom(m) => m.name(),
        }
    }
}

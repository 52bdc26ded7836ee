//! [`ChainError`]: why a run stopped with an error.

use super::mode::Disposition;
use super::sink::SinkError;
use crate::message::DeltaError;
use crate::model::ModelError;

/// Why a run ended with an error. The chain keeps its conversation consistent in every
/// case: whatever was added is whole.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ChainError {
    /// `run` on a chain with no messages.
    #[error("LLMChain cannot be run without messages")]
    NoMessages,
    /// Every model (primary and fallbacks) failed; the last error is kept.
    #[error("the model call failed: {0}")]
    Model(ModelError),
    /// All fallbacks failed.
    #[error("all fallbacks failed; last error: {0}")]
    AllFallbacksFailed(ModelError),
    /// The failure budget is used up (`exceeded_failure_count`).
    #[error("Exceeded max failure count ({count}/{max})")]
    ExceededFailureCount {
        /// Consecutive failed batches.
        count: u32,
        /// `max_retry_count`.
        max: u32,
    },
    /// The model kept repeating the same failing call.
    #[error("the model repeated the same failing call to '{tool}' {count} times")]
    RepeatedFailingCall {
        /// The tool.
        tool: String,
        /// How many times.
        count: u32,
    },
    /// The max-runs guard stopped a looping mode (`exceeded_max_runs`).
    #[error("Exceeded maximum number of runs ({count}/{max})")]
    ExceededMaxRuns {
        /// Runs done.
        count: u32,
        /// The limit.
        max: u32,
    },
    /// `until_tool_used` with names that are not tools (`invalid_tool_name`).
    #[error("{0}")]
    InvalidToolName(String),
    /// `until_tool_used`: the model ended its turn without using the tool.
    #[error("the model finished without calling {0}")]
    ToolNotUsed(String),
    /// A stream delta could not be merged.
    #[error("Error applying delta message: {0}")]
    Delta(DeltaError),
    /// Resume was called with decisions that do not match the pending calls.
    #[error("cannot resume: {0}")]
    Resume(String),
    /// Persisting the conversation failed; the run stopped before going further. Match
    /// [`SinkError::kind`] for a lost lease or a cancelled run.
    #[error("could not persist the conversation: {0}")]
    Persist(SinkError),
    /// The run was cancelled.
    #[error("the run was cancelled")]
    Cancelled,
    /// A typed answer's schema providers would not take (not a schema, not an object, a
    /// name they refuse); nothing was sent.
    #[error("cannot ask for a typed answer: {0}")]
    AnswerSchema(String),
    /// The model's answer does not match its schema: the last of the tries the failure
    /// budget allows.
    #[error("the answer does not match its schema at {path}: {message}")]
    InvalidAnswer {
        /// Where, as a JSON pointer (`(root)` for the whole answer).
        path: String,
        /// What is wrong there.
        message: String,
    },
    /// A budget ran out, and the budget says to fail
    /// ([`OnExhausted::Error`](super::OnExhausted::Error)); the partial transcript is kept,
    /// and every open call answered "not run".
    #[error("{0}")]
    BudgetExhausted(super::budget::RunStop),
    /// A cost budget limits the run, and the price of this model is not known: nothing
    /// was sent (a cost budget refuses to start rather than guess).
    #[error(
        "a cost budget needs the price of model {0:?}, which is not in the built-in table: \
         set it (dollars per million tokens) in [budget.prices.\"{0}\"] as input = …, \
         output = …, or Budget::prices"
    )]
    UnknownPrice(String),
    /// The run stopped before its typed answer (calls wait for a person, or it was
    /// paused); the outcome is named.
    #[error("the run stopped before its answer: {0}")]
    NotAnswered(String),
}

// The convention of `std::error::Error`: a cause is shown in this error's own text or
// returned from `source()`, never both. The chain's errors show it (the variant holds
// it, to match on), so they return none.
impl From<DeltaError> for ChainError {
    fn from(e: DeltaError) -> Self {
        ChainError::Delta(e)
    }
}

impl ChainError {
    /// The class of this failure as the telemetry's `error.type` names it (a short,
    /// fixed set; a model's failure is named by its own class).
    pub fn error_type(&self) -> &'static str {
        match self {
            ChainError::NoMessages => "no_messages",
            ChainError::Model(e) | ChainError::AllFallbacksFailed(e) => e.error_type(),
            ChainError::ExceededFailureCount { .. } => "failure_budget",
            ChainError::RepeatedFailingCall { .. } => "repeated_failing_call",
            ChainError::ExceededMaxRuns { .. } => "max_runs",
            ChainError::InvalidToolName(_) => "invalid_tool_name",
            ChainError::ToolNotUsed(_) => "tool_not_used",
            ChainError::Delta(_) => "delta",
            ChainError::Resume(_) => "resume",
            ChainError::Persist(_) => "persist",
            ChainError::Cancelled => "cancelled",
            ChainError::AnswerSchema(_) => "answer_schema",
            ChainError::InvalidAnswer { .. } => "invalid_answer",
            ChainError::NotAnswered(_) => "not_answered",
            ChainError::BudgetExhausted(_) => "budget_exhausted",
            ChainError::UnknownPrice(_) => "unknown_price",
        }
    }

    /// This error as telemetry may export it. With the content opt-in
    /// ([`capture_content`](crate::telemetry::capture_content)): its whole text, secrets
    /// masked. Without it, nothing quoted from a model, a tool or a provider: the text
    /// of the errors that quote nothing, the JSON pointer of an answer off its schema
    /// (not the value found there), and the [`error_type`](Self::error_type) of the rest.
    ///
    /// ```
    /// use llmchain::chain::ChainError;
    /// let e = ChainError::InvalidAnswer { path: "/n".into(), message: "\"SECRET TEXT\" is not a number".into() };
    /// # if !llmchain::telemetry::capture_content() {
    /// assert_eq!(e.telemetry_text(), "the answer does not match its schema at /n");
    /// # }
    /// ```
    pub fn telemetry_text(&self) -> String {
        if crate::telemetry::capture_content() {
            return crate::secrets::masked(self.to_string());
        }
        match self {
            ChainError::InvalidAnswer { path, .. } => {
                format!("the answer does not match its schema at {path}")
            }
            ChainError::NoMessages
            | ChainError::ExceededFailureCount { .. }
            | ChainError::ExceededMaxRuns { .. }
            | ChainError::BudgetExhausted(_)
            | ChainError::UnknownPrice(_)
            | ChainError::Cancelled => self.to_string(),
            _ => self.error_type().to_owned(),
        }
    }

    /// What this error asks of whoever holds the run (see [`Disposition`]).
    pub fn disposition(&self) -> Disposition {
        match self {
            ChainError::Cancelled => Disposition::Cancelled,
            ChainError::Persist(e) if e.must_stop() => Disposition::Stopped,
            ChainError::Model(_) | ChainError::AllFallbacksFailed(_) | ChainError::Persist(_) => {
                Disposition::Transient
            }
            ChainError::NoMessages
            | ChainError::ExceededFailureCount { .. }
            | ChainError::RepeatedFailingCall { .. }
            | ChainError::ExceededMaxRuns { .. }
            | ChainError::InvalidToolName(_)
            | ChainError::ToolNotUsed(_)
            | ChainError::Delta(_)
            | ChainError::Resume(_)
            | ChainError::AnswerSchema(_)
            | ChainError::InvalidAnswer { .. }
            | ChainError::NotAnswered(_)
            | ChainError::BudgetExhausted(_)
            | ChainError::UnknownPrice(_) => Disposition::Permanent,
        }
    }
}

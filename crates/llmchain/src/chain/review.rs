//! Human review: the `on_tool_call_review` handler and the decisions a human makes on resume.

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::message::ToolCall;

/// What a review handler decides about one call, before it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum ReviewDecision {
    /// Run the call as it is.
    Approve,
    /// Run the call with these arguments instead (validated like the model's).
    Edit {
        /// The new arguments.
        arguments: Map<String, Value>,
    },
    /// Do not run it; the result tells the model why, with `is_error: false`: a decision
    /// about the call, not a fault in it, so it does not use the failure budget.
    Deny {
        /// Shown to the model.
        reason: String,
    },
    /// Do not run it, and report it as an error + refusal: the call was wrong and the
    /// model may send a corrected one. Counts against the failure budget.
    Reject {
        /// Shown to the model.
        reason: String,
    },
    /// Pause the run until a human decides (see [`HumanDecision`]).
    Interrupt,
}

/// What a human decides about a paused call, on resume.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum HumanDecision {
    /// Run the call as it is.
    Approve,
    /// Run the call with these arguments.
    Edit {
        /// The new arguments.
        arguments: Map<String, Value>,
    },
    /// Do not run it.
    Reject {
        /// Shown to the model (a default text is used when `None`).
        #[serde(default)]
        reason: Option<String>,
        /// Report it as a denial (`is_error: false`) instead of the default error +
        /// refusal (which counts against the failure budget but is safe to correct).
        #[serde(default)]
        as_denial: bool,
    },
}

/// Boxed future of a review.
pub type ReviewFuture<'a> = Pin<Box<dyn Future<Output = ReviewDecision> + Send + 'a>>;

/// Sees each complete call before it runs and decides about it.
///
/// Implemented for any `Fn(&ToolCall) -> ReviewDecision`:
///
/// ```
/// use llmchain::chain::{ReviewDecision, ReviewHandler};
/// let handler = |call: &llmchain::message::ToolCall| {
///     if call.name.as_deref() == Some("delete_file") { ReviewDecision::Interrupt } else { ReviewDecision::Approve }
/// };
/// fn takes(_: impl ReviewHandler) {}
/// takes(handler);
/// ```
pub trait ReviewHandler: Send + Sync {
    /// Decides about one call.
    fn review<'a>(&'a self, call: &'a ToolCall) -> ReviewFuture<'a>;
}

impl<F> ReviewHandler for F
where
    F: Fn(&ToolCall) -> ReviewDecision + Send + Sync,
{
    fn review<'a>(&'a self, call: &'a ToolCall) -> ReviewFuture<'a> {
        let d = self(call);
        Box::pin(async move { d })
    }
}

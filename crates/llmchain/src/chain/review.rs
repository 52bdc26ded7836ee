//! Human review: the `on_tool_call_review` handler and the decisions a human makes on resume.

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::message::ToolCall;
use crate::policy::Ruling;

/// What a review handler decides about one call, before it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
#[non_exhaustive]
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
    /// Pause the run until a human decides (see [`HumanDecision`]). A decision this
    /// version does not know (stored by a newer one) reads as this: the call waits for
    /// a person, never runs on a guess.
    #[serde(other)]
    Interrupt,
}

/// What a human decides about a paused call, on resume: the same words as
/// [`ReviewDecision`] (a human cannot pause a call again).
///
/// Deliberately **not** `#[non_exhaustive]`: the review inbox records each decision as
/// a status of its own (`llmchain-store`'s `ReviewStatus::of` matches this closed set),
/// so a new kind of decision is a new status there, never one guessed by a wildcard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "decision",
    rename_all = "snake_case",
    from = "HumanDecisionWire"
)]
pub enum HumanDecision {
    /// Run the call as it is.
    Approve,
    /// Run the call with these arguments.
    Edit {
        /// The new arguments.
        arguments: Map<String, Value>,
    },
    /// Do not run it; reported as a decision (`is_error: false`), as
    /// [`ReviewDecision::Deny`]. A default text is used when `reason` is `None`.
    Deny {
        /// Shown to the model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Do not run it; reported as an error + refusal, as [`ReviewDecision::Reject`]
    /// (counts against the failure budget; the model may send a corrected call). A
    /// default text is used when `reason` is `None`.
    Reject {
        /// Shown to the model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

impl HumanDecision {
    /// The review decision it stands for; `name` is the tool's, for the default texts.
    pub(crate) fn into_review(self, name: &str) -> ReviewDecision {
        // A denial and a rejection differ (an answer, or an error the model may correct),
        // and so do their default words.
        let text = |reason: Option<String>, verb: &str| {
            reason.unwrap_or_else(|| format!("Tool call '{name}' was {verb} by a human reviewer."))
        };
        match self {
            HumanDecision::Approve => ReviewDecision::Approve,
            HumanDecision::Edit { arguments } => ReviewDecision::Edit { arguments },
            HumanDecision::Deny { reason } => ReviewDecision::Deny {
                reason: text(reason, "denied"),
            },
            HumanDecision::Reject { reason } => ReviewDecision::Reject {
                reason: text(reason, "rejected"),
            },
        }
    }
}

/// [`HumanDecision`] as it may be read, including the older spelling of a denial
/// (`{"decision": "reject", "as_denial": true}`).
#[derive(Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
enum HumanDecisionWire {
    Approve,
    Edit {
        arguments: Map<String, Value>,
    },
    Deny {
        #[serde(default)]
        reason: Option<String>,
    },
    Reject {
        #[serde(default)]
        reason: Option<String>,
        #[serde(default)]
        as_denial: bool,
    },
}

impl From<HumanDecisionWire> for HumanDecision {
    fn from(w: HumanDecisionWire) -> Self {
        match w {
            HumanDecisionWire::Approve => HumanDecision::Approve,
            HumanDecisionWire::Edit { arguments } => HumanDecision::Edit { arguments },
            HumanDecisionWire::Deny { reason }
            | HumanDecisionWire::Reject {
                reason,
                as_denial: true,
            } => HumanDecision::Deny { reason },
            HumanDecisionWire::Reject { reason, .. } => HumanDecision::Reject { reason },
        }
    }
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

    /// Decides about a call a policy rule sends to a person (`ask`). The default
    /// pauses it for the review inbox ([`ReviewDecision::Interrupt`]); a handler that
    /// can ask a person now (a terminal) asks. Approving it here without a person
    /// would overrule the rule.
    fn review_asked<'a>(&'a self, call: &'a ToolCall, ruling: &'a Ruling) -> ReviewFuture<'a> {
        let _ = (call, ruling);
        Box::pin(async { ReviewDecision::Interrupt })
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_decision_this_version_does_not_know_waits_for_a_person() {
        let d: ReviewDecision =
            serde_json::from_str(r#"{"decision": "approve_always", "scope": "tool"}"#).unwrap();
        assert_eq!(d, ReviewDecision::Interrupt);
        let d: ReviewDecision =
            serde_json::from_str(r#"{"decision": "deny", "reason": "no"}"#).unwrap();
        assert_eq!(
            d,
            ReviewDecision::Deny {
                reason: "no".into()
            }
        );
    }

    #[test]
    fn human_decisions_read_both_spellings_of_a_denial() {
        let d: HumanDecision =
            serde_json::from_value(json!({"decision": "reject", "as_denial": true})).unwrap();
        assert_eq!(d, HumanDecision::Deny { reason: None });
        let d: HumanDecision =
            serde_json::from_value(json!({"decision": "deny", "reason": "no"})).unwrap();
        assert_eq!(
            d,
            HumanDecision::Deny {
                reason: Some("no".into())
            }
        );
        let d: HumanDecision = serde_json::from_value(json!({"decision": "reject"})).unwrap();
        assert_eq!(d, HumanDecision::Reject { reason: None });
        let back = serde_json::to_value(HumanDecision::Deny { reason: None }).unwrap();
        assert_eq!(back, json!({"decision": "deny"}));
        assert_eq!(
            HumanDecision::Deny { reason: None }.into_review("rm"),
            ReviewDecision::Deny {
                reason: "Tool call 'rm' was denied by a human reviewer.".into()
            }
        );
        assert_eq!(
            HumanDecision::Reject { reason: None }.into_review("rm"),
            ReviewDecision::Reject {
                reason: "Tool call 'rm' was rejected by a human reviewer.".into()
            }
        );
    }
}

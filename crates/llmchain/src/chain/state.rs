//! [`ChainState`]: a chain's durable state — what a paused chain serialises to and
//! resumes from, in another process if need be.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::budget::Spent;
use super::journal::Journal;
use super::review::ReviewDecision;
use crate::conversation::Conversation;

/// One call of a batch paused for review.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingCall {
    /// The call's id.
    pub call_id: String,
    /// The tool name.
    pub name: String,
    /// The handler's decision; `None` while a human has to decide.
    pub decision: Option<ReviewDecision>,
    /// The policy rule behind the decision (or behind sending it to a person).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

/// A batch of calls waiting for human decisions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingReview {
    /// Position of the assistant message holding the calls.
    pub message_position: usize,
    /// Every complete call of that message, in call order.
    pub calls: Vec<PendingCall>,
}

impl PendingReview {
    /// The calls a human must decide about, in call order.
    pub fn awaiting(&self) -> impl Iterator<Item = &PendingCall> {
        self.calls.iter().filter(|c| c.decision.is_none())
    }
}

/// A tool's interrupt, as returned by a run that stopped at it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolInterrupt {
    /// The call that paused.
    pub tool_call_id: String,
    /// The tool.
    pub name: Option<String>,
    /// The tool's `interrupt_data` (available during the run that produced it).
    pub data: Option<Value>,
}

/// Everything a chain needs to continue later: the conversation and the run state.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ChainState {
    /// The conversation (storage format).
    pub conversation: Conversation,
    /// Consecutive failed tool batches.
    #[serde(default)]
    pub current_failure_count: u32,
    /// Failing call signatures (`tool` + canonical arguments) and how often they failed.
    #[serde(default)]
    pub failing_calls: BTreeMap<String, u32>,
    /// Model calls made by the current mode run.
    #[serde(default)]
    pub run_count: u32,
    /// A batch paused for review.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_review: Option<PendingReview>,
    /// What the run has spent (its budget's counters).
    #[serde(default)]
    pub spent: Spent,
    /// The decisions that changed the run's course, journaled before they took effect.
    #[serde(default, skip_serializing_if = "Journal::is_empty")]
    pub journal: Journal,
    /// The hooks' own state, by `id@version` ([`HookCx::state`](super::HookCx::state)).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hooks: BTreeMap<String, serde_json::Value>,
}

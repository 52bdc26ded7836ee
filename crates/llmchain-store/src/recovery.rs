//! Recovery after a crash (ARCHITECTURE.md, "At most once"): what to do with tool calls whose outcome was not
//! recorded.
//!
//! The rule, applied to every complete call of a complete assistant message that has no
//! result in the conversation:
//!
//! | recorded `execution_status` | tool idempotent | outcome |
//! |---|---|---|
//! | `identified` (never started) | any | [`Recovery::pending`]: run it |
//! | `executing`, or `completed`/`failed` whose result was not stored | yes | [`Recovery::rerun`]: status reset to `identified`, run it again |
//! | same | no | a failed result saying the outcome is unknown ([`Recovery::unknown_outcome`]); status `failed`; never run again |
//!
//! Calls of a message cut off (`length`, `cancelled`) are incomplete and never run, so
//! they are ignored.

use std::collections::HashSet;

use llmchain::conversation::Conversation;
use llmchain::message::{ExecutionStatus, Message, MessageStatus, Role, ToolCall, ToolResult};

/// What [`Store::recover`](crate::Store::recover) found and did.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Recovery {
    /// Failed results (`is_error`) for calls of non-idempotent tools that may have run:
    /// already appended to the conversation as one tool message, with the calls marked
    /// `failed`.
    pub unknown_outcome: Vec<ToolResult>,
    /// Calls of idempotent tools that may have run: marked `identified` again, to be run.
    pub rerun: Vec<ToolCall>,
    /// Calls that never started (`identified`): to be run.
    pub pending: Vec<ToolCall>,
}

impl Recovery {
    /// What carrying the plan out writes, in order: the tool message of unknown
    /// outcomes (when there are any), then each call's new status.
    pub(crate) fn writes(&self) -> (Option<Message>, Vec<(&str, ExecutionStatus)>) {
        let message =
            (!self.unknown_outcome.is_empty()).then(|| Message::tool(self.unknown_outcome.clone()));
        let failed = self
            .unknown_outcome
            .iter()
            .map(|r| (r.tool_call_id.as_str(), ExecutionStatus::Failed));
        let rerun = self
            .rerun
            .iter()
            .filter_map(|c| Some((c.call_id.as_deref()?, ExecutionStatus::Identified)));
        (message, failed.chain(rerun).collect())
    }

    /// True when nothing was outstanding.
    pub fn is_empty(&self) -> bool {
        self.unknown_outcome.is_empty() && self.rerun.is_empty() && self.pending.is_empty()
    }
}

/// Computes the recovery of a loaded conversation (tool calls carrying their statuses).
pub fn plan(conversation: &Conversation, is_idempotent: &dyn Fn(&str) -> bool) -> Recovery {
    let answered: HashSet<&str> = conversation
        .messages
        .iter()
        .flat_map(|m| m.tool_results.iter())
        .map(|r| r.tool_call_id.as_str())
        .collect();
    let mut out = Recovery::default();
    for call in outstanding_calls(&conversation.messages) {
        let Some(id) = call.call_id.as_deref() else {
            continue;
        };
        if answered.contains(id) {
            continue;
        }
        let name = call.name.as_deref().unwrap_or("");
        // The chain's own rule (`ToolCall::may_have_run`) and its answer: one rule.
        if !call.may_have_run() {
            // Never started (or denied, rejected): nothing of it can have run, so it
            // is reviewed again like a call just seen.
            out.pending.push(call.clone());
        } else if is_idempotent(name) {
            out.rerun.push(
                call.clone()
                    .with_execution_status(ExecutionStatus::Identified),
            );
        } else {
            out.unknown_outcome
                .push(ToolResult::outcome_unknown(id, name));
        }
    }
    out
}

fn outstanding_calls(messages: &[Message]) -> impl Iterator<Item = &ToolCall> {
    messages
        .iter()
        .filter(|m| m.role == Role::Assistant && m.status == MessageStatus::Complete)
        .flat_map(|m| m.tool_calls.iter())
        .filter(|c| c.is_complete())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv(calls: Vec<ToolCall>, results: Vec<ToolResult>) -> Conversation {
        let mut c = Conversation::new();
        c.messages.push(Message::user("go"));
        c.messages.push(Message::assistant_with_calls("", calls));
        if !results.is_empty() {
            c.messages.push(Message::tool(results));
        }
        c
    }

    fn call(id: &str, name: &str, status: ExecutionStatus) -> ToolCall {
        ToolCall::function(id, name, serde_json::json!({}))
            .unwrap()
            .with_execution_status(status)
    }

    #[test]
    fn classifies_each_case() {
        let c = conv(
            vec![
                call("a", "send_mail", ExecutionStatus::Executing),
                call("b", "read", ExecutionStatus::Executing),
                call("c", "send_mail", ExecutionStatus::Identified),
                call("d", "send_mail", ExecutionStatus::Completed),
                call("e", "send_mail", ExecutionStatus::Completed),
            ],
            vec![ToolResult::text("e", "sent")],
        );
        let r = plan(&c, &|n| n == "read");
        assert_eq!(r.unknown_outcome.len(), 2);
        assert_eq!(r.unknown_outcome[0].tool_call_id, "a");
        assert_eq!(r.unknown_outcome[1].tool_call_id, "d");
        assert!(r.unknown_outcome[0].is_error());
        assert!(!r.unknown_outcome[0].is_refusal());
        assert!(r.unknown_outcome[0].content_text().contains("is unknown"));
        assert_eq!(r.unknown_outcome[0].name.as_deref(), Some("send_mail"));
        assert_eq!(r.rerun.len(), 1);
        assert_eq!(r.rerun[0].execution_status(), "identified");
        assert_eq!(r.pending.len(), 1);
        assert_eq!(r.pending[0].call_id.as_deref(), Some("c"));
    }

    #[test]
    fn cut_off_messages_are_ignored() {
        let mut c = conv(vec![call("a", "x", ExecutionStatus::Executing)], vec![]);
        c.messages[1].status = MessageStatus::Length;
        assert!(plan(&c, &|_| false).is_empty());
    }
}

//! The calls of the newest answer that no tool message answers yet: what the chain runs
//! next, and what must be answered before anything else is added to a conversation (a
//! provider refuses a request in which a call has no result).

use std::collections::HashSet;

use crate::message::{Message, MessageStatus, Role};

/// The position of the newest assistant message some of whose calls have no result yet,
/// with the indices of those calls; `None` when every call is answered.
///
/// Only the newest message that is not a tool message is looked at: normally its
/// results are missing altogether (it is the last message); after a crash it may be
/// followed by a tool message answering only some calls. A message cut off (`length`,
/// `cancelled`) has no calls to run.
///
/// ```
/// use llmchain::conversation::unanswered_calls;
/// use llmchain::message::{Message, ToolCall, ToolResult};
///
/// let call = |id: &str| ToolCall::function(id, "f", serde_json::json!({})).unwrap();
/// let mut messages = vec![
///     Message::user("go"),
///     Message::assistant_with_calls("", vec![call("a"), call("b")]),
/// ];
/// assert_eq!(unanswered_calls(&messages), Some((1, vec![0, 1])));
/// messages.push(Message::tool(vec![ToolResult::text("a", "ok")]));
/// assert_eq!(unanswered_calls(&messages), Some((1, vec![1])));
/// messages.push(Message::tool(vec![ToolResult::text("b", "ok")]));
/// assert_eq!(unanswered_calls(&messages), None);
/// ```
pub fn unanswered_calls(messages: &[Message]) -> Option<(usize, Vec<usize>)> {
    let position = messages.iter().rposition(|m| m.role != Role::Tool)?;
    let m = &messages[position];
    if m.role != Role::Assistant || m.status != MessageStatus::Complete || m.tool_calls.is_empty() {
        return None;
    }
    let calls = unanswered_in(messages, position);
    (!calls.is_empty()).then_some((position, calls))
}

/// Indices of the calls of the assistant message at `position` that no later tool
/// message answers.
pub(crate) fn unanswered_in(messages: &[Message], position: usize) -> Vec<usize> {
    let answered: HashSet<&str> = messages[position + 1..]
        .iter()
        .flat_map(|m| m.tool_results.iter().map(|r| r.tool_call_id.as_str()))
        .collect();
    messages[position]
        .tool_calls
        .iter()
        .enumerate()
        .filter(|(_, c)| !c.call_id.as_deref().is_some_and(|id| answered.contains(id)))
        .map(|(i, _)| i)
        .collect()
}

//! The history check before every model call: every call of a finished answer has its
//! result, right after it, as every provider requires.
//!
//! A call can be left without a result by a crash between a run's answer and its
//! tools' batch, or by a conversation taken up with a new message (an import, another
//! front end). The providers refuse such a request outright (OpenAI: "An assistant
//! message with 'tool_calls' must be followed by tool messages…"), so the conversation
//! would be stuck. Before each model call the chain finds these calls and sends each an
//! "interrupted" answer, journaled once ([`Decision::Interrupted`](super::Decision::Interrupted))
//! so the record says which calls never had a result; the stored messages are not
//! changed (nothing is inserted between messages another process may be reading).
//! A call waiting for review is never answered here: a run paused for review never
//! calls the model.

use crate::conversation::Conversation;
use crate::message::{Message, MessageStatus, Role, ToolResult};

/// The answer a call left without a result is sent.
pub(super) const INTERRUPTED: &str = "Interrupted: this call has no result (the run that made it \
     ended before its result was stored); it was not run again.";

/// Each finished answer's calls that have no result in the tool messages right after
/// it: (the answer's position, the call's id, its tool's name).
pub(super) fn orphaned(conversation: &Conversation) -> Vec<(usize, String, String)> {
    let messages = &conversation.messages;
    let mut out = Vec::new();
    for (p, m) in messages.iter().enumerate() {
        if m.role != Role::Assistant
            || m.tool_calls.is_empty()
            || m.status != MessageStatus::Complete
        {
            continue;
        }
        // The newest answer's calls are the batch about to run, not orphans.
        if !has_later_turn(messages, p) {
            continue;
        }
        // Checked on every model call, over the whole history: no allocation, a scan of
        // the (few, capped per turn) results right after the answer.
        let answered = |id: &str| {
            messages[p + 1..]
                .iter()
                .take_while(|n| n.role == Role::Tool)
                .flat_map(|n| n.tool_results.iter())
                .any(|r| r.tool_call_id == id)
        };
        for c in &m.tool_calls {
            let Some(id) = c.call_id.as_deref().filter(|id| !id.is_empty()) else {
                continue;
            };
            if c.is_complete() && !answered(id) {
                out.push((p, id.to_owned(), c.name.clone().unwrap_or_default()));
            }
        }
    }
    out
}

/// Whether anything but tool messages follows position `p`.
fn has_later_turn(messages: &[Message], p: usize) -> bool {
    messages[p + 1..].iter().any(|n| n.role != Role::Tool)
}

/// `conversation` with every orphan answered: its result appended to the tool message
/// right after its answer, or a tool message of its own inserted there.
pub(super) fn answered(
    conversation: &Conversation,
    orphans: &[(usize, String, String)],
) -> Conversation {
    let mut out = conversation.clone();
    // From the last answer back, so earlier positions stay valid.
    let mut by_answer: Vec<(usize, Vec<ToolResult>)> = Vec::new();
    for (p, id, name) in orphans {
        let r = ToolResult::refusal(id, INTERRUPTED).with_name(name);
        match by_answer.last_mut() {
            Some((q, list)) if q == p => list.push(r),
            _ => by_answer.push((*p, vec![r])),
        }
    }
    for (p, results) in by_answer.into_iter().rev() {
        match out.messages.get_mut(p + 1) {
            Some(next) if next.role == Role::Tool => next.tool_results.extend(results),
            _ => out.messages.insert(p + 1, Message::tool(results)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;

    fn answer(ids: &[&str]) -> Message {
        let mut m = Message::assistant("");
        m.tool_calls = ids
            .iter()
            .map(|id| ToolCall::function(*id, "act", serde_json::json!({})).unwrap())
            .collect();
        m
    }

    #[test]
    fn orphans_are_found_and_answered_in_place() {
        let mut conv = Conversation::new();
        conv.messages.push(Message::user("a"));
        conv.messages.push(answer(&["c1", "c2"]));
        conv.messages
            .push(Message::tool(vec![ToolResult::text("c1", "ok")]));
        conv.messages.push(Message::user("b"));
        conv.messages.push(answer(&["c3"]));
        conv.messages.push(Message::user("c"));
        conv.messages.push(answer(&["c4"]));
        let orphans = orphaned(&conv);
        let ids: Vec<&str> = orphans.iter().map(|(_, id, _)| id.as_str()).collect();
        // c4 is the batch about to run, not an orphan.
        assert_eq!(ids, ["c2", "c3"]);
        let fixed = answered(&conv, &orphans);
        assert!(orphaned(&fixed).is_empty());
        assert_eq!(fixed.messages[2].tool_results.len(), 2);
        assert_eq!(fixed.messages[5].role, Role::Tool);
        assert!(
            fixed.messages[5].tool_results[0]
                .content_text()
                .starts_with("Interrupted")
        );
        assert_eq!(fixed.messages.len(), conv.messages.len() + 1);
    }
}

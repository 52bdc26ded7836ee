//! Keeping a request within the model's context window without breaking a call from
//! its result. Non-destructive: only the request sent is changed; the stored
//! conversation keeps every message, for audit, export and `conversations show`.
//!
//! Before each model call whose estimated size passes the window (less a reserve for
//! the answer), passes run in order until it fits:
//!
//! 1. **Clear old tool results**, oldest first: the call stays, its result becomes a
//!    placeholder that names the tool and the size cleared.
//! 2. **Drop the oldest turn groups** (a person's message and everything up to the
//!    next), as a last resort. A group holds its calls with their results, so no pair
//!    is broken.
//!
//! The newest group (the question being answered, its calls and results) is never
//! touched, and a call waiting for review is never compacted (a run paused for review
//! does not call the model). What was done is journaled once
//! ([`Decision::Compacted`](super::Decision::Compacted)). Summaries of old groups by a
//! model are not done yet.
//!
//! Sizes are **estimated** (4 bytes of text a token, the usual rule for English; no
//! tokenizer is bundled and the providers' count endpoints cost a round trip), and the
//! journal says so.

use crate::conversation::Conversation;
use crate::message::{ContentPart, Role};

/// When the window table was read from the providers' model pages.
pub const CONTEXT_WINDOWS_READ: &str = "2026-12-01";

/// The context windows (tokens) of the built-in providers' default models, as
/// [`crate::http`] names them (the same models as the price table).
const WINDOWS: &[(&str, u32)] = &[
    ("gpt-4.1", 1_047_576),
    ("openai/gpt-4.1", 1_047_576),
    ("gpt-4.1-mini", 1_047_576),
    ("gpt-5", 400_000),
    ("gpt-5-mini", 400_000),
    ("claude-sonnet-4-5", 200_000),
    ("claude-sonnet-4-5@20250929", 200_000),
    ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", 200_000),
    ("gemini-2.5-flash", 1_048_576),
    ("mistral-large-latest", 131_072),
    ("deepseek-chat", 128_000),
    ("llama-3.3-70b-versatile", 131_072),
    ("grok-4", 256_000),
    ("meta-llama/Llama-3.3-70B-Instruct-Turbo", 131_072),
    ("llama3.2", 131_072),
];

/// The built-in context window of `model`, in tokens, when the table has it.
pub fn context_window(model: &str) -> Option<u32> {
    WINDOWS.iter().find(|(m, _)| *m == model).map(|(_, w)| *w)
}

/// Bytes of text per estimated token.
const BYTES_PER_TOKEN: u64 = 4;

/// The estimated tokens of a request: its text, call arguments, results, system
/// prompt and tool definitions, at 4 bytes a token.
pub fn estimate_tokens(conversation: &Conversation) -> u64 {
    let parts = |p: &[ContentPart]| p.iter().map(|c| c.content.len() as u64).sum::<u64>();
    let mut bytes = conversation.system.as_ref().map_or(0, |s| s.len() as u64);
    for t in &conversation.tools {
        bytes += serde_json::to_vec(t).map_or(0, |v| v.len() as u64);
    }
    for m in &conversation.messages {
        bytes += parts(&m.content);
        for c in &m.tool_calls {
            bytes += c.name.as_deref().map_or(0, |n| n.len() as u64);
            bytes += match &c.arguments {
                Some(crate::message::Arguments::Raw(r)) => r.len() as u64,
                Some(crate::message::Arguments::Object(o)) => {
                    serde_json::to_vec(o).map_or(0, |v| v.len() as u64)
                }
                None => 0,
            };
        }
        for r in &m.tool_results {
            bytes += parts(&r.content);
        }
    }
    bytes.div_ceil(BYTES_PER_TOKEN)
}

/// What compaction did to one request.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Compacted {
    pub(super) window: u32,
    pub(super) before: u64,
    pub(super) after: u64,
    pub(super) cleared: Vec<String>,
    pub(super) dropped_messages: usize,
}

/// The tokens a request may take in a window of `window`: less a reserve for the
/// answer (an eighth of the window, at most 16,384 tokens).
pub(super) fn fits_in(window: u32) -> u64 {
    let window = u64::from(window);
    window - (window / 8).min(16_384)
}

/// `conversation` compacted to fit `window` (see the module docs); `None` when it fits.
pub(super) fn compact(
    conversation: &Conversation,
    window: u32,
) -> Option<(Conversation, Compacted)> {
    let limit = fits_in(window);
    let before = estimate_tokens(conversation);
    if before <= limit {
        return None;
    }
    let mut out = conversation.clone();
    let mut size = before;
    // Where each turn group starts: a person's message.
    let starts: Vec<usize> = out
        .messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::User && !m.is_from_run())
        .map(|(i, _)| i)
        .collect();
    let newest = starts.last().copied().unwrap_or(0);
    let mut cleared = Vec::new();
    // 1. Old results, oldest first.
    'clear: for m in out.messages[..newest].iter_mut() {
        for r in m.tool_results.iter_mut() {
            if size <= limit {
                break 'clear;
            }
            let bytes: usize = r.content.iter().map(|c| c.content.len()).sum();
            let placeholder = format!(
                "[cleared to fit the context window: the result of {} ({bytes} bytes); call \
                 the tool again if it is needed]",
                r.name.as_deref().unwrap_or("the tool")
            );
            if placeholder.len() >= bytes {
                continue;
            }
            size -= ((bytes - placeholder.len()) as u64) / BYTES_PER_TOKEN;
            r.content = vec![ContentPart::text(placeholder)];
            r.display_text = None;
            cleared.push(r.tool_call_id.clone());
        }
    }
    // 2. Whole groups, oldest first, never the newest.
    let mut dropped = 0;
    if size > limit {
        let mut cut = 0;
        for &next in starts.iter().skip(1) {
            if size <= limit || next > newest {
                break;
            }
            let group = Conversation {
                messages: out.messages[cut..next].to_vec(),
                ..Conversation::new()
            };
            size = size.saturating_sub(estimate_tokens(&group));
            cut = next;
        }
        if cut > 0 {
            out.messages.drain(..cut);
            dropped = cut;
        }
    }
    let after = estimate_tokens(&out);
    Some((
        out,
        Compacted {
            window,
            before,
            after,
            cleared,
            dropped_messages: dropped,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Message, ToolCall, ToolResult};

    fn turn(conv: &mut Conversation, q: &str, id: &str, result_bytes: usize) {
        conv.messages.push(Message::user(q));
        let mut a = Message::assistant("");
        a.tool_calls =
            vec![ToolCall::function(id, "read_file", serde_json::json!({"path": "a"})).unwrap()];
        conv.messages.push(a);
        conv.messages.push(Message::tool(vec![
            ToolResult::text(id, "x".repeat(result_bytes)).with_name("read_file"),
        ]));
        conv.messages.push(Message::assistant("done"));
    }

    #[test]
    fn old_results_are_cleared_first_and_the_newest_group_is_never_touched() {
        let mut conv = Conversation::new();
        for i in 0..4 {
            turn(&mut conv, &format!("q{i}"), &format!("c{i}"), 40_000);
        }
        // 4 results of ~10,000 tokens; a window that fits about two.
        let (out, done) = compact(&conv, 24_000).unwrap();
        assert_eq!(done.cleared, ["c0", "c1"]);
        assert_eq!(done.dropped_messages, 0);
        assert!(done.after <= fits_in(24_000), "{done:?}");
        assert!(
            out.messages[2].tool_results[0]
                .content_text()
                .starts_with("[cleared")
        );
        // The newest group as it was; every call still has its result.
        assert_eq!(out.messages[14], conv.messages[14]);
        assert!(out.inconsistencies().is_empty());
        assert!(compact(&conv, 1_000_000).is_none());
    }

    #[test]
    fn whole_groups_go_last_and_never_the_newest() {
        let mut conv = Conversation::new();
        for i in 0..4 {
            conv.messages.push(Message::user("question ".repeat(2_000)));
            conv.messages
                .push(Message::assistant(format!("answer {i} ").repeat(2_000)));
        }
        let (out, done) = compact(&conv, 12_000).unwrap();
        assert!(
            done.dropped_messages >= 2 && done.dropped_messages % 2 == 0,
            "{done:?}"
        );
        assert_eq!(out.messages.last(), conv.messages.last());
        assert_eq!(out.messages[0].role, Role::User);
        // Even a window too small for the newest group keeps it.
        let (out, _) = compact(&conv, 100).unwrap();
        assert_eq!(out.messages.len(), 2);
    }
}

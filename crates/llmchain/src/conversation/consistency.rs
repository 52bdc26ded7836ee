//! What a provider would make of a conversation's tool calls and results: the calls that
//! are replayed in a request ([`sendable`]), and the [`Inconsistency`]s a request built
//! from it would carry ([`Conversation::inconsistencies`]).
//!
//! The encoders stay lenient, because a conversation the chain itself made must always
//! be sendable: a call whose argument text is not a JSON object is sent as `{}` (its
//! result already told the model what went wrong), and a call cut off mid-stream with no
//! result is left out. What no provider accepts (a result that answers no call, two
//! calls with one id, a call left unanswered) is reported here, so a tool such as
//! `llmchain encode` can refuse it with the JSON path instead of sending a request that
//! fails.

use std::collections::{HashMap, HashSet};
use std::fmt;

use super::Conversation;
use crate::message::{Arguments, Message, MessageStatus, Role, ToolCall};

/// Ids answered by some tool result in the conversation. Only consulted for calls that
/// are not complete, so it stays empty (no hashing) when every call is complete.
pub(crate) fn answered_ids(conv: &Conversation) -> HashSet<&str> {
    let any_incomplete = conv.messages.iter().any(|m| {
        m.tool_calls
            .iter()
            .any(|c| !(c.is_complete() && m.status == MessageStatus::Complete))
    });
    if !any_incomplete {
        return HashSet::new();
    }
    conv.messages
        .iter()
        .flat_map(|m| m.tool_results.iter())
        .map(|r| r.tool_call_id.as_str())
        .collect()
}

/// Calls worth replaying: complete ones, and incomplete ones a result answers (a call
/// of a cut-off message with no result would make the API reject the request).
pub(crate) fn sendable<'a>(
    m: &'a Message,
    answered: &'a HashSet<&str>,
) -> impl Iterator<Item = &'a ToolCall> + 'a {
    m.tool_calls
        .iter()
        .filter(move |c| replayed(m, c, answered))
}

/// The calls of `m` a provider that does not need ids is sent (Anthropic, Bedrock,
/// Gemini, Ollama): the complete calls of a complete message (with or without an id),
/// and the incomplete ones a result answers. A call of a cut-off message that nothing
/// answers is left out: the API would refuse a call without its result.
pub(crate) fn replayable<'a>(
    m: &'a Message,
    answered: &'a HashSet<&str>,
) -> impl Iterator<Item = &'a ToolCall> + 'a {
    m.tool_calls.iter().filter(move |c| {
        (c.is_complete() && m.status == MessageStatus::Complete)
            || c.call_id.as_deref().is_some_and(|id| answered.contains(id))
    })
}

/// Whether `call` of `m` is replayed (see [`sendable`]).
fn replayed(m: &Message, call: &ToolCall, answered: &HashSet<&str>) -> bool {
    let Some(id) = call.call_id.as_deref().filter(|s| !s.is_empty()) else {
        return false;
    };
    (call.is_complete() && m.status == MessageStatus::Complete) || answered.contains(id)
}

/// The calls of `waiting` (id → order, path), emptied, in their order.
fn in_order(waiting: &mut HashMap<&str, (usize, String)>) -> Vec<(String, String)> {
    let mut left: Vec<_> = waiting.drain().collect();
    left.sort_unstable_by_key(|(_, (n, _))| *n);
    left.into_iter()
        .map(|(id, (_, path))| (id.to_owned(), path))
        .collect()
}

/// How a provider meets an [`Inconsistency`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Severity {
    /// The request is refused by the providers (OpenAI, Anthropic, Gemini all check
    /// that calls and results pair up).
    Refused,
    /// The request is sent, with this part in another form than stored.
    Altered,
}

/// One place where a conversation's calls and results do not pair up as the providers
/// require, or are sent in another form than stored.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Inconsistency {
    /// The JSON path in the conversation file, e.g. `messages[3].tool_results[0]`.
    pub path: String,
    /// What the providers do about it.
    pub severity: Severity,
    /// What is wrong, for a person.
    pub message: String,
}

impl fmt::Display for Inconsistency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl Conversation {
    /// Every place where a request made of this conversation would be refused, or sent
    /// altered, in message order. Empty for every conversation the chain makes.
    pub fn inconsistencies(&self) -> Vec<Inconsistency> {
        let answered = answered_ids(self);
        let mut out = Vec::new();
        let mut problem = |path: String, severity, message: String| {
            out.push(Inconsistency {
                path,
                severity,
                message,
            })
        };
        // Every replayed call by id (for duplicates and orphan results), and the calls
        // still waiting for a result (by id, with their order).
        let mut calls: HashMap<&str, String> = HashMap::new();
        let mut waiting: HashMap<&str, (usize, String)> = HashMap::new();
        for (i, m) in self.messages.iter().enumerate() {
            if m.role != Role::Tool && !waiting.is_empty() {
                for (id, path) in in_order(&mut waiting) {
                    problem(
                        path,
                        Severity::Refused,
                        format!(
                            "call {id:?} has no result before messages[{i}]: every call must be answered before the conversation goes on"
                        ),
                    );
                }
            }
            for (j, call) in m.tool_calls.iter().enumerate() {
                if !replayed(m, call, &answered) {
                    continue;
                }
                let path = format!("messages[{i}].tool_calls[{j}]");
                let id = call.call_id.as_deref().unwrap_or_default();
                if let Some(first) = calls.get(id) {
                    problem(
                        format!("{path}.call_id"),
                        Severity::Refused,
                        format!(
                            "call id {id:?} was already used by {first}: results are matched to calls by id"
                        ),
                    );
                    continue;
                }
                if let Some(Arguments::Raw(text)) = &call.arguments
                    && !serde_json::from_str::<serde_json::Value>(text).is_ok_and(|v| v.is_object())
                {
                    problem(
                        format!("{path}.arguments"),
                        Severity::Altered,
                        "the argument text is not a JSON object; it is sent as {} (providers accept only objects)".into(),
                    );
                }
                calls.insert(id, path.clone());
                waiting.insert(id, (calls.len(), path));
            }
            for (j, result) in m.tool_results.iter().enumerate() {
                let id = result.tool_call_id.as_str();
                let path = format!("messages[{i}].tool_results[{j}]");
                match waiting.remove(id) {
                    Some(_) => {}
                    None if calls.contains_key(id) => problem(
                        format!("{path}.tool_call_id"),
                        Severity::Refused,
                        format!(
                            "call {id:?} was already answered, or is not the latest assistant message's"
                        ),
                    ),
                    None => problem(
                        format!("{path}.tool_call_id"),
                        Severity::Refused,
                        format!("no earlier tool call has id {id:?}: a result must answer a call"),
                    ),
                }
            }
        }
        for (id, path) in in_order(&mut waiting) {
            problem(
                path,
                Severity::Refused,
                format!(
                    "call {id:?} has no result: run the tool (or deny it) before the next request"
                ),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv(messages: &str) -> Conversation {
        Conversation::from_json(&format!(r#"{{"version":1,"messages":[{messages}]}}"#)).unwrap()
    }

    fn call(id: &str, args: &str) -> String {
        format!(
            r#"{{"type":"function","status":"complete","call_id":"{id}","name":"f","arguments":{args}}}"#
        )
    }

    fn assistant(calls: &[String]) -> String {
        format!(
            r#"{{"role":"assistant","status":"complete","tool_calls":[{}]}}"#,
            calls.join(",")
        )
    }

    fn results(ids: &[&str]) -> String {
        let r: Vec<String> = ids
            .iter()
            .map(|id| {
                format!(
                    r#"{{"type":"function","tool_call_id":"{id}","content":[{{"type":"text","content":"ok"}}]}}"#
                )
            })
            .collect();
        format!(r#"{{"role":"tool","tool_results":[{}]}}"#, r.join(","))
    }

    const USER: &str = r#"{"role":"user","content":"hi"}"#;

    fn found(c: &Conversation) -> Vec<String> {
        c.inconsistencies().iter().map(|i| i.to_string()).collect()
    }

    #[test]
    fn a_paired_conversation_has_none() {
        let c = conv(
            &[
                USER.to_owned(),
                assistant(&[call("a", "{}"), call("b", r#"{"x":1}"#)]),
                results(&["b"]),
                results(&["a"]),
                assistant(&[call("c", "{}")]),
                results(&["c"]),
                USER.to_owned(),
            ]
            .join(","),
        );
        assert_eq!(found(&c), Vec::<String>::new());
    }

    #[test]
    fn orphans_duplicates_unanswered_and_altered_arguments_are_named_by_path() {
        let invalid = r#"{"type":"function","status":"incomplete","call_id":"d","name":"f","arguments":"{\"x\": tru"}"#;
        let c = conv(
            &[
                results(&["ghost"]),
                assistant(&[call("a", "{}"), call("a", "{}")]),
                results(&["a", "a"]),
                assistant(&[call("b", "{}")]),
                USER.to_owned(),
                format!(r#"{{"role":"assistant","status":"complete","tool_calls":[{invalid}]}}"#),
                results(&["d"]),
                assistant(&[call("e", "{}")]),
            ]
            .join(","),
        );
        let got = c.inconsistencies();
        let text: Vec<String> = got.iter().map(|i| i.to_string()).collect();
        assert_eq!(
            text,
            [
                r#"messages[0].tool_results[0].tool_call_id: no earlier tool call has id "ghost": a result must answer a call"#,
                r#"messages[1].tool_calls[1].call_id: call id "a" was already used by messages[1].tool_calls[0]: results are matched to calls by id"#,
                r#"messages[2].tool_results[1].tool_call_id: call "a" was already answered, or is not the latest assistant message's"#,
                r#"messages[3].tool_calls[0]: call "b" has no result before messages[4]: every call must be answered before the conversation goes on"#,
                "messages[5].tool_calls[0].arguments: the argument text is not a JSON object; it is sent as {} (providers accept only objects)",
                r#"messages[7].tool_calls[0]: call "e" has no result: run the tool (or deny it) before the next request"#,
            ]
        );
        let altered: Vec<_> = got
            .iter()
            .filter(|i| i.severity == Severity::Altered)
            .map(|i| i.path.as_str())
            .collect();
        assert_eq!(altered, ["messages[5].tool_calls[0].arguments"]);
    }

    #[test]
    fn a_cut_off_call_without_a_result_is_left_out_not_reported() {
        let cut = r#"{"role":"assistant","status":"cancelled","tool_calls":[{"type":"function","status":"incomplete","call_id":"z","name":"f","arguments":"{\"a"}]}"#;
        let c = conv(&[USER.to_owned(), cut.to_owned(), USER.to_owned()].join(","));
        assert_eq!(found(&c), Vec::<String>::new());
    }

    #[test]
    fn twenty_thousand_calls_answered_in_reverse_pair_up() {
        // Waiting calls are found by id (a hash map), not by a scan per result.
        let ids: Vec<String> = (0..20_000).map(|n| format!("c{n}")).collect();
        let calls: Vec<String> = ids.iter().map(|id| call(id, "{}")).collect();
        let rev: Vec<&str> = ids.iter().rev().map(String::as_str).collect();
        let c = conv(&[assistant(&calls), results(&rev)].join(","));
        assert!(c.inconsistencies().is_empty());
    }
}

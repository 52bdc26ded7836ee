//! Catching a stale client up. A client that answers an approval the store already has
//! an outcome for (the call was approved from `llmchain reviews`, another tab, another
//! server; the client sends again after a lost response) holds a message that stops at
//! the request. Its `sendAutomaticallyWhen` check would post the same answer again after
//! every response that leaves the call `approval-responded`: a loop. So the response
//! first gives it what the store holds since: the outcome of each answered call, then
//! each later step of the answer. The chain then goes on as usual (usually: nothing left
//! to do).

use std::collections::HashSet;

use serde_json::Value;

use crate::protocol::Chunk;

/// The chunks that bring a client holding `message` (as it was when the approvals
/// with ids in `answered` were requested) up to the stored `message`, a UI message
/// of [`crate::ui::ui_messages`]. Empty when no answered call has an outcome yet (the
/// usual case: the answer is what lets it run).
pub(crate) fn chunks(message: &Value, answered: &HashSet<String>) -> Vec<Chunk> {
    let Some(parts) = message.get("parts").and_then(Value::as_array) else {
        return Vec::new();
    };
    let approval_of = |p: &Value| {
        p.pointer("/approval/id")
            .and_then(Value::as_str)
            .is_some_and(|id| answered.contains(id))
    };
    // The step holding the answered calls; only what follows it is new to the client.
    let Some(at) = parts.iter().rposition(approval_of) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for part in parts[..at + 1].iter().rev() {
        if part["type"] == "step-start" {
            break;
        }
        if approval_of(part) {
            out.extend(outcome(part));
        }
    }
    if out.is_empty() {
        return out;
    }
    let mut open = false;
    let mut n = 0;
    for part in &parts[at + 1..] {
        let kind = part["type"].as_str().unwrap_or_default();
        match kind {
            "step-start" => {
                if open {
                    out.push(Chunk::FinishStep);
                }
                out.push(Chunk::StartStep);
                open = true;
            }
            "text" | "reasoning" => {
                n += 1;
                let id = format!("c{n}");
                let text = part["text"].as_str().unwrap_or_default().to_owned();
                if kind == "text" {
                    out.push(Chunk::TextStart { id: id.clone() });
                    out.push(Chunk::TextDelta {
                        id: id.clone(),
                        delta: text,
                    });
                    out.push(Chunk::TextEnd { id });
                } else {
                    out.push(Chunk::ReasoningStart { id: id.clone() });
                    out.push(Chunk::ReasoningDelta {
                        id: id.clone(),
                        delta: text,
                    });
                    out.push(Chunk::ReasoningEnd { id });
                }
            }
            _ if kind.starts_with("tool-") => {
                let id = part["toolCallId"].as_str().unwrap_or_default().to_owned();
                out.push(Chunk::ToolInputAvailable {
                    tool_call_id: id,
                    tool_name: kind["tool-".len()..].to_owned(),
                    input: part.get("input").cloned().unwrap_or(Value::Null),
                });
                // A call that waits is asked about by the chain's own turn.
                out.extend(outcome(part));
            }
            _ => {}
        }
    }
    if open {
        out.push(Chunk::FinishStep);
    }
    out
}

/// The chunk of a tool part's stored outcome, if it has one.
fn outcome(part: &Value) -> Option<Chunk> {
    let id = part["toolCallId"].as_str().unwrap_or_default().to_owned();
    match part["state"].as_str()? {
        "output-available" => Some(Chunk::ToolOutputAvailable {
            tool_call_id: id,
            output: part.get("output").cloned().unwrap_or(Value::Null),
        }),
        "output-error" => Some(Chunk::ToolOutputError {
            tool_call_id: id,
            error_text: part["errorText"].as_str().unwrap_or_default().to_owned(),
        }),
        "output-denied" => Some(Chunk::ToolOutputDenied { tool_call_id: id }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn types(chunks: &[Chunk]) -> Vec<String> {
        chunks
            .iter()
            .map(|c| {
                serde_json::to_value(c).unwrap()["type"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    }

    #[test]
    fn a_decided_call_gets_its_outcome_and_the_steps_after_it() {
        let message = json!({"id": "m1", "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "text", "text": "Writing."},
            {"type": "tool-write", "toolCallId": "c1", "input": {"p": 1},
             "state": "output-available", "output": "done",
             "approval": {"id": "r1", "approved": true}},
            {"type": "step-start"},
            {"type": "reasoning", "text": "ok"},
            {"type": "text", "text": "Written."},
        ]});
        let answered = HashSet::from(["r1".to_owned()]);
        let c = chunks(&message, &answered);
        assert_eq!(
            types(&c),
            [
                "tool-output-available",
                "start-step",
                "reasoning-start",
                "reasoning-delta",
                "reasoning-end",
                "text-start",
                "text-delta",
                "text-end",
                "finish-step"
            ]
        );
        let v = serde_json::to_value(&c[6]).unwrap();
        assert_eq!(v["delta"], "Written.");
    }

    #[test]
    fn nothing_when_the_answer_is_what_lets_the_call_run() {
        let message = json!({"parts": [
            {"type": "step-start"},
            {"type": "tool-write", "toolCallId": "c1", "input": {},
             "state": "approval-responded", "approval": {"id": "r1", "approved": true}},
        ]});
        assert!(chunks(&message, &HashSet::from(["r1".to_owned()])).is_empty());
        assert!(chunks(&message, &HashSet::from(["r9".to_owned()])).is_empty());
        assert!(chunks(&json!({}), &HashSet::new()).is_empty());
    }

    #[test]
    fn a_denied_call_and_later_calls_carry_their_states() {
        let message = json!({"parts": [
            {"type": "step-start"},
            {"type": "tool-rm", "toolCallId": "c1", "input": {}, "state": "output-denied",
             "approval": {"id": "r1", "approved": false}},
            {"type": "step-start"},
            {"type": "tool-ls", "toolCallId": "c2", "input": {}, "state": "output-error",
             "errorText": "boom"},
            {"type": "tool-ls", "toolCallId": "c3", "input": {}, "state": "approval-requested",
             "approval": {"id": "r2"}},
        ]});
        let c = chunks(&message, &HashSet::from(["r1".to_owned()]));
        assert_eq!(
            types(&c),
            [
                "tool-output-denied",
                "start-step",
                "tool-input-available",
                "tool-output-error",
                "tool-input-available",
                "finish-step"
            ]
        );
    }
}

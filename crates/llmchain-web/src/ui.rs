//! The AI SDK's UI messages: what a client sends (read loosely, and only the few things
//! a server takes from it), and a stored conversation shown as UI messages.
//!
//! From a request only the new user message (its text) and approval answers (approval
//! id, `approved`, `reason`) are taken; the calls, their arguments and what already ran
//! come from the store. Message ids are the stored sequence number of a message's first
//! message, `m<seq>`: an assistant UI message gathers the assistant and tool messages of
//! one answer (one step per model call), so the same ids come back after a reload.

use llmchain::chain::Journal;
use llmchain::conversation::Conversation;
use llmchain::message::{ContentType, ExecutionStatus, Message, Role, ToolCall, ToolResult};
use llmchain::policy::{Effect, Ruling};
use llmchain_store::{Review, ReviewStatus, Run};
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// The policy rulings on a chat's calls, read from its runs' decision journals: what the
/// page shows as the rule that asked about or denied a call (a `data-policy` part).
#[derive(Debug, Default, Clone)]
pub struct Rulings(std::collections::HashMap<String, Ruling>);

impl Rulings {
    /// The rulings journaled by `runs` (oldest first; a later run's ruling on a call
    /// wins).
    pub fn of_runs(runs: &[Run]) -> Rulings {
        let mut all = Rulings::default();
        for run in runs {
            if let Some(journal) = journal_of(run) {
                all.add(&journal);
            }
        }
        all
    }

    /// Adds the rulings of one journal (a later one on a call replaces an earlier one).
    pub fn add(&mut self, journal: &Journal) {
        // One pass, oldest first: a later enforced ruling on a call replaces an earlier
        // one (what `Journal::ruling` gives for one call).
        for e in journal.entries() {
            if let llmchain::chain::Decision::Policy {
                call_id,
                effect,
                rule,
                reason,
                shadow: false,
                ..
            } = &e.decision
            {
                self.0.insert(
                    call_id.clone(),
                    Ruling {
                        effect: *effect,
                        rule: rule.clone(),
                        reason: reason.clone(),
                    },
                );
            }
        }
    }

    /// The `data-policy` part shown with `call_id`'s tool part: a ruling that asked or
    /// denied, or an allow by a named rule (the default's plain allow is not shown).
    pub fn part(&self, call_id: &str) -> Option<Value> {
        let (id, data) = self.data(call_id)?;
        Some(json!({"type": "data-policy", "id": id, "data": data}))
    }

    /// The id and data of [`Rulings::part`].
    pub fn data(&self, call_id: &str) -> Option<(String, Value)> {
        let r = self.0.get(call_id)?;
        if r.effect == Effect::Allow && r.rule == "default" {
            return None;
        }
        let mut data = json!({"toolCallId": call_id, "rule": r.rule, "effect": r.effect});
        if let Some(reason) = &r.reason {
            data["reason"] = Value::String(reason.clone());
        }
        Some((format!("policy-{call_id}"), data))
    }

    /// Every call with a ruling shown.
    pub fn calls(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }
}

/// A run's decision journal, as its state holds it.
fn journal_of(run: &Run) -> Option<Journal> {
    let j = run.state.extra.get("chain")?.get("journal")?;
    serde_json::from_value(j.clone()).ok()
}

/// The body `DefaultChatTransport` posts.
#[derive(Debug, Deserialize)]
pub struct ChatRequest {
    /// The chat id (a conversation id).
    pub id: String,
    /// The UI messages the client holds (only the last one is read).
    #[serde(default)]
    pub messages: Vec<Value>,
    /// `submit-message` or `regenerate-message`.
    #[serde(default)]
    pub trigger: Option<String>,
    /// The message the trigger is about.
    #[serde(default, rename = "messageId")]
    pub message_id: Option<String>,
}

/// A person's answer to an approval request, as the client sends it.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalAnswer {
    /// The approval id (a review id).
    pub id: String,
    /// Approved or not.
    pub approved: bool,
    /// The reason given, if any.
    pub reason: Option<String>,
}

/// What a request asks of the chat.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Intent {
    /// A new user message (its text, and the client's id for it).
    Message {
        /// The text.
        text: String,
        /// The client's id of the message.
        client_id: Option<String>,
    },
    /// Answers to approval requests, continuing the assistant message `message_id`.
    Approvals {
        /// The answers.
        answers: Vec<ApprovalAnswer>,
    },
    /// Drop the answer from the message `m<seq>` on and answer again.
    Regenerate {
        /// The sequence number the dropped answer starts at.
        from: Option<i64>,
    },
    /// Nothing new: go on if the chat waits for something that is now decided.
    Continue,
}

/// `m<seq>` → `seq`.
pub fn seq_of(message_id: &str) -> Option<i64> {
    message_id.strip_prefix('m')?.parse().ok()
}

/// The UI message id of the message at `seq`.
pub fn id_of(seq: usize) -> String {
    format!("m{seq}")
}

/// What `req` asks, or why it cannot be read.
pub fn intent(req: &ChatRequest) -> Result<Intent, String> {
    if req.trigger.as_deref() == Some("regenerate-message") {
        return Ok(Intent::Regenerate {
            from: req.message_id.as_deref().and_then(seq_of),
        });
    }
    let Some(last) = req.messages.last() else {
        return Ok(Intent::Continue);
    };
    let parts = last
        .get("parts")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    match last.get("role").and_then(Value::as_str) {
        Some("user") => {
            let text: Vec<&str> = parts
                .iter()
                .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            let text = text.join("\n\n");
            if text.trim().is_empty() {
                return Err("the user message has no text".into());
            }
            Ok(Intent::Message {
                text,
                client_id: last.get("id").and_then(Value::as_str).map(str::to_owned),
            })
        }
        Some("assistant") => {
            let answers: Vec<ApprovalAnswer> = parts
                .iter()
                .filter(|p| p.get("state").and_then(Value::as_str) == Some("approval-responded"))
                .filter_map(|p| {
                    let a = p.get("approval")?;
                    Some(ApprovalAnswer {
                        id: a.get("id")?.as_str()?.to_owned(),
                        approved: a.get("approved")?.as_bool()?,
                        reason: a
                            .get("reason")
                            .and_then(Value::as_str)
                            .filter(|r| !r.trim().is_empty())
                            .map(str::to_owned),
                    })
                })
                .collect();
            Ok(if answers.is_empty() {
                Intent::Continue
            } else {
                Intent::Approvals { answers }
            })
        }
        _ => Err("the last message is neither the user's nor the assistant's".into()),
    }
}

/// A tool result as the client shows a call's output: its structured data when it has
/// some, else its text.
pub fn output_of(result: &ToolResult) -> Value {
    result
        .processed_content
        .clone()
        .unwrap_or_else(|| Value::String(result.content_text()))
}

/// The conversation as UI messages: a user message each, and per answer one assistant
/// message (its steps: reasoning, text, and each call with its state, output and
/// approval). `reviews` are the conversation's reviews (for calls that wait or waited).
pub fn ui_messages(
    conversation: &Conversation,
    reviews: &[Review],
    rulings: &Rulings,
) -> Vec<Value> {
    let messages = &conversation.messages;
    let mut out = Vec::new();
    let mut i = 0;
    while i < messages.len() {
        let m = &messages[i];
        match m.role {
            Role::User => {
                out.push(json!({
                    "id": id_of(i),
                    "role": "user",
                    "parts": text_parts(m),
                }));
                i += 1;
            }
            Role::Assistant | Role::Tool => {
                let start = i;
                let mut parts = Vec::new();
                while i < messages.len() && matches!(messages[i].role, Role::Assistant | Role::Tool)
                {
                    if messages[i].role == Role::Assistant {
                        parts.push(json!({"type": "step-start"}));
                        parts.extend(assistant_parts(
                            &messages[i],
                            &messages[i + 1..],
                            reviews,
                            rulings,
                        ));
                    }
                    i += 1;
                }
                out.push(json!({"id": id_of(start), "role": "assistant", "parts": parts}));
            }
            // System prompts, and roles this version does not know, are not shown.
            _ => i += 1,
        }
    }
    out
}

fn text_parts(m: &Message) -> Vec<Value> {
    m.content
        .iter()
        .filter_map(|p| match p.r#type {
            ContentType::Text if !p.content.is_empty() => {
                Some(json!({"type": "text", "text": p.content, "state": "done"}))
            }
            ContentType::Image
            | ContentType::File
            | ContentType::ImageUrl
            | ContentType::FileUrl => Some(file_part(p)),
            _ => None,
        })
        .collect()
}

/// The largest attachment sent back whole (as a `data:` URL) to the page; a bigger one
/// is named with its type and size only.
const MAX_SHOWN_ATTACHMENT: usize = 256 << 10;

/// An attachment as the AI SDK's UI `file` part: its media type, its name (`-a` records
/// it), and a URL (its own, or its bytes as a `data:` URL when small enough).
fn file_part(p: &llmchain::message::ContentPart) -> Value {
    let by_url = matches!(p.r#type, ContentType::ImageUrl | ContentType::FileUrl);
    let media = p.media().unwrap_or(if p.r#type == ContentType::Image {
        "image/*"
    } else {
        "application/octet-stream"
    });
    let url = if by_url {
        p.content.clone()
    } else if p.content.len() <= MAX_SHOWN_ATTACHMENT {
        format!("data:{media};base64,{}", p.content.trim())
    } else {
        String::new()
    };
    let mut part = json!({"type": "file", "mediaType": media, "url": url});
    if let Some(name) = p.options.get("filename").and_then(Value::as_str) {
        part["filename"] = Value::String(name.to_owned());
    }
    part
}

fn assistant_parts(
    m: &Message,
    after: &[Message],
    reviews: &[Review],
    rulings: &Rulings,
) -> Vec<Value> {
    let mut parts = Vec::new();
    for p in &m.content {
        match p.r#type {
            ContentType::Thinking if !p.content.is_empty() => {
                parts.push(json!({"type": "reasoning", "text": p.content, "state": "done"}));
            }
            ContentType::Text if !p.content.is_empty() => {
                parts.push(json!({"type": "text", "text": p.content, "state": "done"}));
            }
            _ => {}
        }
    }
    for call in &m.tool_calls {
        parts.push(tool_part(call, after, reviews));
        if let Some(p) = call.call_id.as_deref().and_then(|id| rulings.part(id)) {
            parts.push(p);
        }
    }
    parts
}

/// The review of `call` for its current round that is not voided, if any.
fn review_of<'a>(call: &ToolCall, reviews: &'a [Review]) -> Option<&'a Review> {
    let id = call.call_id.as_deref()?;
    reviews.iter().find(|r| {
        r.call_id == id && r.round == call.review_round() && r.status != ReviewStatus::Voided
    })
}

fn tool_part(call: &ToolCall, after: &[Message], reviews: &[Review]) -> Value {
    let id = call.call_id.clone().unwrap_or_default();
    let name = call.name.clone().unwrap_or_default();
    let mut part = Map::new();
    part.insert("type".into(), Value::String(format!("tool-{name}")));
    part.insert("toolCallId".into(), Value::String(id.clone()));
    part.insert("input".into(), Value::Object(call.arguments_as_map()));
    let result = after
        .iter()
        .take_while(|m| m.role == Role::Tool)
        .flat_map(|m| m.tool_results.iter())
        .find(|r| r.tool_call_id == id);
    let review = review_of(call, reviews);
    let approval = |r: &Review, approved: Option<bool>| {
        let mut a = Map::new();
        a.insert("id".into(), Value::String(r.id.clone()));
        if let Some(approved) = approved {
            a.insert("approved".into(), Value::Bool(approved));
        }
        if let Some(reason) = r.decision.as_ref().and_then(|d| match d {
            llmchain::chain::HumanDecision::Deny { reason }
            | llmchain::chain::HumanDecision::Reject { reason } => reason.clone(),
            _ => None,
        }) {
            a.insert("reason".into(), Value::String(reason));
        }
        Value::Object(a)
    };
    let state = match (result, review) {
        (Some(r), review) if !r.is_interrupt() => {
            let status = call.typed_execution_status();
            if status == Some(ExecutionStatus::Denied) {
                if let Some(rv) = review {
                    part.insert("approval".into(), approval(rv, Some(false)));
                }
                "output-denied"
            } else if r.is_error() {
                part.insert("errorText".into(), Value::String(r.content_text()));
                "output-error"
            } else {
                if let Some(rv) = review.filter(|rv| rv.status != ReviewStatus::Pending) {
                    part.insert("approval".into(), approval(rv, Some(true)));
                }
                part.insert("output".into(), output_of(r));
                "output-available"
            }
        }
        (_, Some(rv)) if rv.status == ReviewStatus::Pending => {
            part.insert("approval".into(), approval(rv, None));
            "approval-requested"
        }
        (_, Some(rv)) if rv.decision.is_some() => {
            let approved = matches!(rv.status, ReviewStatus::Approved | ReviewStatus::Edited);
            part.insert("approval".into(), approval(rv, Some(approved)));
            "approval-responded"
        }
        _ if !call.is_complete() => {
            part.insert(
                "errorText".into(),
                Value::String("the call's arguments never completed; it did not run".into()),
            );
            "output-error"
        }
        _ => "input-available",
    };
    part.insert("state".into(), Value::String(state.into()));
    Value::Object(part)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_a_rule_asked_about_carries_the_rule_beside_it() {
        use llmchain::chain::Decision;
        let policy = |call: &str, effect, rule: &str, shadow| Decision::Policy {
            call_id: call.into(),
            tool: "t".into(),
            effect,
            policy: "rules".into(),
            rule: rule.into(),
            reason: Some(format!("because {rule}")),
            shadow,
            arguments_digest: String::new(),
            policy_digest: String::new(),
        };
        let mut journal = Journal::default();
        journal.record(policy("c1", Effect::Ask, "ask-t", false));
        journal.record(policy("c2", Effect::Allow, "default", false));
        journal.record(policy("c3", Effect::Deny, "would-deny", true));
        journal.record(policy("c3", Effect::Allow, "allow-t", false));
        let mut rulings = Rulings::default();
        rulings.add(&journal);
        let calls = ["c1", "c2", "c3"]
            .iter()
            .map(|id| ToolCall::function(*id, "t", json!({})).unwrap())
            .collect();
        let mut c = Conversation::new();
        c.messages.push(Message::user("go"));
        c.messages.push(Message::assistant_with_calls("", calls));
        let ui = ui_messages(&c, &[], &rulings);
        let parts = ui[1]["parts"].as_array().unwrap();
        let kinds: Vec<&str> = parts.iter().map(|p| p["type"].as_str().unwrap()).collect();
        // The default's plain allow is not shown; a shadow ruling is not the enforced one.
        assert_eq!(
            kinds,
            [
                "step-start",
                "tool-t",
                "data-policy",
                "tool-t",
                "tool-t",
                "data-policy"
            ]
        );
        assert_eq!(
            parts[2],
            json!({"type": "data-policy", "id": "policy-c1", "data": {"toolCallId": "c1",
                "rule": "ask-t", "effect": "ask", "reason": "because ask-t"}})
        );
        assert_eq!(parts[5]["data"]["rule"], "allow-t");
    }

    #[test]
    fn a_users_attachments_are_file_parts_with_their_names() {
        use llmchain::message::{ContentPart, Message};
        let mut m = Message::user("Read these");
        m.content
            .push(ContentPart::file("aGVsbG8=", "text/plain").with_option("filename", "notes.txt"));
        m.content
            .push(ContentPart::image_url("https://example.com/cat.png"));
        let mut conversation = Conversation::new();
        conversation.messages.push(m);
        let ui = ui_messages(&conversation, &[], &Rulings::default());
        let parts = ui[0]["parts"].as_array().unwrap();
        assert_eq!(parts[0]["type"], "text");
        assert_eq!(
            parts[1],
            json!({"type": "file", "mediaType": "text/plain", "filename": "notes.txt",
                   "url": "data:text/plain;base64,aGVsbG8="})
        );
        assert_eq!(parts[2]["url"], "https://example.com/cat.png");
        assert_eq!(parts[2]["type"], "file");
    }

    fn req(v: Value) -> ChatRequest {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn requests_give_only_a_message_or_approval_answers() {
        let r = req(json!({"id": "c", "trigger": "submit-message", "messages": [
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}], "extra": 1}
        ], "anything": true}));
        assert_eq!(
            intent(&r).unwrap(),
            Intent::Message {
                text: "hi".into(),
                client_id: Some("u1".into())
            }
        );
        let r = req(
            json!({"id": "c", "trigger": "submit-message", "messageId": "m1", "messages": [
                {"id": "m1", "role": "assistant", "parts": [
                    {"type": "step-start"},
                    {"type": "tool-rm", "toolCallId": "c1", "state": "approval-responded",
                     "input": {"path": "/etc/passwd (the client may say anything)"},
                     "approval": {"id": "r1", "approved": false, "reason": "no"}}
                ]}
            ]}),
        );
        assert_eq!(
            intent(&r).unwrap(),
            Intent::Approvals {
                answers: vec![ApprovalAnswer {
                    id: "r1".into(),
                    approved: false,
                    reason: Some("no".into())
                }]
            }
        );
        let r = req(
            json!({"id": "c", "trigger": "regenerate-message", "messageId": "m3", "messages": []}),
        );
        assert_eq!(intent(&r).unwrap(), Intent::Regenerate { from: Some(3) });
        let r = req(json!({"id": "c", "messages": [{"role": "user", "parts": []}]}));
        assert!(intent(&r).is_err());
    }

    #[test]
    fn a_conversation_becomes_ui_messages_with_steps_and_tool_states() {
        let mut c = Conversation::new();
        c.messages.push(Message::user("weather?"));
        c.messages.push(Message::assistant_with_calls(
            "Checking.",
            vec![ToolCall::function("c1", "weather", json!({"city": "Paris"})).unwrap()],
        ));
        c.messages.push(Message::tool(vec![
            ToolResult::text("c1", "sunny").with_name("weather"),
        ]));
        c.messages.push(Message::assistant("Sunny."));
        c.messages.push(Message::user("delete it"));
        c.messages.push(Message::assistant_with_calls(
            "",
            vec![ToolCall::function("c2", "rm", json!({"path": "x"})).unwrap()],
        ));
        let review = Review {
            id: "r2".into(),
            conversation_id: "conv".into(),
            run_id: None,
            call_id: "c2".into(),
            round: 0,
            tool: "rm".into(),
            arguments: json!({"path": "x"}),
            question: None,
            status: ReviewStatus::Pending,
            decision: None,
            decided_by: None,
            created_at: 0,
            decided_at: None,
            schema: None,
        };
        let ui = ui_messages(&c, &[review], &Rulings::default());
        assert_eq!(ui.len(), 4);
        assert_eq!(ui[0]["id"], "m0");
        assert_eq!(ui[1]["id"], "m1");
        let parts = ui[1]["parts"].as_array().unwrap();
        let types: Vec<&str> = parts.iter().map(|p| p["type"].as_str().unwrap()).collect();
        assert_eq!(
            types,
            ["step-start", "text", "tool-weather", "step-start", "text"]
        );
        assert_eq!(parts[2]["state"], "output-available");
        assert_eq!(parts[2]["output"], "sunny");
        let waiting = &ui[3]["parts"][1];
        assert_eq!(waiting["state"], "approval-requested");
        assert_eq!(waiting["approval"]["id"], "r2");
        assert_eq!(ui[3]["id"], "m5");
    }
}

//! Where the chain asks its guards ([`crate::guard`]): on a request's user messages, a
//! call's arguments and a call's result; every verdict but allow journaled (the kinds
//! of what was found, never what was held back).

use serde_json::{Map, Value};

use super::budget::RunStop;
use super::journal::Decision;
use super::llm_chain::LLMChain;
use crate::conversation::Conversation;
use crate::guard::{Checked, Point, Verdict};
use crate::message::{ContentPart, Role, ToolCall, ToolResult};

/// What the guards made of a call's arguments.
pub(super) enum Guarded {
    /// Nothing to change.
    Same,
    /// Run it with these.
    Rewritten(Map<String, Value>),
    /// Do not run it: its answer. (A tripwire also stops the run after the batch.)
    Refused(String),
}

impl LLMChain {
    /// The guards at `point` on `text`, each rewrite and the stop (if any) journaled once.
    fn guard_text<'a>(
        &mut self,
        point: Point,
        call_id: Option<&str>,
        message: Option<usize>,
        text: &'a str,
    ) -> Checked<'a> {
        let checked = self.guards.check(point, text);
        let entry = |guard: &str, verdict: &str, found: Vec<String>, reason: Option<String>| {
            Decision::Guard {
                guard: guard.to_owned(),
                point: point.as_str().to_owned(),
                call_id: call_id.map(str::to_owned),
                message,
                verdict: verdict.to_owned(),
                found,
                reason,
            }
        };
        for (guard, found) in &checked.rewrites {
            self.state
                .journal
                .record_once(entry(guard, "rewrite", found.clone(), None));
        }
        match &checked.stop {
            Some((guard, Verdict::Block { message })) => {
                self.state.journal.record_once(entry(
                    guard,
                    "block",
                    Vec::new(),
                    Some(message.clone()),
                ));
            }
            Some((guard, Verdict::Tripwire { reason })) => {
                self.state.journal.record_once(entry(
                    guard,
                    "tripwire",
                    Vec::new(),
                    Some(reason.clone()),
                ));
            }
            _ => {}
        }
        checked
    }

    /// The guards on a call's `arguments`, before it is reviewed or run.
    pub(super) fn guard_arguments(
        &mut self,
        call: &ToolCall,
        arguments: &Map<String, Value>,
    ) -> Guarded {
        let text = Value::Object(arguments.clone()).to_string();
        let id = call.call_id.clone().unwrap_or_default();
        let checked = self.guard_text(Point::ToolArguments, Some(&id), None, &text);
        match checked.stop {
            Some((guard, Verdict::Tripwire { reason })) => {
                let stop = RunStop::guard(&guard, &reason);
                let answer = format!("Not run: {stop}.");
                self.stop_after_batch.get_or_insert(Box::new(stop));
                return Guarded::Refused(answer);
            }
            Some((guard, Verdict::Block { message })) => {
                return Guarded::Refused(format!("Not run: {message} (guard {guard})"));
            }
            _ => {}
        }
        if checked.rewrites.is_empty() {
            return Guarded::Same;
        }
        match serde_json::from_str::<Map<String, Value>>(&checked.text) {
            Ok(map) => Guarded::Rewritten(map),
            // A rewrite that broke the arguments' JSON: fail closed.
            Err(_) => Guarded::Refused(format!(
                "Not run: the guard {} could not redact the arguments.",
                checked.rewrites.last().map_or("", |(g, _)| g.as_str())
            )),
        }
    }

    /// The guards on a call's result, before the model or a UI sees it: rewritten in
    /// place (the result as it ran kept in `processed_content`); `Some` when a tripwire
    /// stops the run after the batch.
    pub(super) fn guard_result(&mut self, call: &ToolCall, result: &mut ToolResult) {
        let text = result.content_text();
        let id = call.call_id.clone().unwrap_or_default();
        let checked = self.guard_text(Point::ToolResult, Some(&id), None, &text);
        let (shown, by) = match checked.stop {
            Some((guard, Verdict::Block { message })) => (message, guard),
            Some((guard, Verdict::Tripwire { reason })) => {
                let stop = RunStop::guard(&guard, &reason);
                let shown = format!("Withheld: {stop}.");
                self.stop_after_batch.get_or_insert(Box::new(stop));
                (shown, guard)
            }
            _ if !checked.rewrites.is_empty() => {
                let by = checked
                    .rewrites
                    .iter()
                    .map(|(g, _)| g.as_str())
                    .collect::<Vec<_>>()
                    .join(",");
                (checked.text.into_owned(), by)
            }
            _ => return,
        };
        result.processed_content = Some(serde_json::json!({
            "rewritten_by": format!("guard:{by}"),
            "original": text,
            "processed_content": result.processed_content.take(),
        }));
        result.content = vec![ContentPart::text(shown)];
        result.display_text = None;
    }

    /// The guards on every user message of a model call's request (`request`, or the
    /// stored conversation): the request to send (`None`: unchanged), or the stop. The
    /// stored messages stay as they arrived.
    pub(super) fn guard_request(
        &mut self,
        request: Option<Conversation>,
    ) -> Result<Option<Conversation>, RunStop> {
        let mut out = request;
        let n = out
            .as_ref()
            .unwrap_or(&self.state.conversation)
            .messages
            .len();
        for i in 0..n {
            let conv = out.as_ref().unwrap_or(&self.state.conversation);
            let m = &conv.messages[i];
            if m.role != Role::User || m.is_from_run() {
                continue;
            }
            let Some(text) = m.text() else { continue };
            let checked = self.guard_text(Point::UserMessage, None, Some(i), &text);
            match checked.stop {
                Some((guard, Verdict::Block { message })) => {
                    return Err(RunStop::guard(&guard, &message));
                }
                Some((guard, Verdict::Tripwire { reason })) => {
                    return Err(RunStop::guard(&guard, &reason));
                }
                _ => {}
            }
            if checked.rewrites.is_empty() {
                continue;
            }
            let text = checked.text.into_owned();
            let conv = out.get_or_insert_with(|| self.state.conversation.clone());
            let m = &mut conv.messages[i];
            // The text parts become the guarded text; other parts (images) stay.
            m.content
                .retain(|p| p.r#type != crate::message::ContentType::Text);
            m.content.insert(0, ContentPart::text(text));
        }
        Ok(out)
    }
}

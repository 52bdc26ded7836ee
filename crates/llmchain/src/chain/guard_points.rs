//! Where the chain asks its guards ([`crate::guard`]): on a request's user messages, a
//! call's arguments and a call's result; every verdict but allow journaled (the kinds
//! of what was found, never what was held back).

use serde_json::{Map, Value};

use super::budget::RunStop;
use super::error::ChainError;
use super::journal::Decision;
use super::llm_chain::LLMChain;
use crate::guard::{Checked, Point, Verdict};
use crate::message::{ContentPart, ContentType, Message, Role, ToolCall, ToolResult};
use crate::provider::StreamEvent;

/// What the guards made of a call's arguments.
pub(super) enum Guarded {
    /// Nothing to change.
    Same,
    /// Run it with these.
    Rewritten(Map<String, Value>),
    /// Do not run it: its answer. (A tripwire also stops the run after the batch.)
    Refused(String),
}

/// `m`'s text withheld by `guard`: the text as it arrived kept in its metadata
/// (`guarded.original`), the content a note that names the guard.
pub(super) fn withhold(m: &mut Message, guard: &str) {
    let original = m.text().unwrap_or_default();
    m.metadata.insert(
        "guarded".into(),
        serde_json::json!({"by": [guard], "withheld": true, "original": original}),
    );
    m.content.retain(|p| p.r#type != ContentType::Text);
    m.content
        .insert(0, ContentPart::text(format!("[withheld by guard {guard}]")));
}

/// A result rewritten by `by` to show `shown`: what ran (its text and the tool's native
/// data, which a UI would show in its place) leaves the result, which every UI, export
/// and the model see, and is returned to be kept in the tool message's metadata
/// (`rewritten`, by call id).
pub(super) fn rewrite_result(result: &mut ToolResult, by: String, shown: String) -> Value {
    let aside = serde_json::json!({
        "rewritten_by": by,
        "original": result.content_text(),
        "processed_content": result.processed_content.take(),
    });
    result.content = vec![ContentPart::text(shown)];
    result.display_text = None;
    aside
}

/// `m`'s text parts replaced by `text` (other parts, images, stay).
fn set_text(m: &mut Message, text: String) {
    m.content.retain(|p| p.r#type != ContentType::Text);
    m.content.insert(0, ContentPart::text(text));
}

impl LLMChain {
    /// Fires what the hold-back buffer released (a guarded text delta at `index`);
    /// `Err` with the guard and its verdict when it held the answer back.
    pub(super) fn release(
        &self,
        released: Option<crate::guard::Released>,
        index: usize,
    ) -> Result<(), (String, Verdict)> {
        match released {
            Some(crate::guard::Released::Text(text)) if !text.is_empty() => {
                let ev = StreamEvent::TextDelta {
                    index,
                    text: text.into(),
                };
                self.fire(|cb| cb.on_llm_new_delta(&ev));
                Ok(())
            }
            Some(crate::guard::Released::Stopped(guard, verdict)) => Err((guard, verdict)),
            _ => Ok(()),
        }
    }

    /// Journals a guard's hold on the answer being streamed (a block or tripwire); the
    /// run's stop.
    pub(super) fn journal_answer_stop(&mut self, guard: &str, verdict: &Verdict) -> RunStop {
        let (word, reason) = match verdict {
            Verdict::Block { message } => ("block", message.clone()),
            Verdict::Tripwire { reason } => ("tripwire", reason.clone()),
            _ => ("block", String::new()),
        };
        self.state.journal.record_once(Decision::Guard {
            guard: guard.to_owned(),
            point: Point::ModelOutput.as_str().to_owned(),
            call_id: None,
            message: Some(self.state.conversation.messages.len()),
            verdict: word.to_owned(),
            found: Vec::new(),
            reason: Some(reason.clone()),
        });
        RunStop::guard(guard, &reason)
    }

    /// The guards on a whole answer, before it is stored: rewritten in place (the text
    /// as it arrived kept in its metadata), or withheld and `Some` with the run's stop.
    pub(super) fn guard_answer(&mut self, m: &mut Message) -> Option<RunStop> {
        let text = m.text()?;
        let position = self.state.conversation.messages.len();
        let checked = self.guard_text(Point::ModelOutput, None, Some(position), &text);
        if let Some((guard, verdict)) = checked.stop {
            let reason = match verdict {
                Verdict::Block { message } => message,
                Verdict::Tripwire { reason } => reason,
                _ => String::new(),
            };
            withhold(m, &guard);
            return Some(RunStop::guard(&guard, &reason));
        }
        if checked.rewrites.is_empty() {
            return None;
        }
        let by: Vec<&str> = checked.rewrites.iter().map(|(g, _)| g.as_str()).collect();
        m.metadata.insert(
            "guarded".into(),
            serde_json::json!({"by": by, "original": text}),
        );
        set_text(m, checked.text.into_owned());
        None
    }

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

    /// The guards on the arguments of an answer's complete calls, as it is stored: a
    /// rewritten call is stored rewritten, a refused one with no arguments, each with
    /// what the model sent and the verdict in its metadata (`guarded`), so no callback,
    /// page or span sees what a guard held back; `decide` denies a refused call.
    pub(super) fn guard_calls(&mut self, message: &mut Message) {
        for call in message.tool_calls.iter_mut().filter(|c| c.is_complete()) {
            let arguments = call.arguments_as_map();
            let (arguments_now, verdict) = match self.guard_arguments(call, &arguments) {
                Guarded::Same => continue,
                Guarded::Rewritten(map) => (map, serde_json::json!({"verdict": "rewrite"})),
                Guarded::Refused(answer) => (
                    Map::new(),
                    serde_json::json!({
                        "verdict": "refused",
                        "answer": answer,
                        "stop": self.stop_after_batch.as_deref().map(|s| serde_json::to_value(s).unwrap_or_default()),
                    }),
                ),
            };
            let mut guarded = verdict;
            guarded["original_arguments"] = Value::Object(arguments);
            call.metadata.insert("guarded".into(), guarded);
            call.arguments = Some(crate::message::Arguments::Object(arguments_now));
        }
    }

    /// A call the guards refused as its answer was stored: its answer, and the run's
    /// stop again when a tripwire refused it (for a run resumed in another process).
    pub(super) fn refused_at_answer(&mut self, call: &ToolCall) -> Option<String> {
        let g = call.metadata.get("guarded")?;
        if g.get("verdict").and_then(Value::as_str) != Some("refused") {
            return None;
        }
        if let Some(stop) = g
            .get("stop")
            .and_then(|s| serde_json::from_value::<RunStop>(s.clone()).ok())
        {
            self.stop_after_batch.get_or_insert(Box::new(stop));
        }
        Some(
            g.get("answer")
                .and_then(Value::as_str)
                .unwrap_or("Not run: a guard refused it.")
                .to_owned(),
        )
    }

    /// The guards on a call's result, before the model or a UI sees it: rewritten in
    /// place; what ran is returned to be kept aside (see [`rewrite_result`]). A tripwire
    /// stops the run after the batch.
    pub(super) fn guard_result(
        &mut self,
        call: &ToolCall,
        result: &mut ToolResult,
    ) -> Option<Value> {
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
            _ => return None,
        };
        Some(rewrite_result(result, format!("guard:{by}"), shown))
    }

    /// The guards on every person's message, before a model call: a message a guard
    /// rewrites is stored guarded (as an answer is: the text as it arrived kept in its
    /// metadata, `guarded.original`), so the model, the UIs and exports get the guarded
    /// version and a later call finds nothing more to do; `Some` with the run's stop
    /// when a guard blocks or trips (the model is not called).
    pub(super) async fn guard_user_messages(&mut self) -> Result<Option<RunStop>, ChainError> {
        for i in 0..self.state.conversation.messages.len() {
            let m = &self.state.conversation.messages[i];
            if m.role != Role::User || m.is_from_run() || m.metadata.contains_key("guarded") {
                continue;
            }
            let Some(text) = m.text() else { continue };
            let checked = self.guard_text(Point::UserMessage, None, Some(i), &text);
            match checked.stop {
                Some((guard, Verdict::Block { message })) => {
                    return Ok(Some(RunStop::guard(&guard, &message)));
                }
                Some((guard, Verdict::Tripwire { reason })) => {
                    return Ok(Some(RunStop::guard(&guard, &reason)));
                }
                _ => {}
            }
            if checked.rewrites.is_empty() {
                continue;
            }
            let by: Vec<&str> = checked.rewrites.iter().map(|(g, _)| g.as_str()).collect();
            let mut guarded = self.state.conversation.messages[i].clone();
            guarded.metadata.insert(
                "guarded".into(),
                serde_json::json!({"by": by, "original": text}),
            );
            set_text(&mut guarded, checked.text.into_owned());
            self.replace_message(i, guarded).await?;
        }
        Ok(None)
    }
}

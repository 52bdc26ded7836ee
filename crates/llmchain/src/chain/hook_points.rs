//! Where the chain runs its hooks ([`super::Hook`]): each point in the stack's order,
//! fail-closed, every verdict that changes control flow journaled before it takes
//! effect, each hook's state read from and written back to the run's state.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use serde_json::Value;

use super::budget::RunStop;
use super::hook::{
    AfterModel, AfterTool, BeforeTool, ChunkCheck, Hook, HookCx, ModelGate, guarded, key,
    stricter_after_model, stricter_after_tool,
};
use super::journal::Decision;
use super::llm_chain::LLMChain;
use crate::conversation::Conversation;
use crate::message::{Message, ToolCall, ToolResult};
use crate::provider::StreamEvent;

/// Runs one point of `$hook` with a [`HookCx`] named `$cx` over the hook's state,
/// taken from the run's state and written back after (a hook that failed keeps the
/// state it had): the point's verdict, or why it failed.
macro_rules! at_point {
    ($chain:ident, $hook:expr, |$cx:ident| $call:expr) => {{
        let hook: &Arc<dyn Hook> = $hook;
        let k = key(hook.as_ref());
        let before = $chain.state.hooks.get(&k).cloned().unwrap_or(Value::Null);
        let mut state = before.clone();
        let result = {
            let mut cx = HookCx {
                state: &mut state,
                spent: &$chain.state.spent,
                run_count: $chain.state.run_count,
            };
            let $cx = &mut cx;
            guarded(hook.as_ref(), $chain.hook_timeout, $call).await
        };
        if result.is_ok() && state != before {
            if state.is_null() {
                $chain.state.hooks.remove(&k);
            } else {
                $chain.state.hooks.insert(k, state);
            }
        }
        result
    }};
}

impl LLMChain {
    fn journal_hook(
        &mut self,
        hook: &dyn Hook,
        point: &str,
        call_id: Option<&str>,
        verdict: Value,
    ) {
        self.state.journal.record(Decision::Hook {
            hook: key(hook),
            point: point.to_owned(),
            call_id: call_id.map(str::to_owned),
            verdict,
        });
    }

    /// `before_model`, outermost first, on `request` (`None`: the stored conversation):
    /// the request to send (`None`: the stored conversation as it is), or the stop.
    pub(super) async fn before_model(
        &mut self,
        request: Option<Conversation>,
    ) -> Result<Option<Conversation>, RunStop> {
        if self.hooks.is_empty() {
            return Ok(request);
        }
        // Boxed: with no hooks (the common case) every model call's future stays small.
        Box::pin(self.before_model_hooks(request)).await
    }

    async fn before_model_hooks(
        &mut self,
        request: Option<Conversation>,
    ) -> Result<Option<Conversation>, RunStop> {
        let mut request = request.unwrap_or_else(|| self.state.conversation.clone());
        let hooks: Vec<_> = self.hooks.outside_in().cloned().collect();
        for hook in &hooks {
            let verdict = at_point!(self, hook, |cx| hook.before_model(&mut request, cx));
            let reason = match verdict {
                Ok(ModelGate::Continue) => continue,
                Ok(ModelGate::Stop { reason }) => reason,
                Err(failed) => failed,
            };
            let stop = ModelGate::Stop {
                reason: reason.clone(),
            };
            self.journal_hook(hook.as_ref(), "before_model", None, to_value(&stop));
            return Err(RunStop::hook(key(hook.as_ref()), reason));
        }
        Ok(Some(request))
    }

    /// `on_chunk`, outermost first: the stop of the first hook that aborts (a panic
    /// aborts).
    pub(super) fn on_chunk(&self, event: &StreamEvent) -> Option<RunStop> {
        for hook in self.hooks.outside_in() {
            let check = std::panic::catch_unwind(AssertUnwindSafe(|| hook.on_chunk(event)))
                .unwrap_or_else(|_| ChunkCheck::Abort {
                    reason: format!("the hook {} panicked", hook.id()),
                });
            if let ChunkCheck::Abort { reason } = check {
                return Some(RunStop::hook(key(hook.as_ref()), reason));
            }
        }
        None
    }

    /// Journals a stream a hook aborted (the stream is gone before the stop is known
    /// to be a hook's).
    pub(super) fn journal_chunk_abort(&mut self, stop: &RunStop) {
        self.state.journal.record(Decision::Hook {
            hook: stop.limit.clone(),
            point: "on_chunk".into(),
            call_id: None,
            verdict: to_value(&ChunkCheck::Abort {
                reason: stop.reason.clone().unwrap_or_default(),
            }),
        });
    }

    /// `after_model` on the newest (stored) answer, innermost first, combined by
    /// severity: `Some` when the run must stop. A retry is applied here.
    pub(super) async fn after_model(&mut self) -> Result<Option<RunStop>, super::ChainError> {
        if self.hooks.is_empty() {
            return Ok(None);
        }
        Box::pin(self.after_model_hooks()).await
    }

    async fn after_model_hooks(&mut self) -> Result<Option<RunStop>, super::ChainError> {
        let Some(answer) = self.last_message().cloned() else {
            return Ok(None);
        };
        let hooks: Vec<_> = self.hooks.inside_out().cloned().collect();
        let mut combined = AfterModel::Accept;
        let mut by = None;
        for hook in &hooks {
            let verdict = at_point!(self, hook, |cx| hook.after_model(&answer, cx))
                .unwrap_or_else(|reason| AfterModel::Stop { reason });
            if verdict != AfterModel::Accept {
                self.journal_hook(hook.as_ref(), "after_model", None, to_value(&verdict));
            }
            let before = combined.clone();
            combined = stricter_after_model(combined, verdict);
            if combined != before {
                by = Some(key(hook.as_ref()));
            }
        }
        match combined {
            AfterModel::Accept => {
                if answer.tool_calls.is_empty() {
                    self.state.current_failure_count = 0;
                }
                Ok(None)
            }
            AfterModel::Stop { reason } => Ok(Some(RunStop::hook(by.unwrap_or_default(), reason))),
            AfterModel::Retry { feedback } => {
                // The answer stays; the model is told why it is asked again.
                self.state.current_failure_count += 1;
                if answer.tool_calls.is_empty() {
                    self.push_message(Message::feedback(feedback)).await?;
                } else {
                    self.answer_open_calls(&format!("Not run: {feedback}"))
                        .await?;
                }
                self.save_state().await?;
                Ok(None)
            }
        }
    }

    /// `before_tool` for a call about to run, outermost first. A journaled verdict is
    /// replayed, not asked again; a failed hook answers the call without running it.
    /// With the verdict, the hook (`id@version`) that gave it, for a stop.
    pub(super) async fn before_tool(&mut self, call: &mut ToolCall) -> (BeforeTool, String) {
        let id = call.call_id.clone().unwrap_or_default();
        let hooks: Vec<_> = self.hooks.outside_in().cloned().collect();
        for hook in &hooks {
            let k = key(hook.as_ref());
            let replayed = self
                .state
                .journal
                .hook_verdict(&k, "before_tool", &id)
                .and_then(|v| serde_json::from_value::<BeforeTool>(v.clone()).ok());
            let verdict = match replayed {
                Some(v) => v,
                None => {
                    let v = at_point!(self, hook, |cx| hook.before_tool(&*call, cx))
                        .unwrap_or_else(|failed| BeforeTool::Answer {
                            result: format!("Not run: {failed}."),
                        });
                    self.journal_hook(hook.as_ref(), "before_tool", Some(&id), to_value(&v));
                    v
                }
            };
            match verdict {
                BeforeTool::Run => {}
                BeforeTool::Rewrite { arguments } => call.record_edit(arguments),
                other => return (other, k),
            }
        }
        (BeforeTool::Run, String::new())
    }

    /// `after_tool` on a call's result, innermost first, combined by severity. The
    /// result is rewritten in place (what ran returned, to be kept aside); the stop when
    /// the run must stop after the batch.
    pub(super) async fn after_tool(
        &mut self,
        call: &ToolCall,
        result: &mut ToolResult,
    ) -> (Option<RunStop>, Option<Value>) {
        let id = call.call_id.clone().unwrap_or_default();
        let hooks: Vec<_> = self.hooks.inside_out().cloned().collect();
        let mut combined = AfterTool::Keep;
        let mut rewrite: Option<(String, String)> = None;
        let mut by = None;
        for hook in &hooks {
            let verdict = at_point!(self, hook, |cx| hook.after_tool(call, &*result, cx))
                // Fail closed: a result no hook could check is not shown.
                .unwrap_or_else(|failed| AfterTool::Rewrite {
                    content: format!("The result is withheld: {failed}."),
                });
            if verdict != AfterTool::Keep {
                self.journal_hook(hook.as_ref(), "after_tool", Some(&id), to_value(&verdict));
            }
            if let AfterTool::Rewrite { content } = &verdict
                && rewrite.is_none()
            {
                rewrite = Some((key(hook.as_ref()), content.clone()));
            }
            let before = combined.clone();
            combined = stricter_after_tool(combined, verdict);
            if combined != before {
                by = Some(key(hook.as_ref()));
            }
        }
        let aside = rewrite
            .map(|(hook, content)| super::guard_points::rewrite_result(result, hook, content));
        let stop = match combined {
            AfterTool::Stop { reason } => Some(RunStop::hook(by.unwrap_or_default(), reason)),
            _ => None,
        };
        (stop, aside)
    }
}

fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

//! Answering a tool's own interrupts with a person's decisions.
//!
//! A tool may stop to ask a person ([`ToolOutput::interrupt`](crate::tool::ToolOutput::interrupt)):
//! its result is an interrupt, and the run stops ([`RunOutcome::Interrupted`](super::RunOutcome::Interrupted)).
//! [`LLMChain::answer_interrupts`] takes a decision per interrupted call: approve runs
//! the call again (the tool sees [`ToolContext::human_approved`](crate::tool::ToolContext::human_approved)
//! and goes on), edit runs it again with other arguments, deny and reject answer it
//! without running. The new results replace the interrupts in the stored tool message,
//! and the run can go on. The review inbox of `llmchain-store` stores these decisions
//! like a review's.

use std::collections::{HashMap, HashSet};

use super::error::ChainError;
use super::llm_chain::LLMChain;
use super::review::HumanDecision;
use super::steps::Step;
use crate::message::{Role, ToolCall, ToolResult};

impl LLMChain {
    /// The calls whose results in the newest message (a tool message) are a tool's
    /// interrupt, in call order: what a person must decide about before the run goes on.
    pub fn interrupted_calls(&self) -> Vec<ToolCall> {
        let messages = self.messages();
        let Some(last) = messages.last().filter(|m| m.role == Role::Tool) else {
            return Vec::new();
        };
        let ids: Vec<&str> = last
            .tool_results
            .iter()
            .filter(|r| r.is_interrupt())
            .map(|r| r.tool_call_id.as_str())
            .collect();
        messages
            .iter()
            .flat_map(|m| m.tool_calls.iter())
            .filter(|c| c.call_id.as_deref().is_some_and(|id| ids.contains(&id)))
            .cloned()
            .collect()
    }

    /// Answers every interrupted call of the newest tool message with a person's
    /// decision (by call id): approve runs it again, edit runs it again with the new
    /// arguments (the tool sees the approval), deny and reject answer it without
    /// running it again. The model is not called (`run` goes on from there).
    ///
    /// At most once more: before a body runs again, the approval (and a new review
    /// round: [`ToolCall::review_round`]) is stored on the call, and its interrupt is
    /// replaced in the stored tool message by an "outcome unknown" result; the real
    /// result replaces that when the body returns. A process that stops in between
    /// leaves a conversation that says the outcome is unknown, and no path runs the
    /// body a third time.
    pub async fn answer_interrupts(
        &mut self,
        decisions: Vec<(String, HumanDecision)>,
    ) -> Result<Step, ChainError> {
        let interrupted = self.interrupted_calls();
        if interrupted.is_empty() {
            return Err(ChainError::Resume(
                "no call waits on a tool's interrupt".into(),
            ));
        }
        let decided: HashMap<String, HumanDecision> = decisions.into_iter().collect();
        let ids: Vec<String> = interrupted
            .iter()
            .filter_map(|c| c.call_id.clone())
            .collect();
        if let Some(stray) = decided.keys().find(|id| !ids.contains(id)) {
            return Err(ChainError::Resume(format!(
                "no interrupted call has the id '{stray}'"
            )));
        }
        let missing: Vec<&str> = ids
            .iter()
            .filter(|id| !decided.contains_key(*id))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            return Err(ChainError::Resume(format!(
                "a decision is needed for every interrupted call; missing: {}",
                missing.join(", ")
            )));
        }
        let tool_position = self.messages().len() - 1;
        let Some(call_position) = (0..tool_position).rev().find(|&i| {
            let m = &self.messages()[i];
            m.role == Role::Assistant
                && m.tool_calls
                    .iter()
                    .any(|c| c.call_id.as_deref() == Some(ids[0].as_str()))
        }) else {
            return Err(ChainError::Resume(
                "the interrupted calls' message is missing".into(),
            ));
        };

        let mut assistant = self.messages()[call_position].clone();
        // Final answers (denials, refusals) and, for the calls to run again, the
        // "outcome unknown" that stands until their new result is in.
        let mut answers: HashMap<String, ToolResult> = HashMap::new();
        let mut to_run = Vec::new();
        for call in assistant.tool_calls.iter_mut() {
            let Some(id) = call.call_id.clone() else {
                continue;
            };
            let Some(decision) = decided.get(&id) else {
                continue;
            };
            let name = call.name.clone().unwrap_or_default();
            let default =
                |what: &str| format!("Tool call '{name}' was {what} by a human reviewer.");
            match decision.clone() {
                HumanDecision::Deny { reason } => {
                    let text = reason.unwrap_or_else(|| default("denied"));
                    answers.insert(id.clone(), ToolResult::text(&id, text).with_name(&name));
                }
                HumanDecision::Reject { reason } => {
                    let text = reason.unwrap_or_else(|| default("rejected"));
                    answers.insert(id.clone(), ToolResult::refusal(&id, text).with_name(&name));
                }
                approval => {
                    if let HumanDecision::Edit { arguments } = approval {
                        call.record_edit(arguments);
                    }
                    call.record_human_approval();
                    call.set_review_round(call.review_round() + 1);
                    answers.insert(
                        id.clone(),
                        ToolResult::error(
                            &id,
                            format!(
                                "The outcome of this call to {name} is unknown: it was running again \
                                 after a person approved it when the run stopped, and it was not run a \
                                 third time. Check its effects before calling it again."
                            ),
                        )
                        .with_name(&name),
                    );
                    to_run.push(call.clone());
                }
            }
        }
        // Stored before any body runs again: the approvals and edits on the calls, then
        // the tool message without the interrupts.
        self.replace_message(call_position, assistant.clone())
            .await?;
        let mut tool_message = self.messages()[tool_position].clone();
        for r in tool_message.tool_results.iter_mut() {
            if let Some(answer) = answers.get(&r.tool_call_id) {
                *r = answer.clone();
            }
        }
        self.replace_message(tool_position, tool_message.clone())
            .await?;

        let approved: HashSet<String> = to_run.iter().filter_map(|c| c.call_id.clone()).collect();
        let results = self.run_calls(&mut to_run, &approved).await?;
        for (ran, result) in to_run.iter().zip(results) {
            let id = ran.call_id.clone().unwrap_or_default();
            if let Some(c) = assistant
                .tool_calls
                .iter_mut()
                .find(|c| c.call_id.as_deref() == Some(id.as_str()))
            {
                c.metadata = ran.metadata.clone();
            }
            if let Some(r) = tool_message
                .tool_results
                .iter_mut()
                .find(|r| r.tool_call_id == id)
            {
                *r = result;
            }
        }
        self.state.conversation.messages[call_position] = assistant;
        if !to_run.is_empty() {
            self.replace_message(tool_position, tool_message).await?;
        }
        for call in &interrupted {
            let Some(r) = self.messages()[tool_position]
                .tool_results
                .iter()
                .find(|r| Some(r.tool_call_id.as_str()) == call.call_id.as_deref())
                .cloned()
            else {
                continue;
            };
            if r.is_error() {
                self.fire(|cb| cb.on_tool_execution_failed(call, &r));
            } else if !r.is_interrupt() {
                self.fire(|cb| cb.on_tool_execution_completed(call, &r));
            }
        }
        self.save_state().await?;
        Ok(Step::Continue(()))
    }
}

impl LLMChain {
    /// The calls waiting for a person, in call order: those of the pending review
    /// ([`pending_review`](Self::pending_review)) that no handler decided, else those a
    /// tool interrupted ([`interrupted_calls`](Self::interrupted_calls)).
    pub fn waiting_calls(&self) -> Vec<ToolCall> {
        let Some(p) = self.pending_review() else {
            return self.interrupted_calls();
        };
        let Some(message) = self.messages().get(p.message_position) else {
            return Vec::new();
        };
        p.awaiting()
            .filter_map(|w| {
                message
                    .tool_calls
                    .iter()
                    .find(|c| c.call_id.as_deref() == Some(w.call_id.as_str()))
                    .cloned()
            })
            .collect()
    }

    /// Answers the calls waiting for a person ([`waiting_calls`](Self::waiting_calls))
    /// with `decisions` (by call id): the pending review's batch runs
    /// ([`execute_tool_calls_with`](Self::execute_tool_calls_with)), or the interrupted
    /// calls are answered ([`answer_interrupts`](Self::answer_interrupts)). The model is
    /// not called.
    pub async fn answer_waiting(
        &mut self,
        decisions: Vec<(String, HumanDecision)>,
    ) -> Result<Step, ChainError> {
        if self.pending_review().is_some() {
            self.execute_tool_calls_with(decisions).await
        } else {
            let r = self.answer_interrupts(decisions).await;
            if let Err(e) = &r {
                self.fire(|cb| cb.on_error(e));
            }
            r
        }
    }
}

//! `LLMChain::run` and `LLMChain::resume`: the built-in modes.

use tracing::Instrument;

use super::error::ChainError;
use super::llm_chain::LLMChain;
use super::mode::{Mode, RunOutcome};
use super::review::HumanDecision;
use super::steps::{Step, Steps};
use crate::message::Role;
use crate::step;

impl LLMChain {
    /// Runs the chain in `mode` until it is done, stops at an interrupt or a review, or
    /// fails. On error the conversation holds only whole messages, and `on_error` fired once.
    pub async fn run(&mut self, mode: Mode) -> Result<RunOutcome, ChainError> {
        let telemetry = &self.telemetry;
        let span = tracing::info_span!(
            "invoke_agent",
            "otel.name" = crate::telemetry::agent_span_name(telemetry.agent_name.as_deref()),
            "otel.kind" = "internal",
            "otel.status_code" = tracing::field::Empty,
            "gen_ai.operation.name" = "invoke_agent",
            "gen_ai.provider.name" = self.model.genai_provider_name(),
            "gen_ai.request.model" = self.model.model_name(),
            "gen_ai.agent.name" = telemetry.agent_name.as_deref(),
            "gen_ai.conversation.id" = telemetry.conversation_id.as_deref(),
            "gen_ai.usage.input_tokens" = tracing::field::Empty,
            "gen_ai.usage.output_tokens" = tracing::field::Empty,
            "error.type" = tracing::field::Empty,
            "llmchain.mode" = mode.name(),
        );
        let before = self.state.conversation.messages.len();
        self.stopped = None;
        let result = self.run_inner(&mode).instrument(span.clone()).await;
        // The usage of this turn's model calls, summed.
        let mut usage = crate::message::TokenUsage::default();
        let mut reported = false;
        for m in self.state.conversation.messages.iter().skip(before) {
            if let Some(u) = m.usage() {
                usage.add(u);
                reported = true;
            }
        }
        if reported {
            span.record(
                "gen_ai.usage.input_tokens",
                crate::telemetry::int(usage.input_tokens),
            );
            span.record(
                "gen_ai.usage.output_tokens",
                crate::telemetry::int(usage.output_tokens),
            );
        }
        if let Err(e) = &result {
            // Boxed: only a run that failed pays for it (every run's future stays small).
            Box::pin(self.journal_limit(e)).await;
            span.record("error.type", e.error_type());
            span.record("otel.status_code", "error");
            self.fire(|cb| cb.on_error(e));
        }
        result
    }

    /// Journals a stop by one of the chain's own limits (`max_runs`, the failure budget,
    /// the repeat guard) and saves it with the run's state before the run ends with its
    /// error, as a budget's stop is: the record says which limit ended the run.
    async fn journal_limit(&mut self, e: &ChainError) {
        let (limit, max, spent) = match e {
            ChainError::ExceededMaxRuns { count, max } => ("max_runs".to_owned(), *max, *count),
            ChainError::ExceededFailureCount { count, max } => {
                ("failures".to_owned(), *max, *count)
            }
            ChainError::RepeatedFailingCall { tool, count } => (
                format!("repeated_failures:{tool}"),
                self.max_repeated_failures,
                *count,
            ),
            _ => return,
        };
        self.state.journal.record(super::journal::Decision::Budget {
            limit,
            max: f64::from(max),
            spent: f64::from(spent),
        });
        if let Err(saved) = self.save_state().await {
            tracing::warn!(error = %saved, "the limit that stopped the run was not saved");
        }
    }

    async fn run_inner(&mut self, mode: &Mode) -> Result<RunOutcome, ChainError> {
        if self.messages().is_empty() {
            return Err(ChainError::NoMessages);
        }
        if let Some(p) = &self.state.pending_review {
            return Ok(RunOutcome::ReviewRequired(p.clone()));
        }
        Steps::ensure_mode_state(self);
        match mode {
            Mode::Single => {
                step!(Steps::call_llm(self).await);
                Ok(RunOutcome::Done)
            }
            Mode::WhileNeedsResponse { max_runs } => {
                if !self.needs_response() {
                    return Ok(RunOutcome::Done);
                }
                loop {
                    step!(Steps::execute_tools(self).await);
                    step!(Ok(Steps::check_tool_interrupts(self)));
                    step!(Steps::expand_tool_results(self).await);
                    step!(Steps::check_max_runs(self, *max_runs));
                    step!(Steps::call_llm(self).await);
                    step!(Ok(Steps::continue_or_done(self)));
                }
            }
            Mode::UntilSuccess { max_runs } => loop {
                if let Some(last) = self.last_message() {
                    let answered = match last.role {
                        Role::Tool => !last.tool_had_errors(),
                        Role::Assistant => last.tool_calls.is_empty(),
                        _ => false,
                    };
                    if answered {
                        return Ok(RunOutcome::Done);
                    }
                }
                if self.unanswered_calls_position().is_none() {
                    step!(Steps::check_max_runs(self, *max_runs));
                    step!(Steps::call_llm(self).await);
                }
                step!(Steps::execute_tools(self).await);
                step!(Ok(Steps::check_tool_interrupts(self)));
                step!(Steps::expand_tool_results(self).await);
            },
            Mode::Step {
                should_continue,
                max_runs,
            } => loop {
                if self.unanswered_calls_position().is_some() {
                    step!(Steps::execute_tools(self).await);
                    step!(Ok(Steps::check_tool_interrupts(self)));
                    step!(Steps::expand_tool_results(self).await);
                } else if self.needs_response() {
                    step!(Steps::check_max_runs(self, *max_runs));
                    step!(Steps::call_llm(self).await);
                } else {
                    return Ok(RunOutcome::Done);
                }
                let go_on = should_continue.as_ref().is_some_and(|f| f(self));
                if !go_on {
                    return Ok(RunOutcome::Done);
                }
            },
            Mode::UntilToolUsed { names, max_runs } => {
                let missing: Vec<&str> = names
                    .iter()
                    .filter(|n| self.tool(n).is_none())
                    .map(String::as_str)
                    .collect();
                match missing.len() {
                    0 => {}
                    1 => {
                        return Err(ChainError::InvalidToolName(format!(
                            "Tool name '{}' not found in available tools",
                            missing[0]
                        )));
                    }
                    _ => {
                        return Err(ChainError::InvalidToolName(format!(
                            "Tool names '{}' not found in available tools",
                            missing.join(", ")
                        )));
                    }
                }
                loop {
                    if self.unanswered_calls_position().is_none() {
                        step!(Steps::call_llm(self).await);
                    }
                    step!(Steps::execute_tools(self).await);
                    step!(Ok(Steps::check_tool_interrupts(self)));
                    step!(Ok(Steps::check_until_tool(self, names)));
                    step!(Steps::expand_tool_results(self).await);
                    if !self.needs_response() {
                        return Err(ChainError::ToolNotUsed(names.join(", ")));
                    }
                    step!(Steps::check_max_runs(self, *max_runs));
                }
            }
            Mode::Custom(custom) => custom.run(self).await,
        }
    }

    /// Runs the pending calls of the newest assistant message (after review), adds the
    /// tool message, and stops there: the model is not called. `Continue` when the
    /// results are in (the model would be asked next); `Break` with
    /// [`RunOutcome::ReviewRequired`] or [`RunOutcome::Interrupted`] when calls wait for
    /// a person.
    pub async fn execute_tool_calls(&mut self) -> Result<Step, ChainError> {
        let r = self.execute_pending_tools().await;
        if let Err(e) = &r {
            self.fire(|cb| cb.on_error(e));
        }
        r
    }

    /// Answers the calls paused for review with human `decisions` (by call id) and runs
    /// the batch, without calling the model afterwards; see
    /// [`execute_tool_calls`](Self::execute_tool_calls) for the result.
    pub async fn execute_tool_calls_with(
        &mut self,
        decisions: Vec<(String, HumanDecision)>,
    ) -> Result<Step, ChainError> {
        let r = self.apply_human_decisions(decisions).await;
        if let Err(e) = &r {
            self.fire(|cb| cb.on_error(e));
        }
        r
    }

    /// Resumes a run paused for review: `decisions` answers every call awaiting a human
    /// (by call id), the batch runs with every decision applied, and the run goes on in
    /// `mode`.
    pub async fn resume(
        &mut self,
        decisions: Vec<(String, HumanDecision)>,
        mode: Mode,
    ) -> Result<RunOutcome, ChainError> {
        let result = self.apply_human_decisions(decisions).await;
        match result {
            Ok(crate::chain::Step::Break(outcome)) => Ok(outcome),
            Ok(crate::chain::Step::Continue(())) => self.run(mode).await,
            Err(e) => {
                self.fire(|cb| cb.on_error(&e));
                Err(e)
            }
        }
    }
}

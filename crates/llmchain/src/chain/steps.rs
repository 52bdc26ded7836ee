//! [`Steps`]: the building blocks of modes.

use std::ops::ControlFlow;

use super::error::ChainError;
use super::llm_chain::LLMChain;
use super::mode::RunOutcome;
use super::state::ToolInterrupt;
use crate::message::Role;

/// What a step says: go on, or end the run with an outcome.
pub type Step = ControlFlow<RunOutcome>;

/// Runs a step inside a mode: `Err` returns the error, `Break` returns the outcome.
#[macro_export]
macro_rules! step {
    ($e:expr) => {
        match $e {
            ::std::result::Result::Err(e) => return ::std::result::Result::Err(e),
            ::std::result::Result::Ok(::std::ops::ControlFlow::Break(outcome)) => {
                return ::std::result::Result::Ok(outcome)
            }
            ::std::result::Result::Ok(::std::ops::ControlFlow::Continue(())) => {}
        }
    };
}

/// The steps modes are composed from.
#[derive(Debug)]
pub struct Steps;

impl Steps {
    /// Calls the model once (with fallbacks) and counts the run. Checks the failure
    /// budget first: when it is used up, fires `on_retries_exceeded` and fails with
    /// `ExceededFailureCount`.
    pub async fn call_llm(chain: &mut LLMChain) -> Result<Step, ChainError> {
        if chain.state.current_failure_count >= chain.max_retry_count {
            chain.fire(|cb| cb.on_retries_exceeded());
            return Err(ChainError::ExceededFailureCount {
                count: chain.state.current_failure_count,
                max: chain.max_retry_count,
            });
        }
        if let Some(stop) = chain.charge_model_call().await? {
            return chain.stop_for_budget(stop).await;
        }
        chain.state.run_count += 1;
        match chain.call_model().await? {
            None => Ok(Step::Continue(())),
            Some(stop) => chain.stop_for_budget(stop).await,
        }
    }

    /// Runs the tool calls of the newest assistant message (after review) and adds the
    /// tool message. Nothing to do: continues. A review interrupt: ends the run with
    /// [`RunOutcome::ReviewRequired`].
    pub async fn execute_tools(chain: &mut LLMChain) -> Result<Step, ChainError> {
        // Boxed: a batch's future (review, policies, hooks, the executor) is several
        // times a model call's, and every run's future would otherwise carry its size
        // (moved whole into the runtime, even by a run that never calls a tool). One
        // allocation per batch is nothing beside running its tools.
        Box::pin(chain.execute_pending_tools()).await
    }

    /// Fails with `ExceededMaxRuns` once `max` model calls were made in this run.
    pub fn check_max_runs(chain: &LLMChain, max: u32) -> Result<Step, ChainError> {
        if chain.state.run_count >= max && chain.needs_response() {
            return Err(ChainError::ExceededMaxRuns {
                count: chain.state.run_count,
                max,
            });
        }
        Ok(Step::Continue(()))
    }

    /// Ends the run with [`RunOutcome::Paused`] when `should_pause` says so.
    pub fn check_pause(_chain: &LLMChain, should_pause: impl FnOnce() -> bool) -> Step {
        if should_pause() {
            Step::Break(RunOutcome::Paused)
        } else {
            Step::Continue(())
        }
    }

    /// Ends the run with [`RunOutcome::Interrupted`] when the newest message is a tool
    /// message holding interrupts.
    pub fn check_tool_interrupts(chain: &LLMChain) -> Step {
        let Some(m) = chain.last_message().filter(|m| m.role == Role::Tool) else {
            return Step::Continue(());
        };
        let interrupts: Vec<ToolInterrupt> = m
            .tool_results
            .iter()
            .filter(|r| r.is_interrupt())
            .map(|r| ToolInterrupt {
                tool_call_id: r.tool_call_id.clone(),
                name: r.name.clone(),
                data: r.interrupt_data().cloned(),
            })
            .collect();
        if interrupts.is_empty() {
            Step::Continue(())
        } else {
            Step::Break(RunOutcome::Interrupted(interrupts))
        }
    }

    /// Ends the run with [`RunOutcome::ToolUsed`] when the newest tool message holds a
    /// result of one of `names` (the first such result).
    pub fn check_until_tool(chain: &LLMChain, names: &[String]) -> Step {
        let Some(m) = chain.last_message().filter(|m| m.role == Role::Tool) else {
            return Step::Continue(());
        };
        match m
            .tool_results
            .iter()
            .find(|r| r.name.as_ref().is_some_and(|n| names.contains(n)))
        {
            Some(r) => Step::Break(RunOutcome::ToolUsed(Box::new(r.clone()))),
            None => Step::Continue(()),
        }
    }

    /// Applies the newest tool message's message expansions: trims each result's content
    /// as asked and inserts the requested messages after the tool message, before the next
    /// model call. Expansions are virtual, so this can never apply one twice after a
    /// restore.
    pub async fn expand_tool_results(chain: &mut LLMChain) -> Result<Step, ChainError> {
        let msgs = chain.messages();
        let Some(position) = msgs.len().checked_sub(1) else {
            return Ok(Step::Continue(()));
        };
        if msgs[position].role != Role::Tool
            || msgs[position]
                .tool_results
                .iter()
                .all(|r| r.message_expansion.is_none())
        {
            return Ok(Step::Continue(()));
        }
        let mut tool_message = msgs[position].clone();
        let mut inserted = Vec::new();
        for r in &mut tool_message.tool_results {
            if let Some(exp) = r.message_expansion.take() {
                exp.trim(&mut r.content);
                inserted.extend(exp.messages);
            }
        }
        chain.replace_message(position, tool_message).await?;
        for mut m in inserted {
            // The run's own: a crash after it resumes the run, not a new one.
            m.mark_from_run();
            chain.push_message(m).await?;
        }
        Ok(Step::Continue(()))
    }

    /// Continues while a response is needed; otherwise ends with [`RunOutcome::Done`].
    pub fn continue_or_done(chain: &LLMChain) -> Step {
        if chain.needs_response() {
            Step::Continue(())
        } else {
            Step::Break(RunOutcome::Done)
        }
    }

    /// Starts the mode's bookkeeping. A run that starts at a person's new message is a
    /// new run: its run count, budget counters and hook state start afresh (the journal
    /// goes on: what was decided before stays on record). A
    /// run that goes on from anything else (calls to answer, a review, a crash, a message
    /// the run wrote itself: feedback to the model, a tool's inserted messages) keeps
    /// them: a resumed run does not get a fresh `max_runs` or budget. Nor does a run
    /// resumed at the very message it began at (killed during its first model call):
    /// `Spent::began_at_message` tells it apart from a new one.
    pub fn ensure_mode_state(chain: &mut LLMChain) {
        let n = chain.messages().len() as u64;
        let fresh = chain
            .last_message()
            .is_none_or(|m| m.role == Role::User && !m.is_from_run())
            // Already begun at this very message (killed before its first answer was
            // stored): the same run.
            && chain.state.spent.began_at_message != Some(n);
        if fresh {
            // New counts, but the same record: the journal keeps every decision made
            // before (each names its call, and call ids are unique in a conversation),
            // so the rulings that settled the last answer's calls just before this
            // message (a resumed run, an approval) stay on record.
            chain.state.run_count = 0;
            chain.state.spent = super::budget::Spent::default();
            chain.state.hooks.clear();
            chain.state.spent.began_at_message = Some(n);
        }
    }

    /// Model calls made in this run.
    pub fn run_count(chain: &LLMChain) -> u32 {
        chain.state.run_count
    }
}

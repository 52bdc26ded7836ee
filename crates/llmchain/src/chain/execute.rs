//! Running a batch of tool calls: execution as `decide.rs` planned it, statuses, the
//! tool message, `after_tool`, the failure budget and the repeat guard.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::Value;

use super::callbacks::ChainCallbacks;
use super::decide::Plan;
use super::error::ChainError;
use super::llm_chain::LLMChain;
use super::mode::RunOutcome;
use super::review::{HumanDecision, ReviewDecision};
use super::sink::{ConversationSink, SinkError};
use super::state::{PendingCall, PendingReview};
use super::steps::Step;
use crate::message::{ExecutionStatus, Message, ToolCall, ToolResult};
use crate::tool::{ExecutionObserver, ObserverFuture, ToolExecutor};
use tokio_util::sync::CancellationToken;

/// Persists status transitions and fires `on_tool_pre_execution` as bodies start.
struct ChainObserver {
    sink: Option<Arc<dyn ConversationSink>>,
    callbacks: Vec<Arc<dyn ChainCallbacks>>,
    errors: std::sync::Mutex<Vec<SinkError>>,
    /// Fired when a write fails in a way that means stop (lost lease, cancelled run):
    /// the other calls of the batch are cancelled rather than run unrecorded.
    stop: CancellationToken,
}

impl ChainObserver {
    async fn persist(&self, call: &ToolCall, status: ExecutionStatus) -> Result<(), String> {
        let (Some(sink), Some(id)) = (&self.sink, call.call_id.as_deref()) else {
            return Ok(());
        };
        sink.set_tool_status(id, status).await.map_err(|e| {
            let text = e.to_string();
            if e.must_stop() {
                self.stop.cancel();
            }
            self.errors
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(e);
            text
        })
    }
}

impl ExecutionObserver for ChainObserver {
    fn on_start<'a>(&'a self, call: &'a ToolCall) -> ObserverFuture<'a, Result<(), String>> {
        Box::pin(async move {
            if self.stop.is_cancelled() {
                return Err("the run is stopping".to_owned());
            }
            self.persist(call, ExecutionStatus::Executing).await?;
            for cb in &self.callbacks {
                cb.on_tool_pre_execution(call);
            }
            Ok(())
        })
    }

    fn on_finish<'a>(&'a self, call: &'a ToolCall, result: &'a ToolResult) -> ObserverFuture<'a> {
        Box::pin(async move {
            let status = if result.is_error() {
                ExecutionStatus::Failed
            } else {
                ExecutionStatus::Completed
            };
            // A failure is recorded in `errors`; the batch stops after it.
            let _ = self.persist(call, status).await;
        })
    }
}

/// The span of a call answered without running (denied, rejected, its outcome unknown,
/// refused over a cap): `execute_tool {tool}` as the conventions name it, with the way it
/// was answered in `llmchain.tool.decision`; an error (`error.type`) unless a person
/// denied it.
fn answered_span(call: &ToolCall, status: ExecutionStatus, rule: Option<&str>) {
    let name = call.name.as_deref().unwrap_or("");
    let error = match status {
        ExecutionStatus::Denied => None,
        ExecutionStatus::Rejected => Some("rejected"),
        ExecutionStatus::Failed => Some("outcome_unknown"),
        _ => Some("_OTHER"),
    };
    let span = tracing::info_span!(
        "execute_tool",
        "otel.name" = crate::telemetry::tool_span_name(name),
        "otel.kind" = "internal",
        "otel.status_code" = error.map(|_| "error"),
        "gen_ai.operation.name" = "execute_tool",
        "gen_ai.tool.name" = name,
        "gen_ai.tool.call.id" = call.call_id.as_deref(),
        "gen_ai.tool.type" = "function",
        "error.type" = error,
        "llmchain.tool.decision" = status.as_str(),
        "llmchain.policy.rule" = rule,
    );
    drop(span.enter());
}

/// Keeps what ran of a rewritten result, by call id: the first record (what the tool
/// returned) stays, later rewriters are added to its `rewritten_by`.
fn keep_aside(rewritten: &mut serde_json::Map<String, Value>, id: &str, aside: Option<Value>) {
    let Some(aside) = aside else { return };
    match rewritten.get_mut(id) {
        Some(first) => {
            let by = format!(
                "{},{}",
                first["rewritten_by"].as_str().unwrap_or_default(),
                aside["rewritten_by"].as_str().unwrap_or_default()
            );
            first["rewritten_by"] = by.into();
        }
        None => {
            rewritten.insert(id.to_owned(), aside);
        }
    }
}

/// The canonical signature of a call, for the repetition guard.
fn signature(call: &ToolCall) -> String {
    format!(
        "{}:{}",
        call.name.as_deref().unwrap_or(""),
        Value::Object(call.arguments_as_map())
    )
}

impl LLMChain {
    /// The `execute_tools` step.
    pub(super) async fn execute_pending_tools(&mut self) -> Result<Step, ChainError> {
        let Some(position) = self.unanswered_calls_position() else {
            return Ok(Step::Continue(()));
        };
        let decisions = match self.state.pending_review.take() {
            Some(p) if p.message_position == position => {
                if p.awaiting().next().is_some() {
                    self.state.pending_review = Some(p.clone());
                    return Ok(Step::Break(RunOutcome::ReviewRequired(p)));
                }
                p.calls
            }
            _ => match self.review_batch(position).await? {
                Some(calls) => calls,
                None => {
                    let p = self
                        .state
                        .pending_review
                        .clone()
                        .ok_or_else(|| ChainError::Resume("no pending review".into()))?;
                    return Ok(Step::Break(RunOutcome::ReviewRequired(p)));
                }
            },
        };
        self.run_batch(position, decisions, &HashSet::new()).await?;
        self.after_batch().await
    }

    /// Asks the review handler about every complete call. `None` when the batch must
    /// wait for a human (the pending review is saved).
    async fn review_batch(
        &mut self,
        position: usize,
    ) -> Result<Option<Vec<PendingCall>>, ChainError> {
        let targets = self.unanswered_calls(position);
        let message = &self.messages()[position];
        let calls: Vec<ToolCall> = targets
            .iter()
            .map(|&i| &message.tool_calls[i])
            .filter(|c| c.is_complete())
            .cloned()
            .collect();
        let mut decided = Vec::with_capacity(calls.len());
        let mut awaiting = false;
        for call in &calls {
            let d = self.decide_call(call, None).await?;
            awaiting |= d.decision.is_none();
            decided.push(PendingCall {
                call_id: call.call_id.clone().unwrap_or_default(),
                name: call.name.clone().unwrap_or_default(),
                decision: d.decision,
                rule: d.rule,
            });
        }
        if awaiting {
            self.state.pending_review = Some(PendingReview {
                message_position: position,
                calls: decided,
            });
            self.save_state().await?;
            return Ok(None);
        }
        Ok(Some(decided))
    }

    /// Applies human decisions to the pending review and runs the batch.
    pub(super) async fn apply_human_decisions(
        &mut self,
        decisions: Vec<(String, HumanDecision)>,
    ) -> Result<Step, ChainError> {
        let Some(pending) = self.state.pending_review.clone() else {
            return Err(ChainError::Resume("nothing is waiting for review".into()));
        };
        let position = pending.message_position;
        if self.unanswered_calls_position() != Some(position) {
            return Err(ChainError::Resume(
                "the paused calls were already answered".into(),
            ));
        }
        let mut given: std::collections::HashMap<String, HumanDecision> =
            decisions.into_iter().collect();
        // The batch's decisions: a person's where one is given; otherwise the review
        // handler's, asked again now (a saved state is data: it never says on its own
        // that a call may run), or, for a chain without a handler, the saved ones (an
        // application's own state, its own authority).
        let message = self.messages()[position].clone();
        let mut calls = Vec::new();
        let mut human = HashSet::new();
        let mut missing = Vec::new();
        for i in self.unanswered_calls(position) {
            let call = &message.tool_calls[i];
            if !call.is_complete() {
                continue;
            }
            let id = call.call_id.clone().unwrap_or_default();
            let name = call.name.clone().unwrap_or_default();
            let (decision, rule) = if let Some(d) = given.remove(&id) {
                human.insert(id.clone());
                let d = self.decide_call(call, Some(d.into_review(&name))).await?;
                (d.decision, d.rule)
            } else if self.review.is_none()
                && self.policies.is_empty()
                && !self.outcome_unknown(call)
            {
                // No one decides here: the saved decisions stand (an application's own
                // state, its own authority).
                let saved = pending.calls.iter().find(|c| c.call_id == id);
                (
                    saved.and_then(|c| c.decision.clone()),
                    saved.and_then(|c| c.rule.clone()),
                )
            } else {
                // The stack decides again: journaled rulings and reviews are replayed,
                // nothing else is taken from the saved state on its own word.
                let d = self.decide_call(call, None).await?;
                (d.decision, d.rule)
            };
            if decision.is_none() {
                missing.push(id.clone());
            }
            calls.push(PendingCall {
                call_id: id,
                name,
                decision,
                rule,
            });
        }
        if let Some(stray) = given.keys().next() {
            return Err(ChainError::Resume(format!(
                "no pending call has the id '{stray}'"
            )));
        }
        if !missing.is_empty() {
            return Err(ChainError::Resume(format!(
                "a decision is needed for every paused call; missing: {}",
                missing.join(", ")
            )));
        }
        // A person's approval is spent only on a call that can run: one whose tool this
        // chain does not have (its MCP server not connected here) keeps the review
        // open, and nothing changes, so the same decision applies once it can.
        if let Some(c) = calls.iter().find(|c| {
            human.contains(&c.call_id)
                && matches!(
                    c.decision,
                    Some(ReviewDecision::Approve | ReviewDecision::Edit { .. })
                )
                && self.tool(&c.name).is_none()
        }) {
            return Err(ChainError::Resume(format!(
                "call {} was approved to run {}, a tool this chain does not have (is its MCP \
                 server connected here?); nothing ran and the approval is kept",
                crate::tool::shown_name(&c.call_id),
                crate::tool::shown_name(&c.name)
            )));
        }
        self.state.pending_review = None;
        self.run_batch(position, calls, &human).await?;
        self.after_batch().await
    }

    /// After a batch: the run goes on, or stops because a budget ran out in it.
    async fn after_batch(&mut self) -> Result<Step, ChainError> {
        match self.stop_after_batch.take() {
            None => Ok(Step::Continue(())),
            Some(stop) => self.stop_for_budget(*stop).await,
        }
    }

    /// Runs `calls` through the executor, each `executing` status stored before its
    /// body starts and each outcome after (at most once): the results in call order.
    /// A write that must stop the run, or a cancellation, is an error and no result.
    pub(super) async fn run_calls(
        &self,
        to_run: &mut [ToolCall],
        approved: &HashSet<String>,
    ) -> Result<Vec<ToolResult>, ChainError> {
        let observer = Arc::new(ChainObserver {
            sink: self.sink.clone(),
            callbacks: self.callbacks.clone(),
            errors: std::sync::Mutex::new(Vec::new()),
            stop: self.cancel.child_token(),
        });
        let mut executor = ToolExecutor::new(self.tools.iter().cloned())
            .and_then(|e| e.with_max_concurrency(self.max_concurrent_tools.max(1)))
            .map_err(|e| ChainError::Resume(e.to_string()))?
            .with_max_result_bytes(self.max_tool_result_bytes)
            .with_default_timeout(super::budget::Budget::seconds(self.budget.tool_seconds))
            .with_context_arc(self.custom_context.clone())
            .with_observer(observer.clone())
            .with_human_approved(approved.iter().cloned());
        // The guards on results: a span records a result as the model will see it.
        if self.guards.any_at(crate::guard::Point::ToolResult) {
            let guards = self.guards.clone();
            executor = executor.with_span_result(Arc::new(move |text: &str| {
                let checked = guards.check(crate::guard::Point::ToolResult, text);
                match checked.stop {
                    Some((guard, _)) => format!("[withheld by guard {guard}]"),
                    None => checked.text.into_owned(),
                }
            }));
        }
        // Your hooks' wrap_tool: the onion around each call's run.
        if let Some(wrap) = self.hooks.wrap_tool() {
            executor = executor.with_wrap_tool(wrap);
        }
        let run_results = {
            // The observer's token: a child of the chain's, also fired by a lost lease.
            // Each call has its own `execute_tool` span, a child of the turn's (no span
            // for the batch: the conventions have none).
            let cancel = observer.stop.clone();
            let fut = executor.execute_with_cancel(to_run, &cancel);
            tokio::select! {
                biased;
                _ = self.cancel.cancelled() => None,
                r = fut => Some(r),
            }
        };
        // A write that must stop the run (lost lease, cancelled run) wins over the
        // cancellation it caused.
        let stop_error = observer
            .errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|e| e.must_stop())
            .cloned();
        if let Some(e) = stop_error {
            return Err(ChainError::Persist(e));
        }
        let Some(run_results) = run_results else {
            // Cancelled mid-tool: no half-written tool message. Statuses stay as persisted
            // (executing), so a resume treats unfinished calls as of unknown outcome.
            return Err(ChainError::Cancelled);
        };
        if let Some(e) = observer
            .errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .first()
        {
            return Err(ChainError::Persist(e.clone()));
        }
        Ok(run_results)
    }

    /// Runs the calls of the message at `position` with the given decisions (those of
    /// the calls in `human` made by a person), adds the tool message and updates the
    /// failure budget.
    async fn run_batch(
        &mut self,
        position: usize,
        decisions: Vec<PendingCall>,
        human: &HashSet<String>,
    ) -> Result<(), ChainError> {
        let message = self.messages()[position].clone();
        let targets = self.unanswered_calls(position);
        let (plans, rules) = self
            .plan_batch(&message, &targets, &decisions, human)
            .await?;

        // What is stored is what runs: edited arguments (the model's kept in the call's
        // metadata) and a person's approval are written into the stored assistant
        // message before any body starts, so the conversation, an export and the model's
        // next request all carry the call as it ran, whatever happens next.
        let edits: Vec<(usize, &ToolCall)> = plans
            .iter()
            .zip(&targets)
            .filter_map(|(p, &i)| match p {
                Plan::Run(c)
                    if (c.was_edited() || c.human_approved()) && message.tool_calls[i] != *c =>
                {
                    Some((i, c))
                }
                _ => None,
            })
            .collect();
        if !edits.is_empty() {
            let mut edited = self.messages()[position].clone();
            for (i, call) in edits {
                edited.tool_calls[i].arguments = call.arguments.clone();
                edited.tool_calls[i].metadata = call.metadata.clone();
            }
            self.replace_message(position, edited).await?;
        }
        let message = self.messages()[position].clone();

        for plan in &plans {
            if let Plan::Run(call) = plan
                && call.is_complete()
            {
                self.fire(|cb| cb.on_tool_execution_started(call));
            }
        }

        let mut to_run: Vec<ToolCall> = plans
            .iter()
            .filter_map(|p| match p {
                Plan::Run(c) => Some(c.clone()),
                Plan::Answer(..) => None,
            })
            .collect();
        // The calls a person approved (this batch's human decisions), for their tools.
        let approved: HashSet<String> = to_run
            .iter()
            .filter_map(|c| c.call_id.clone())
            .filter(|id| human.contains(id))
            .collect();
        // The batch's decisions (journaled rulings and reviews) are written with the
        // first `executing` status, before any body starts.
        if !to_run.is_empty()
            && (!self.policies.is_empty() || self.review.is_some() || !self.hooks.is_empty())
        {
            self.save_state().await?;
        }
        let run_results = self.run_calls(&mut to_run, &approved).await?;

        // Results in call order; statuses copied back onto the message's calls.
        let mut ran = to_run.into_iter().zip(run_results);
        let mut results = Vec::with_capacity(plans.len());
        // What ran, for each result a hook or guard rewrote (kept in the tool message's
        // metadata, never in the result a UI shows).
        let mut rewritten = serde_json::Map::new();
        let mut updated = message.clone();
        for ((plan, &i), rule) in plans.into_iter().zip(&targets).zip(&rules) {
            let call = &mut updated.tool_calls[i];
            let result = match plan {
                Plan::Answer(r, status) => {
                    answered_span(call, status, rule.as_deref());
                    call.set_execution_status(status);
                    if let (Some(sink), Some(id)) = (&self.sink, call.call_id.as_deref()) {
                        sink.set_tool_status(id, status)
                            .await
                            .map_err(ChainError::Persist)?;
                    }
                    r
                }
                Plan::Run(_) => match ran.next() {
                    Some((ran_call, mut r)) => {
                        let id = ran_call.call_id.clone().unwrap_or_default();
                        if !self.hooks.is_empty() && ran_call.is_complete() && !r.is_interrupt() {
                            let (stop, aside) = self.after_tool(&ran_call, &mut r).await;
                            if let Some(stop) = stop {
                                self.stop_after_batch.get_or_insert(Box::new(stop));
                            }
                            keep_aside(&mut rewritten, &id, aside);
                        }
                        if ran_call.is_complete()
                            && !r.is_interrupt()
                            && self.guards.any_at(crate::guard::Point::ToolResult)
                        {
                            let aside = self.guard_result(&ran_call, &mut r);
                            keep_aside(&mut rewritten, &id, aside);
                        }
                        call.arguments = ran_call.arguments;
                        call.metadata = ran_call.metadata;
                        r
                    }
                    None => {
                        return Err(ChainError::Resume(
                            "the executor returned fewer results than calls".into(),
                        ));
                    }
                },
            };
            results.push(result);
        }
        self.state.conversation.messages[position] = updated;

        // Callbacks, in call order.
        let calls: Vec<ToolCall> = targets
            .iter()
            .map(|&i| self.messages()[position].tool_calls[i].clone())
            .collect();
        for (call, r) in calls.iter().zip(&results) {
            if r.is_interrupt() {
                continue;
            }
            if r.is_error() {
                if let Some(x) = r.exception_info() {
                    self.fire(|cb| cb.on_tool_execution_exception(call, x));
                }
                self.fire(|cb| cb.on_tool_execution_failed(call, r));
            } else {
                self.fire(|cb| cb.on_tool_execution_completed(call, r));
            }
        }
        let interrupted: Vec<ToolResult> = results
            .iter()
            .filter(|r| r.is_interrupt())
            .cloned()
            .collect();
        if !interrupted.is_empty() {
            self.fire(|cb| cb.on_tool_interrupted(&interrupted));
        }

        // Failure budget and repetition guard.
        let mut repeated = None;
        let had_errors = results.iter().any(ToolResult::is_error);
        if had_errors {
            self.state.current_failure_count += 1;
            for (call, r) in calls.iter().zip(&results) {
                if r.is_error() {
                    let n = self.state.failing_calls.entry(signature(call)).or_insert(0);
                    *n += 1;
                    if *n > self.max_repeated_failures && repeated.is_none() {
                        repeated = Some((call.name.clone().unwrap_or_default(), *n));
                    }
                }
            }
        } else {
            self.state.current_failure_count = 0;
        }

        let mut tool_message = Message::tool(results);
        if !rewritten.is_empty() {
            tool_message
                .metadata
                .insert("rewritten".into(), Value::Object(rewritten));
        }
        self.push_message(tool_message).await?;
        if let Some(m) = self.last_message() {
            self.fire(|cb| cb.on_message_processed(m));
            self.fire(|cb| cb.on_tool_response_created(m));
        }
        self.save_state().await?;
        if let Some((tool, count)) = repeated {
            return Err(ChainError::RepeatedFailingCall { tool, count });
        }
        Ok(())
    }
}

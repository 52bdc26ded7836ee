//! [`LLMChain`]: the conversation, the model, the tools and the run loop.

use std::any::Any;
use std::collections::HashSet;
use std::sync::Arc;

use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::callbacks::ChainCallbacks;
use super::error::ChainError;
use super::review::{ReviewDecision, ReviewHandler};
use super::sink::ConversationSink;
use super::state::{ChainState, PendingReview};
use crate::conversation::{Conversation, ToolDefinition};
use crate::message::{ExecutionStatus, Message, MessageDelta, MessageStatus, Role, ToolCall};
use crate::model::{ChatModel, ModelError, ModelEvent};
use crate::provider::DecodeOutcome;
use crate::tool::{Tool, humanize_tool_name};

/// The default failure budget (reference: 3).
pub const DEFAULT_MAX_RETRY_COUNT: u32 = 3;
/// How often the same failing call (tool + arguments) may repeat before the run stops.
pub const DEFAULT_MAX_REPEATED_FAILURES: u32 = 3;

/// A conversation with a model and tools, and the loop that runs them.
///
/// Build one with [`LLMChain::new`], add messages, then [`run`](LLMChain::run) it in a
/// [`Mode`](super::Mode). See the [module docs](super) for an example.
pub struct LLMChain {
    pub(super) model: Arc<dyn ChatModel>,
    pub(super) fallbacks: Vec<Arc<dyn ChatModel>>,
    pub(super) tools: Vec<Tool>,
    pub(super) state: ChainState,
    pub(super) custom_context: Option<Arc<dyn Any + Send + Sync>>,
    pub(super) callbacks: Vec<Arc<dyn ChainCallbacks>>,
    /// The events of a run driven by [`LLMChain::stream`], while it runs.
    pub(super) events: Option<Arc<super::events::Forward>>,
    pub(super) review: Option<Arc<dyn ReviewHandler>>,
    pub(super) sink: Option<Arc<dyn ConversationSink>>,
    pub(super) cancel: CancellationToken,
    pub(super) needs_response: bool,
    /// The failure budget: consecutive failed tool batches before the run stops.
    pub max_retry_count: u32,
    /// How often the model may repeat one failing call before the run stops.
    pub max_repeated_failures: u32,
    /// Concurrent tool calls per batch.
    pub max_concurrent_tools: usize,
    /// The cap on one tool result's content, in bytes (see
    /// [`ToolExecutor::with_max_result_bytes`](crate::tool::ToolExecutor::with_max_result_bytes)).
    pub max_tool_result_bytes: usize,
    /// At most this many calls of one assistant message are run; a message with more has
    /// every call refused (none runs), so the model can ask again with fewer.
    pub max_calls_per_turn: usize,
    /// At most this many bytes of arguments, all calls of one message together; over
    /// it, every call of the message is refused.
    pub max_call_argument_bytes_per_turn: usize,
    /// What the telemetry names this chain by (`gen_ai.conversation.id`,
    /// `gen_ai.agent.name`).
    pub(super) telemetry: Telemetry,
    /// How much a run may spend. (Boxed, like the stops below: a chain is moved into
    /// every run's future, and most chains set none of it.)
    pub(super) budget: Box<super::budget::Budget>,
    /// The policies every call passes.
    pub(super) policies: Vec<Arc<dyn crate::policy::Policy>>,
    /// Your hooks, in the stack's order.
    pub(super) hooks: super::hook::HookStack,
    /// The guards ([`crate::guard`]), in the order added.
    pub(super) guards: crate::guard::Guards,
    /// The context window requests are compacted to: `Some(0)` never, `None` the
    /// built-in table's for the model (see [`super::context_window`]).
    pub(super) context_window: Option<u32>,
    /// How long one hook point may take before it fails closed.
    pub(super) hook_timeout: std::time::Duration,
    /// A budget that ran out, or a hook that stopped the run, during the batch being
    /// run: the run stops after it.
    pub(super) stop_after_batch: Option<Box<super::budget::RunStop>>,
    /// Why the last run stopped before its end, if a decision stopped it.
    pub(super) stopped: Option<Box<super::budget::RunStop>>,
}

/// What the chain's spans name it by.
#[derive(Debug, Clone, Default)]
pub(super) struct Telemetry {
    pub(super) conversation_id: Option<String>,
    pub(super) agent_name: Option<String>,
}

/// How long one hook point may take by default before it fails closed.
pub const DEFAULT_HOOK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The default [`LLMChain::max_calls_per_turn`].
pub const DEFAULT_MAX_CALLS_PER_TURN: usize = 128;

/// The default [`LLMChain::max_call_argument_bytes_per_turn`]: 16 MiB.
pub const DEFAULT_MAX_CALL_ARGUMENT_BYTES_PER_TURN: usize = 16 << 20;

impl std::fmt::Debug for LLMChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LLMChain")
            .field("model", &self.model.model_name())
            .field("tools", &self.tools.len())
            .field("messages", &self.state.conversation.messages.len())
            .field("failure_count", &self.state.current_failure_count)
            .finish_non_exhaustive()
    }
}

impl LLMChain {
    /// A chain over `model` (any [`ChatModel`], or an `Arc` of one), with no tools and
    /// no messages.
    pub fn new(model: impl ChatModel + 'static) -> Self {
        LLMChain {
            model: Arc::new(model),
            fallbacks: Vec::new(),
            tools: Vec::new(),
            state: ChainState {
                conversation: Conversation::new(),
                ..Default::default()
            },
            custom_context: None,
            callbacks: Vec::new(),
            events: None,
            review: None,
            sink: None,
            cancel: CancellationToken::new(),
            needs_response: false,
            max_retry_count: DEFAULT_MAX_RETRY_COUNT,
            max_repeated_failures: DEFAULT_MAX_REPEATED_FAILURES,
            max_concurrent_tools: 16,
            max_tool_result_bytes: crate::tool::DEFAULT_MAX_RESULT_BYTES,
            max_calls_per_turn: DEFAULT_MAX_CALLS_PER_TURN,
            max_call_argument_bytes_per_turn: DEFAULT_MAX_CALL_ARGUMENT_BYTES_PER_TURN,
            telemetry: Telemetry::default(),
            budget: Box::default(),
            policies: Vec::new(),
            guards: crate::guard::Guards::default(),
            context_window: None,
            hooks: super::hook::HookStack::default(),
            hook_timeout: DEFAULT_HOOK_TIMEOUT,
            stop_after_batch: None,
            stopped: None,
        }
    }

    /// Restores a chain from its saved state (e.g. a paused run, in another process).
    /// Tools, callbacks, review handler and sink are not part of the state: add them again.
    pub fn from_state(model: impl ChatModel + 'static, state: ChainState) -> Self {
        let mut chain = LLMChain::new(model);
        chain.state = state;
        // A pending review is of the newest answer's unanswered calls. One saved before
        // its calls were answered (a process stopped after the tool message was stored,
        // before the state that said so was) waits for nothing.
        let stale = chain.state.pending_review.as_ref().is_some_and(|p| {
            crate::conversation::unanswered_calls(&chain.state.conversation.messages)
                .map(|(position, _)| position)
                != Some(p.message_position)
        });
        if stale {
            chain.state.pending_review = None;
        }
        chain.needs_response = chain.compute_needs_response();
        chain
    }

    /// Sets the system prompt.
    #[must_use]
    pub fn with_system(mut self, system: impl Into<String>) -> Self {
        self.state.conversation.system = Some(system.into());
        self
    }

    /// Sets whether and which tool the model must call ([`ToolChoice`](crate::conversation::ToolChoice)).
    #[must_use]
    pub fn with_tool_choice(mut self, choice: crate::conversation::ToolChoice) -> Self {
        self.state.conversation.tool_choice = choice;
        self
    }

    /// Adds a tool (its definition is sent to the model).
    #[must_use]
    pub fn with_tool(mut self, tool: Tool) -> Self {
        self.add_tool(tool);
        self
    }

    /// Adds a tool; a tool of the same name is replaced.
    pub fn add_tool(&mut self, tool: Tool) {
        let def: ToolDefinition = tool.definition();
        let defs = &mut self.state.conversation.tools;
        match defs.iter_mut().find(|d| d.name == def.name) {
            Some(d) => *d = def,
            None => defs.push(def),
        }
        self.tools.retain(|t| t.name() != tool.name());
        self.tools.push(tool);
    }

    /// The conversation's id, for the telemetry (`gen_ai.conversation.id` on every span
    /// of a run: a backend groups them into one session). A store's run sets it.
    #[must_use]
    pub fn with_conversation_id(mut self, id: impl Into<String>) -> Self {
        self.telemetry.conversation_id = Some(id.into());
        self
    }

    /// The agent's name, for the telemetry (`invoke_agent {name}`, `gen_ai.agent.name`).
    #[must_use]
    pub fn with_agent_name(mut self, name: impl Into<String>) -> Self {
        self.telemetry.agent_name = Some(name.into());
        self
    }

    /// Sets the fallback models, tried in order when a call fails.
    #[must_use]
    pub fn with_fallbacks(mut self, models: Vec<Arc<dyn ChatModel>>) -> Self {
        self.fallbacks = models;
        self
    }

    /// Adds a fallback model, tried after the ones before it when a call fails.
    #[must_use]
    pub fn with_fallback(mut self, model: impl ChatModel + 'static) -> Self {
        self.fallbacks.push(Arc::new(model));
        self
    }

    /// Sets the application context tools receive.
    #[must_use]
    pub fn with_custom_context(mut self, ctx: Arc<dyn Any + Send + Sync>) -> Self {
        self.custom_context = Some(ctx);
        self
    }

    /// Adds callbacks.
    #[must_use]
    pub fn with_callbacks(mut self, callbacks: impl ChainCallbacks + 'static) -> Self {
        self.callbacks.push(Arc::new(callbacks));
        self
    }

    /// Reviews each complete call before it runs (`on_tool_call_review`) with a
    /// function; its argument's type is inferred:
    ///
    /// ```
    /// # use llmchain::chain::{LLMChain, ReviewDecision, ScriptedModel};
    /// # use llmchain::provider::Format;
    /// let chain = LLMChain::new(ScriptedModel::new(Format::ANTHROPIC)).with_review(|call| {
    ///     match call.name.as_deref() {
    ///         Some("delete_file") => ReviewDecision::Interrupt,
    ///         _ => ReviewDecision::Approve,
    ///     }
    /// });
    /// ```
    #[must_use]
    pub fn with_review<F>(self, review: F) -> Self
    where
        F: Fn(&ToolCall) -> ReviewDecision + Send + Sync + 'static,
    {
        self.with_review_handler(review)
    }

    /// Sets the review handler (`on_tool_call_review`): anything implementing
    /// [`ReviewHandler`], e.g. one that asks a person asynchronously.
    #[must_use]
    pub fn with_review_handler(mut self, handler: impl ReviewHandler + 'static) -> Self {
        self.review = Some(Arc::new(handler));
        self
    }

    /// Persists every change through `sink` (any [`ConversationSink`], or an `Arc` of
    /// one).
    #[must_use]
    pub fn with_sink(mut self, sink: impl ConversationSink + 'static) -> Self {
        self.sink = Some(Arc::new(sink));
        self
    }

    /// Sets how much a run may spend ([`Budget`](super::Budget)); the counters are in
    /// the run's state ([`LLMChain::spent`]) and survive a crash.
    #[must_use]
    pub fn with_budget(mut self, budget: super::budget::Budget) -> Self {
        self.budget = Box::new(budget);
        self
    }

    /// Adds a policy every call passes before it runs (see [`crate::policy`]); several
    /// combine as deny > ask > allow.
    #[must_use]
    pub fn with_policy(mut self, policy: impl crate::policy::Policy + 'static) -> Self {
        self.policies.push(Arc::new(policy));
        self
    }

    /// Adds a shared policy.
    #[must_use]
    pub fn with_policy_arc(mut self, policy: Arc<dyn crate::policy::Policy>) -> Self {
        self.policies.push(policy);
        self
    }

    /// Adds a guard ([`crate::guard`]): after the policies and before review on a call's
    /// arguments, on each result before the model sees it, and on the user messages of
    /// each request. Guards run in the order added.
    #[must_use]
    pub fn with_guard(self, guard: impl crate::guard::Guard + 'static) -> Self {
        self.with_guard_arc(Arc::new(guard))
    }

    /// Compacts each request to fit a context window of `tokens` (see the compaction
    /// docs in ARCHITECTURE.md: old results cleared, then the oldest turn groups left out
    /// of the request, never a call without its result; the stored conversation keeps
    /// everything). By default the built-in table's window for the model
    /// ([`super::context_window`]); `0` turns compaction off.
    #[must_use]
    pub fn with_context_window(mut self, tokens: u32) -> Self {
        self.context_window = Some(tokens);
        self
    }

    /// Adds a shared guard.
    #[must_use]
    pub fn with_guard_arc(mut self, guard: Arc<dyn crate::guard::Guard>) -> Self {
        self.guards.push(guard);
        self
    }

    /// Adds a hook to the decision stack, in its layer's place (see [`super::Hook`]).
    #[must_use]
    pub fn with_hook(self, hook: impl super::hook::Hook + 'static) -> Self {
        self.with_hook_arc(Arc::new(hook))
    }

    /// Adds a shared hook to the decision stack.
    #[must_use]
    pub fn with_hook_arc(mut self, hook: Arc<dyn super::hook::Hook>) -> Self {
        self.hooks.push(hook);
        self
    }

    /// How long one hook point may take before it fails closed (default
    /// [`DEFAULT_HOOK_TIMEOUT`]).
    #[must_use]
    pub fn with_hook_timeout(mut self, limit: std::time::Duration) -> Self {
        self.hook_timeout = limit;
        self
    }

    /// The run's budget.
    pub fn budget(&self) -> &super::budget::Budget {
        &self.budget
    }

    /// What the current run has spent.
    pub fn spent(&self) -> &super::budget::Spent {
        &self.state.spent
    }

    /// Why the last run stopped before its end ([`RunOutcome::Stopped`](super::RunOutcome::Stopped),
    /// or [`ChainError::BudgetExhausted`]): for a holder of runs that records only that
    /// the run ended.
    pub fn stopped(&self) -> Option<&super::budget::RunStop> {
        self.stopped.as_deref()
    }

    /// The current run's decisions, oldest first.
    pub fn journal(&self) -> &super::journal::Journal {
        &self.state.journal
    }

    /// Sets the failure budget.
    #[must_use]
    pub fn with_max_retry_count(mut self, n: u32) -> Self {
        self.max_retry_count = n;
        self
    }

    /// A token that cancels the chain's runs.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// The conversation so far.
    pub fn conversation(&self) -> &Conversation {
        &self.state.conversation
    }

    /// The messages so far.
    pub fn messages(&self) -> &[Message] {
        &self.state.conversation.messages
    }

    /// The newest message.
    pub fn last_message(&self) -> Option<&Message> {
        self.state.conversation.messages.last()
    }

    /// The saved state (serialisable; see [`LLMChain::from_state`]).
    pub fn state(&self) -> &ChainState {
        &self.state
    }

    /// Consecutive failed tool batches.
    pub fn current_failure_count(&self) -> u32 {
        self.state.current_failure_count
    }

    /// True when the last message asks for a model response (a user or tool message, or
    /// an assistant message with tool calls to answer).
    pub fn needs_response(&self) -> bool {
        self.needs_response
    }

    /// A batch waiting for human decisions, if any.
    pub fn pending_review(&self) -> Option<&PendingReview> {
        self.state.pending_review.as_ref()
    }

    /// The tools.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    pub(super) fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name() == name)
    }

    /// Removes a tool and its definition.
    pub(super) fn remove_tool(&mut self, name: &str) {
        self.tools.retain(|t| t.name() != name);
        self.state.conversation.tools.retain(|d| d.name != name);
    }

    /// Adds a message (persisted through the sink). The calls of a complete assistant
    /// message built by hand ([`Message::assistant_with_calls`]) are completed here, as
    /// [`Message::validate`] would: a valid call is then executable, and an invalid one
    /// is refused with its validation errors when the chain runs it.
    pub async fn add_message(&mut self, mut message: Message) -> Result<(), ChainError> {
        if message.role == Role::Assistant {
            message.complete_tool_calls();
        }
        self.push_message(message).await
    }

    pub(super) async fn push_message(&mut self, message: Message) -> Result<(), ChainError> {
        let identified = self.store_message(message).await?;
        self.announce_identified(&identified);
        Ok(())
    }

    /// Appends a message once the sink has stored it, returning the positions of the
    /// calls it identified. Their `on_tool_call_identified` waits for
    /// [`Self::announce_identified`]: nothing is announced for a message the store
    /// refused.
    async fn store_message(&mut self, mut message: Message) -> Result<Vec<usize>, ChainError> {
        let mut identified = Vec::new();
        if message.role == Role::Assistant {
            self.make_call_ids_unique(&mut message);
            identified = self.identify_calls(&mut message);
            // The guards on the calls' arguments, before anyone sees them (the served
            // page, the terminal, a span): stored as they leave them.
            if self.guards.any_at(crate::guard::Point::ToolArguments) {
                self.guard_calls(&mut message);
            }
        }
        let position = self.state.conversation.messages.len();
        if let Some(sink) = &self.sink {
            sink.append_message(position, &message)
                .await
                .map_err(ChainError::Persist)?;
        }
        self.state.conversation.messages.push(message);
        self.needs_response = self.compute_needs_response();
        Ok(identified)
    }

    /// Fires `on_tool_call_identified` for the last message's calls at `positions`.
    fn announce_identified(&self, positions: &[usize]) {
        let Some(m) = self.state.conversation.messages.last() else {
            return;
        };
        for call in positions.iter().filter_map(|&i| m.tool_calls.get(i)) {
            self.fire(|cb| cb.on_tool_call_identified(call));
        }
    }

    pub(super) async fn replace_message(
        &mut self,
        position: usize,
        message: Message,
    ) -> Result<(), ChainError> {
        if let Some(sink) = &self.sink {
            sink.replace_message(position, &message)
                .await
                .map_err(ChainError::Persist)?;
        }
        self.state.conversation.messages[position] = message;
        Ok(())
    }

    pub(super) async fn save_state(&self) -> Result<(), ChainError> {
        if let Some(sink) = &self.sink {
            sink.save_state(&self.state)
                .await
                .map_err(ChainError::Persist)?;
        }
        Ok(())
    }

    /// Makes the state durable now (a budget's charge before the call it pays for).
    pub(super) async fn checkpoint(&self) -> Result<(), ChainError> {
        if let Some(sink) = &self.sink {
            sink.checkpoint(&self.state)
                .await
                .map_err(ChainError::Persist)?;
        }
        Ok(())
    }

    /// Ends the run because a budget ran out: the stop is journaled, every open call of
    /// the newest answer is answered "not run", and the run ends as the budget says
    /// (with `final_answer`, after one last model call without tools).
    pub(super) async fn stop_for_budget(
        &mut self,
        stop: super::budget::RunStop,
    ) -> Result<super::steps::Step, ChainError> {
        // Boxed: a rare path whose future (a whole last model call) would otherwise
        // make every turn's future that much bigger to move around.
        Box::pin(self.stop_for_budget_now(stop)).await
    }

    async fn stop_for_budget_now(
        &mut self,
        stop: super::budget::RunStop,
    ) -> Result<super::steps::Step, ChainError> {
        use super::budget::OnExhausted;
        if stop.kind == "budget" && !self.state.spent.final_answer {
            self.state.journal.record(super::journal::Decision::Budget {
                limit: stop.limit.clone(),
                max: stop.max,
                spent: stop.spent,
            });
        }
        self.answer_open_calls(&format!("Not run: {stop}.")).await?;
        if stop.kind == "budget"
            && self.budget.on_exhausted == OnExhausted::FinalAnswer
            && !self.state.spent.final_answer
        {
            // One last answer, without tools, within the margin kept for it. Marked
            // (durably) first: a crash during it does not give a second one.
            self.state.spent.final_answer = true;
            self.checkpoint().await?;
            // The tools stay declared (providers refuse a history of calls without
            // them); the model is told to use none, and any call it makes anyway is
            // answered "not run".
            let choice = std::mem::replace(
                &mut self.state.conversation.tool_choice,
                crate::conversation::ToolChoice::Mode(crate::conversation::ToolChoiceMode::None),
            );
            let answered = match self.charge_model_call().await {
                Ok(_) => self.call_model().await.map(|_| ()),
                Err(e) => Err(e),
            };
            self.state.conversation.tool_choice = choice;
            match answered {
                // A failed final answer does not hide why the run stopped.
                Err(ChainError::Model(e) | ChainError::AllFallbacksFailed(e)) => {
                    tracing::warn!(error = %e, "the final answer after a budget stop failed");
                }
                other => other?,
            }
            self.answer_open_calls(&format!("Not run: {stop}.")).await?;
        }
        self.save_state().await?;
        self.fire(|cb| cb.on_run_stopped(&stop));
        self.stopped = Some(Box::new(stop.clone()));
        match self.budget.on_exhausted {
            OnExhausted::Error if stop.kind == "budget" => Err(ChainError::BudgetExhausted(stop)),
            _ => Ok(std::ops::ControlFlow::Break(
                super::mode::RunOutcome::Stopped(stop),
            )),
        }
    }

    /// Answers every open call of the newest answer with `why`, without running it.
    pub(super) async fn answer_open_calls(&mut self, why: &str) -> Result<(), ChainError> {
        // The newest answer's calls, a cut-off one's too (a budget or a check stopped its
        // stream): none of them runs, and each is answered, durably, with why.
        let messages = &self.state.conversation.messages;
        let open = messages
            .iter()
            .rposition(|m| m.role != Role::Tool)
            .filter(|&p| messages[p].role == Role::Assistant)
            .map(|p| {
                let open: Vec<usize> = crate::conversation::unanswered_in(messages, p)
                    .into_iter()
                    .filter(|&i| {
                        messages[p].tool_calls[i]
                            .call_id
                            .as_deref()
                            .is_some_and(|id| !id.is_empty())
                    })
                    .collect();
                (p, open)
            })
            .filter(|(_, open)| !open.is_empty());
        if let Some((position, open)) = open {
            let message = &self.state.conversation.messages[position];
            let results: Vec<crate::message::ToolResult> = open
                .iter()
                .map(|&i| {
                    let call = &message.tool_calls[i];
                    crate::message::ToolResult::text(call.call_id.as_deref().unwrap_or(""), why)
                        .with_name(call.name.as_deref().unwrap_or(""))
                })
                .collect();
            self.state.pending_review = None;
            self.push_message(Message::tool(results)).await?;
        }
        Ok(())
    }

    /// Gives every call of a new assistant message an id no earlier call of the
    /// conversation has (nor an earlier call of the same message).
    ///
    /// Results, review decisions and stored execution statuses are all keyed by call id,
    /// so a reused id would let one call's status stand for another's (a non-idempotent
    /// call could look already done, or a finished one look interrupted). Ids do repeat
    /// in practice: Gemini sends none (the decoder synthesises them per response), and
    /// some compatible servers number calls `call_0`, `call_1`, ... on every turn. A
    /// repeated id becomes `<id>_<n>` (the smallest free `n` from 2), and the wire's id
    /// is kept in `metadata.wire_call_id`. Providers only require that a result names the
    /// call of the message before it, and both are sent with the new id.
    fn make_call_ids_unique(&self, message: &mut Message) {
        if message.tool_calls.iter().all(|c| c.call_id.is_none()) {
            return;
        }
        let mut seen: HashSet<String> = self
            .state
            .conversation
            .messages
            .iter()
            .flat_map(|m| m.tool_calls.iter())
            .filter_map(|c| c.call_id.clone())
            .collect();
        for call in message.tool_calls.iter_mut() {
            let Some(id) = call.call_id.clone() else {
                continue;
            };
            let fresh = crate::conversation::unique_call_id(&mut seen, &id);
            if fresh != id {
                call.call_id = Some(fresh);
                call.metadata
                    .insert("wire_call_id".into(), serde_json::Value::from(id));
            }
        }
    }

    /// Display text and `identified` status for new complete calls.
    /// Names and marks the message's calls; returns the positions of the complete
    /// calls of known tools newly identified.
    fn identify_calls(&self, message: &mut Message) -> Vec<usize> {
        let executable = message.status == MessageStatus::Complete;
        let mut identified = Vec::new();
        for (i, call) in message.tool_calls.iter_mut().enumerate() {
            let Some(name) = call.name.clone() else {
                continue;
            };
            let tool = self.tool(&name);
            if call.display_text.is_none() {
                call.display_text = Some(
                    tool.map(|t| t.display_text().to_owned())
                        .unwrap_or_else(|| humanize_tool_name(&name)),
                );
                if executable && call.is_complete() && tool.is_some() {
                    identified.push(i);
                }
            }
            if executable && call.is_complete() && !call.metadata.contains_key("execution_status") {
                call.set_execution_status(ExecutionStatus::Identified);
            }
        }
        identified
    }

    /// Position of the newest assistant message some of whose calls have no result yet
    /// ([`unanswered_calls`](crate::conversation::unanswered_calls)).
    pub(super) fn unanswered_calls_position(&self) -> Option<usize> {
        crate::conversation::unanswered_calls(&self.state.conversation.messages).map(|(p, _)| p)
    }

    /// Whether the newest answer has calls that no tool message answers yet: the chain
    /// runs them (or asks about them) before the model is asked again, and nothing else
    /// may be added to the conversation before them.
    pub fn has_unanswered_calls(&self) -> bool {
        self.unanswered_calls_position().is_some()
    }

    /// Indices of the calls of the assistant message at `position` that no later tool
    /// message answers.
    pub(super) fn unanswered_calls(&self, position: usize) -> Vec<usize> {
        crate::conversation::unanswered_in(&self.state.conversation.messages, position)
    }

    fn compute_needs_response(&self) -> bool {
        match self.state.conversation.messages.last() {
            None => false,
            Some(m) => match m.role {
                Role::User | Role::Tool => true,
                Role::System => false,
                Role::Assistant => m.status == MessageStatus::Complete && !m.tool_calls.is_empty(),
            },
        }
    }

    /// Replaces the result for `tool_call_id` (e.g. the real answer to an interrupt),
    /// persisting the changed tool message.
    pub async fn replace_tool_result(
        &mut self,
        result: crate::message::ToolResult,
    ) -> Result<bool, ChainError> {
        let msgs = &self.state.conversation.messages;
        let Some(position) = msgs.iter().rposition(|m| {
            m.role == Role::Tool
                && m.tool_results
                    .iter()
                    .any(|r| r.tool_call_id == result.tool_call_id)
        }) else {
            return Ok(false);
        };
        let mut message = msgs[position].clone();
        Message::replace_tool_result(
            std::slice::from_mut(&mut message),
            &result.tool_call_id.clone(),
            result,
        );
        self.replace_message(position, message).await?;
        Ok(true)
    }

    #[inline]
    pub(super) fn fire(&self, f: impl Fn(&dyn ChainCallbacks)) {
        for cb in &self.callbacks {
            f(cb.as_ref());
        }
        if let Some(events) = &self.events {
            f(events.as_ref());
        }
    }

    /// The price of `model` for a cost budget; an error when the budget limits cost
    /// and the price is unknown (a cost budget refuses to start rather than guess).
    fn price_of(&self, model: &dyn ChatModel) -> Result<Option<super::price::Price>, ChainError> {
        if self.budget.cost_usd.is_none() {
            return Ok(None);
        }
        match self.budget.price(model.model_name()) {
            Some(p) if p.is_valid() => Ok(Some(p)),
            _ => Err(ChainError::UnknownPrice(model.model_name().to_owned())),
        }
    }

    /// Charges the next model call to the budget, durably when a budget limits the run;
    /// `Some` when the budget forbids it.
    pub(super) async fn charge_model_call(
        &mut self,
    ) -> Result<Option<super::budget::RunStop>, ChainError> {
        use super::budget::{DEFAULT_RESERVED_OUTPUT_TOKENS, before_model_call, estimate_tokens};
        let now = super::journal::now_ms();
        if self.state.spent.started_ms == 0 {
            self.state.spent.started_ms = now;
        }
        if !self.budget.limits() {
            self.state.spent.model_calls += 1;
            return Ok(None);
        }
        // A cost budget needs every model's price, fallbacks included, before the
        // first call.
        let mut price = None;
        if self.budget.cost_usd.is_some() {
            for m in &self.fallbacks {
                self.price_of(m.as_ref())?;
            }
            price = self.price_of(self.model.as_ref())?;
        }
        let watch = self.budget.tokens.is_some() || price.is_some();
        let input = if watch {
            estimate_tokens(serde_json::to_vec(&self.state.conversation).map_or(0, |v| v.len()))
        } else {
            0
        };
        let allowance = self
            .budget
            .reserve_output_tokens
            .or(self.model.request_info().max_tokens.map(u64::from))
            .unwrap_or(DEFAULT_RESERVED_OUTPUT_TOKENS);
        // The dearest of the models that may answer is reserved.
        let reserve_cost = price.map_or(0, |p| {
            let mut most = p.reserve_micro_usd(input, allowance);
            for m in &self.fallbacks {
                if let Some(q) = self.budget.price(m.model_name()) {
                    most = most.max(q.reserve_micro_usd(input, allowance));
                }
            }
            most
        });
        if !self.state.spent.final_answer
            && let Some(stop) =
                before_model_call(&self.budget, &self.state.spent, input, reserve_cost, now)
        {
            return Ok(Some(stop));
        }
        self.state.spent.model_calls += 1;
        if watch {
            self.state.spent.reserved_tokens = input.saturating_add(allowance);
        }
        if price.is_some() {
            let spent = &mut self.state.spent;
            spent.cost_micro_usd = spent
                .cost_micro_usd
                .saturating_sub(spent.reserved_micro_usd)
                .saturating_add(reserve_cost);
            spent.reserved_micro_usd = reserve_cost;
        }
        self.checkpoint().await?;
        Ok(None)
    }

    /// The budget's check on a stream: `Some` once what was reported, the request's
    /// input and the output streamed so far pass the token or cost limit.
    fn over_budget_mid_stream(
        &self,
        streamed_bytes: usize,
        price: Option<super::price::Price>,
    ) -> Option<super::budget::RunStop> {
        let spent = &self.state.spent;
        let allowance = self
            .budget
            .reserve_output_tokens
            .or(self.model.request_info().max_tokens.map(u64::from))
            .unwrap_or(super::budget::DEFAULT_RESERVED_OUTPUT_TOKENS);
        let output = super::budget::estimate_tokens(streamed_bytes);
        let max = if spent.final_answer {
            self.budget.tokens
        } else {
            self.budget.tokens_before_final()
        };
        if let Some(max) = max {
            let input = spent.reserved_tokens.saturating_sub(allowance);
            let total = spent
                .input_tokens
                .saturating_add(spent.output_tokens)
                .saturating_add(input)
                .saturating_add(output);
            if total > max {
                return Some(super::budget::RunStop::budget(
                    "tokens",
                    max as f64,
                    total as f64,
                ));
            }
        }
        if let (Some(max), Some(p)) = (self.budget.cost_usd, price) {
            // Settled calls, plus this one's input and what it streamed so far.
            let input = spent.reserved_tokens.saturating_sub(allowance);
            let settled = spent
                .cost_micro_usd
                .saturating_sub(spent.reserved_micro_usd);
            let now = settled.saturating_add(p.reserve_micro_usd(input, output)) as f64 / 1e6;
            if now > max {
                return Some(super::budget::RunStop::budget("cost_usd", max, now));
            }
        }
        None
    }

    /// One model call, with fallbacks: the `call_llm` step without its mode bookkeeping.
    /// `Some` when a budget stopped the stream.
    pub(super) async fn call_model(
        &mut self,
    ) -> Result<Option<super::budget::RunStop>, ChainError> {
        if self.state.conversation.messages.is_empty() {
            return Err(ChainError::NoMessages);
        }
        // The guards on a person's messages (which store them guarded), then your hooks,
        // may change this call's request, or stop the run.
        if self.guards.any_at(crate::guard::Point::UserMessage)
            && let Some(stop) = Box::pin(self.guard_user_messages()).await?
        {
            return Ok(Some(stop));
        }
        // Every finished answer's calls have their results (a call left without one
        // is sent an "interrupted" answer), as every provider requires.
        let orphans = super::history::orphaned(&self.state.conversation);
        let repaired = (!orphans.is_empty()).then(|| {
            self.state
                .journal
                .record_once(super::journal::Decision::Interrupted {
                    call_ids: orphans.iter().map(|(_, id, _)| id.clone()).collect(),
                });
            super::history::answered(&self.state.conversation, &orphans)
        });
        // Within the model's context window (estimated; the stored conversation keeps
        // everything).
        let window = match self.context_window {
            Some(0) => None,
            Some(w) => Some(w),
            None => super::compaction::context_window(self.model.model_name()),
        };
        let repaired = match window {
            Some(w) => {
                match super::compaction::compact(
                    repaired.as_ref().unwrap_or(&self.state.conversation),
                    w,
                ) {
                    Some((compacted, done)) => {
                        self.state
                            .journal
                            .record_once(super::journal::Decision::Compacted {
                                window: done.window,
                                estimated_before: done.before,
                                estimated_after: done.after,
                                cleared: done.cleared,
                                dropped_messages: done.dropped_messages,
                            });
                        Some(compacted)
                    }
                    None => repaired,
                }
            }
            None => repaired,
        };
        let request = match self.before_model(repaired).await {
            Ok(r) => r,
            Err(stop) => return Ok(Some(stop)),
        };
        let models: Vec<Arc<dyn ChatModel>> = std::iter::once(self.model.clone())
            .chain(self.fallbacks.iter().cloned())
            .collect();
        let attempts = models.len();
        let mut last_error = None;
        for (i, model) in models.into_iter().enumerate() {
            // Your hooks' wrap_model: the onion around this attempt (fails closed).
            let model = self
                .hooks
                .wrap_model(model)
                .map_err(|why| ChainError::Model(ModelError::Config(why)))?;
            let span = tracing::info_span!(
                "chat",
                "otel.name" = crate::telemetry::chat_span_name(model.model_name()),
                "otel.kind" = "client",
                "otel.status_code" = tracing::field::Empty,
                "gen_ai.operation.name" = "chat",
                "gen_ai.provider.name" = model.genai_provider_name(),
                "gen_ai.request.model" = model.model_name(),
                "gen_ai.request.stream" = true,
                "gen_ai.request.max_tokens" = tracing::field::Empty,
                "gen_ai.request.temperature" = tracing::field::Empty,
                "server.address" = tracing::field::Empty,
                "server.port" = tracing::field::Empty,
                "gen_ai.conversation.id" = self.telemetry.conversation_id.as_deref(),
                "gen_ai.usage.input_tokens" = tracing::field::Empty,
                "gen_ai.usage.output_tokens" = tracing::field::Empty,
                "gen_ai.usage.cache_read.input_tokens" = tracing::field::Empty,
                "gen_ai.usage.cache_creation.input_tokens" = tracing::field::Empty,
                "gen_ai.response.id" = tracing::field::Empty,
                "gen_ai.response.model" = tracing::field::Empty,
                "gen_ai.response.finish_reasons" = tracing::field::Empty,
                "error.type" = tracing::field::Empty,
                "gen_ai.input.messages" = tracing::field::Empty,
                "gen_ai.output.messages" = tracing::field::Empty,
                "gen_ai.system_instructions" = tracing::field::Empty,
                "gen_ai.tool.definitions" = tracing::field::Empty,
            );
            if !span.is_disabled() {
                crate::telemetry::request_fields(&span, &model.request_info());
            }
            // Content only on the conventions' opt-in (secrets masked even then).
            let capture = !span.is_disabled() && crate::telemetry::capture_content();
            if capture {
                // What is sent (the guards' and your hooks' request), not what is stored.
                let conversation = request.as_ref().unwrap_or(&self.state.conversation);
                span.record(
                    "gen_ai.input.messages",
                    crate::telemetry::messages_json(&conversation.messages, None),
                );
                if let Some(system) = &conversation.system {
                    span.record(
                        "gen_ai.system_instructions",
                        crate::telemetry::system_json(system),
                    );
                }
                if !conversation.tools.is_empty() {
                    span.record(
                        "gen_ai.tool.definitions",
                        crate::telemetry::tools_json(&conversation.tools),
                    );
                }
            }
            let started = std::time::Instant::now();
            let price = self
                .budget
                .cost_usd
                .and_then(|_| self.budget.price(model.model_name()));
            let streamed = self
                .stream_once(
                    model.as_ref(),
                    price,
                    request.as_ref().unwrap_or(&self.state.conversation),
                )
                .instrument(span.clone())
                .await;
            crate::telemetry::record_call(
                model.as_ref(),
                started.elapsed(),
                match &streamed {
                    Ok(o) => Ok(o.usage),
                    Err(Attempt::Cancelled(_)) => Err("cancelled"),
                    Err(Attempt::Stopped(stop, _)) if stop.kind == "hook" => Err("hook_stopped"),
                    Err(Attempt::Stopped(..)) => Err("budget_exhausted"),
                    Err(Attempt::Guarded(..)) => Err("guard_stopped"),
                    Err(Attempt::Failed(e, _)) => Err(e.error_type()),
                },
            );
            match streamed {
                Ok(mut outcome) => {
                    // The guards on the whole answer, before a span or a callback sees it.
                    let withheld = if self.guards.any_at(crate::guard::Point::ModelOutput) {
                        self.guard_answer(&mut outcome.message)
                    } else {
                        None
                    };
                    if let Some(u) = outcome.usage {
                        // Integers as the conventions type them (an OpenTelemetry
                        // layer exports a u64 as a string).
                        span.record(
                            "gen_ai.usage.input_tokens",
                            crate::telemetry::int(u.input_tokens),
                        );
                        span.record(
                            "gen_ai.usage.output_tokens",
                            crate::telemetry::int(u.output_tokens),
                        );
                        if let Some(n) = u.cache_read_tokens {
                            span.record(
                                "gen_ai.usage.cache_read.input_tokens",
                                crate::telemetry::int(n),
                            );
                        }
                        if let Some(n) = u.cache_write_tokens {
                            span.record(
                                "gen_ai.usage.cache_creation.input_tokens",
                                crate::telemetry::int(n),
                            );
                        }
                    }
                    if let Some(id) = &outcome.response_id {
                        span.record("gen_ai.response.id", id.as_str());
                    }
                    if let Some(m) = &outcome.response_model {
                        span.record("gen_ai.response.model", m.as_str());
                    }
                    if let Some(r) = &outcome.raw_stop_reason {
                        crate::telemetry::finish_reasons(&span, r);
                    }
                    if capture {
                        span.record(
                            "gen_ai.output.messages",
                            crate::telemetry::messages_json(
                                std::iter::once(&outcome.message),
                                outcome.raw_stop_reason.as_deref(),
                            ),
                        );
                    }
                    self.process_outcome(outcome, price).await?;
                    if let Some(stop) = withheld {
                        span.record("error.type", "guard_stopped");
                        span.record("otel.status_code", "error");
                        return Ok(Some(stop));
                    }
                    return self.after_model().await;
                }
                Err(Attempt::Stopped(stop, partial)) => {
                    if stop.kind == "hook" {
                        self.journal_chunk_abort(&stop);
                    }
                    span.record(
                        "error.type",
                        if stop.kind == "hook" {
                            "hook_stopped"
                        } else {
                            "budget_exhausted"
                        },
                    );
                    span.record("otel.status_code", "error");
                    self.state.spent.settle(None, price);
                    if let Some(p) = partial {
                        self.keep_partial(p).await?;
                    }
                    return Ok(Some(stop));
                }
                Err(Attempt::Guarded(guard, verdict, partial)) => {
                    span.record("error.type", "guard_stopped");
                    span.record("otel.status_code", "error");
                    self.state.spent.settle(None, price);
                    let stop = self.journal_answer_stop(&guard, &verdict);
                    if let Some(mut p) = partial {
                        super::guard_points::withhold(&mut p, &guard);
                        self.keep_partial(p).await?;
                    }
                    return Ok(Some(stop));
                }
                Err(Attempt::Cancelled(partial)) => {
                    span.record("error.type", "cancelled");
                    span.record("otel.status_code", "error");
                    Box::pin(self.push_message(partial)).await?;
                    return Err(ChainError::Cancelled);
                }
                Err(Attempt::Failed(e, partial)) => {
                    span.record("error.type", e.error_type());
                    span.record("otel.status_code", "error");
                    self.fire(|cb| cb.on_llm_error(&e));
                    let last = i + 1 == attempts;
                    if last || !e.retry_on_fallback() {
                        if let Some(p) = partial {
                            self.keep_partial(p).await?;
                        }
                        return Err(if attempts > 1 && last {
                            ChainError::AllFallbacksFailed(e)
                        } else {
                            ChainError::Model(e)
                        });
                    }
                    last_error = Some(e);
                }
            }
        }
        Err(ChainError::Model(
            last_error.unwrap_or(ModelError::Cancelled),
        ))
    }

    /// Keeps what arrived before a model call failed. The model's error stays the one
    /// returned: a partial message the store refuses (too large, a conversation that
    /// disagrees) is reported through `on_error` and the log, not in its place, unless
    /// the writer must stop (a lost lease, a cancelled run), which the caller must see.
    async fn keep_partial(&mut self, partial: Message) -> Result<(), ChainError> {
        // Boxed: a failure's path, kept out of every call's future.
        match Box::pin(self.push_message(partial)).await {
            Err(ChainError::Persist(e)) if !e.must_stop() => {
                tracing::warn!(error = %e, "the partial message of a failed model call was not stored");
                let e = ChainError::Persist(e);
                self.fire(|cb| cb.on_error(&e));
                Ok(())
            }
            other => other,
        }
    }

    /// Streams one call. A call cut off (cancelled, failed mid-stream) keeps what
    /// arrived: the model's [`ModelEvent::Partial`], the decoder's own assembly.
    async fn stream_once(
        &self,
        model: &dyn ChatModel,
        price: Option<super::price::Price>,
        request: &Conversation,
    ) -> Result<DecodeOutcome, Attempt> {
        // The stream is aborted, cut off as a cancellation is, once it passes the
        // token or cost budget: a cheap check per event, on the bytes of text and
        // arguments.
        let watch_budget = self.budget.tokens.is_some() || price.is_some();
        let mut streamed = 0usize;
        // No timeout set (the common case): the stream is read with no clock at all.
        let mut clock = self
            .budget
            .times_streams()
            .then(|| StreamClock::new(&self.budget, &self.state.spent))
            .filter(StreamClock::is_set);
        // A token of its own only when something may abort this stream (a budget, a
        // hook, a timeout): otherwise the chain's, as a plain stream needs no more.
        let check_chunks = !self.hooks.is_empty();
        // Guards on the answer: its text is held back until they pass it.
        let mut hold = self
            .guards
            .any_at(crate::guard::Point::ModelOutput)
            .then(crate::guard::HoldBack::default);
        let mut text_index = 0;
        let hide_arguments = self.guards.any_at(crate::guard::Point::ToolArguments);
        let cancel = (watch_budget || check_chunks || clock.is_some() || hold.is_some())
            .then(|| self.cancel.child_token());
        let abort = || {
            if let Some(c) = &cancel {
                c.cancel();
            }
        };
        let mut stream = model.stream_until(
            request,
            cancel.clone().unwrap_or_else(|| self.cancel.clone()),
        );
        let mut partial: Option<Message> = None;
        loop {
            let next = match clock.as_ref().and_then(|c| Some((c.deadline()?, c))) {
                None => stream.next().await,
                Some(((at, expiry), c)) => match tokio::time::timeout_at(at, stream.next()).await {
                    Ok(next) => next,
                    Err(_) => {
                        abort();
                        let m = drain_partial(&mut stream, partial).await;
                        return Err(c.expired(expiry, model, m));
                    }
                },
            };
            if let Some(clock) = &mut clock {
                clock.chunk();
            }
            match next {
                None => {
                    return Err(Attempt::Failed(
                        ModelError::StreamInterrupted {
                            provider: model.provider_name().to_owned(),
                            message: "the stream ended without a final message".into(),
                            cause: None,
                        },
                        cut_off(partial, "stream ended early"),
                    ));
                }
                Some(Err(ModelError::Cancelled)) if self.cancel.is_cancelled() => {
                    let m = cut_off(partial, "cancelled").unwrap_or_else(|| {
                        MessageDelta::default().cancel(Some("cancelled".into()))
                    });
                    return Err(Attempt::Cancelled(m));
                }
                Some(Err(e)) => {
                    let p = cut_off(partial, &e.to_string());
                    return Err(Attempt::Failed(e, p));
                }
                Some(Ok(ModelEvent::Event(ev))) => {
                    if check_chunks && let Some(stop) = self.on_chunk(&ev) {
                        abort();
                        let m = drain_partial(&mut stream, partial).await;
                        let why = format!("aborted: {stop}");
                        return Err(Attempt::Stopped(stop, cut_off(m, &why)));
                    }
                    match (&mut hold, &ev) {
                        // Guarded arguments are shown once the guards had them (the
                        // stored call), not as they stream.
                        (_, crate::provider::StreamEvent::ToolCallArguments { .. })
                            if hide_arguments => {}
                        (None, _) => self.fire(|cb| cb.on_llm_new_delta(&ev)),
                        (Some(h), crate::provider::StreamEvent::TextDelta { index, text }) => {
                            text_index = *index;
                            let released = h.push(&self.guards, text);
                            if let Err((guard, verdict)) = self.release(released, text_index) {
                                abort();
                                let m = drain_partial(&mut stream, partial).await;
                                return Err(Attempt::Guarded(guard, verdict, m));
                            }
                        }
                        (Some(h), _) => {
                            // The text waiting goes out first, in order.
                            let released = h.finish(&self.guards);
                            if let Err((guard, verdict)) = self.release(released, text_index) {
                                abort();
                                let m = drain_partial(&mut stream, partial).await;
                                return Err(Attempt::Guarded(guard, verdict, m));
                            }
                            self.fire(|cb| cb.on_llm_new_delta(&ev));
                        }
                    }
                    if watch_budget {
                        streamed += match &ev {
                            crate::provider::StreamEvent::TextDelta { text, .. }
                            | crate::provider::StreamEvent::ReasoningDelta { text, .. } => {
                                text.len()
                            }
                            crate::provider::StreamEvent::ToolCallArguments {
                                fragment, ..
                            } => fragment.len(),
                            _ => 0,
                        };
                        if let Some(stop) = self.over_budget_mid_stream(streamed, price) {
                            abort();
                            // What the decoder assembled so far, cut off.
                            let m = drain_partial(&mut stream, partial).await;
                            let why = format!("the run's {} budget is spent", stop.limit);
                            return Err(Attempt::Stopped(stop, cut_off(m, &why)));
                        }
                    }
                }
                Some(Ok(ModelEvent::Partial(m))) => partial = Some(*m),
                Some(Ok(ModelEvent::Headers(h))) => {
                    self.fire(|cb| cb.on_llm_response_headers(&h));
                }
                Some(Ok(ModelEvent::Retrying(r))) => {
                    // A new attempt: what the last one assembled is not this call's.
                    partial = None;
                    self.fire(|cb| cb.on_llm_retry(&r));
                }
                Some(Ok(ModelEvent::Done(outcome))) => {
                    if let Some(err) = &outcome.error {
                        // An error inside a 200 stream: the message is cut off.
                        let e = ModelError::Provider {
                            provider: model.provider_name().to_owned(),
                            kind: crate::model::HttpErrorKind::from_error_type(&err.kind),
                            error_type: err.kind.clone(),
                            message: err.message.clone(),
                        };
                        let mut m = outcome.message.clone();
                        m.status = MessageStatus::Cancelled;
                        m.metadata
                            .insert("streaming_error".into(), e.to_string().into());
                        return Err(Attempt::Failed(e, Some(m)));
                    }
                    if let Some(h) = &mut hold {
                        let released = h.finish(&self.guards);
                        if let Err((guard, verdict)) = self.release(released, text_index) {
                            return Err(Attempt::Guarded(guard, verdict, Some(outcome.message)));
                        }
                    }
                    return Ok(*outcome);
                }
            }
        }
    }

    async fn process_outcome(
        &mut self,
        outcome: DecodeOutcome,
        price: Option<super::price::Price>,
    ) -> Result<(), ChainError> {
        let message = outcome.message;
        let has_calls = !message.tool_calls.is_empty();
        // Stored before any callback sees it: a message the store refuses (too large
        // to keep whole) is an error, never announced as done.
        let identified = match self.store_message(message).await {
            Ok(identified) => identified,
            Err(e) => {
                if let Some(u) = &outcome.usage {
                    self.fire(|cb| cb.on_llm_token_usage(u));
                }
                return Err(e);
            }
        };
        self.state.spent.settle(outcome.usage.as_ref(), price);
        if let Some(m) = self.state.conversation.messages.last() {
            self.fire(|cb| cb.on_llm_new_message(m));
        }
        if let Some(u) = &outcome.usage {
            self.fire(|cb| cb.on_llm_token_usage(u));
        }
        self.announce_identified(&identified);
        // (With hooks, only once they accept the answer: a retry they ask for counts.)
        if !has_calls && self.hooks.is_empty() && self.state.current_failure_count != 0 {
            self.state.current_failure_count = 0;
        }
        if let Some(m) = self.state.conversation.messages.last() {
            self.fire(|cb| cb.on_message_processed(m));
        }
        self.save_state().await
    }
}

/// The timeouts of one model call: the step's, the first chunk's, the idle stream's
/// and the run's wall clock, whichever comes first.
struct StreamClock {
    started: tokio::time::Instant,
    last_chunk: Option<tokio::time::Instant>,
    step: Option<std::time::Duration>,
    first_chunk: Option<std::time::Duration>,
    idle: Option<std::time::Duration>,
    /// The run's wall-clock deadline, and its budget.
    wall: Option<(tokio::time::Instant, f64)>,
}

/// Which timeout ran out.
#[derive(Clone, Copy)]
enum Expiry {
    Step(std::time::Duration),
    FirstChunk(std::time::Duration),
    Idle(std::time::Duration),
    Wall(f64),
}

impl StreamClock {
    fn new(budget: &super::budget::Budget, spent: &super::budget::Spent) -> StreamClock {
        use super::budget::Budget;
        let started = tokio::time::Instant::now();
        let wall = budget
            .wall_seconds
            .filter(|_| spent.started_ms != 0)
            .map(|max| {
                let age = super::journal::now_ms().saturating_sub(spent.started_ms);
                let left = (max - age as f64 / 1000.0).max(0.0);
                (started + std::time::Duration::from_secs_f64(left), max)
            });
        StreamClock {
            started,
            last_chunk: None,
            step: Budget::seconds(budget.step_seconds),
            first_chunk: Budget::seconds(budget.first_chunk_seconds),
            idle: Budget::seconds(budget.idle_seconds),
            wall,
        }
    }

    /// Whether any timeout applies.
    fn is_set(&self) -> bool {
        self.step.is_some()
            || self.first_chunk.is_some()
            || self.idle.is_some()
            || self.wall.is_some()
    }

    /// The nearest deadline; `None` when no timeout applies.
    fn deadline(&self) -> Option<(tokio::time::Instant, Expiry)> {
        let mut nearest: Option<(tokio::time::Instant, Expiry)> = None;
        let mut consider = |at: tokio::time::Instant, why: Expiry| {
            if nearest.is_none_or(|(n, _)| at < n) {
                nearest = Some((at, why));
            }
        };
        if let Some(d) = self.step {
            consider(self.started + d, Expiry::Step(d));
        }
        match (self.last_chunk, self.first_chunk, self.idle) {
            (None, Some(d), _) => consider(self.started + d, Expiry::FirstChunk(d)),
            (Some(last), _, Some(d)) => consider(last + d, Expiry::Idle(d)),
            _ => {}
        }
        if let Some((at, max)) = self.wall {
            consider(at, Expiry::Wall(max));
        }
        nearest
    }

    /// A chunk arrived.
    fn chunk(&mut self) {
        if self.idle.is_some() || (self.last_chunk.is_none() && self.first_chunk.is_some()) {
            self.last_chunk = Some(tokio::time::Instant::now());
        }
    }

    /// What a run out timeout makes of the call: the wall clock stops the run (a
    /// budget), the others fail the call (a fallback may take it).
    fn expired(&self, why: Expiry, model: &dyn ChatModel, partial: Option<Message>) -> Attempt {
        let provider = model.provider_name().to_owned();
        let (after, what) = match why {
            Expiry::Wall(max) => {
                let age = self.started.elapsed().as_secs_f64();
                let stop = super::budget::RunStop::budget("wall_seconds", max, max.max(age));
                return Attempt::Stopped(
                    stop,
                    cut_off(partial, "the run's wall_seconds budget is spent"),
                );
            }
            Expiry::Step(d) => (d, "the step's time (step_seconds) ran out"),
            Expiry::FirstChunk(d) => (d, "no first chunk in time (first_chunk_seconds)"),
            Expiry::Idle(d) => (d, "the stream was idle too long (idle_seconds)"),
        };
        Attempt::Failed(
            ModelError::Timeout { provider, after },
            cut_off(partial, what),
        )
    }
}

enum Attempt {
    Cancelled(Message),
    Failed(ModelError, Option<Message>),
    /// A budget stopped the stream; what arrived, cut off.
    Stopped(super::budget::RunStop, Option<Message>),
    /// A guard held the answer back (its id, its verdict); what arrived, cut off.
    Guarded(String, crate::guard::Verdict, Option<Message>),
}

/// After a stream was cancelled by the chain: the decoder's partial message, which a
/// model sends as its last events ([`ModelEvent::Partial`]), or the one seen before.
async fn drain_partial(
    stream: &mut crate::model::ModelStream<'_>,
    seen: Option<Message>,
) -> Option<Message> {
    let mut partial = seen;
    // Bounded: a model that keeps sending after its cancellation is not waited for.
    let drain = async {
        while let Some(item) = stream.next().await {
            match item {
                Ok(ModelEvent::Partial(m)) => partial = Some(*m),
                Ok(ModelEvent::Done(outcome)) => partial = Some(outcome.message),
                Err(_) => break,
                Ok(_) => {}
            }
        }
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), drain).await;
    partial
}

/// A model's partial message as the chain keeps it: `Cancelled`, with why it was cut
/// off; `None` when nothing arrived (an empty message is not worth keeping).
fn cut_off(partial: Option<Message>, why: &str) -> Option<Message> {
    let mut m = partial?;
    if m.content.is_empty() && m.tool_calls.is_empty() {
        return None;
    }
    m.status = MessageStatus::Cancelled;
    m.metadata
        .insert("streaming_error".into(), why.to_owned().into());
    Some(m)
}

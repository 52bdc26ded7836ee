//! Hooks: code of yours in the decision stack, around model calls and tool calls.
//!
//! A [`Hook`] implements any of five points; each returns a typed verdict, never an
//! error, so control flow cannot be swallowed by a hook that catches errors (a retry
//! hook cannot turn a stop or a pause into a retry: verdicts combine by severity, not
//! by order). A hook that fails (returns `Err`), panics or overruns its time limit
//! ([`LLMChain::with_hook_timeout`](super::LLMChain::with_hook_timeout)) fails
//! *closed*: its call is not run, its answer not accepted, its run stopped.
//!
//! | point | runs | verdicts |
//! |---|---|---|
//! | [`before_model`](Hook::before_model) | before each model call, outermost first | change the request, or stop the run |
//! | [`on_chunk`](Hook::on_chunk) | on every streamed event, synchronously | pass, or abort the stream (the run stops) |
//! | [`after_model`](Hook::after_model) | on each answer, innermost first | accept, retry with feedback, or stop |
//! | [`before_tool`](Hook::before_tool) | before each call runs, outermost first | run, rewrite its arguments, answer it without running, or stop |
//! | [`after_tool`](Hook::after_tool) | on each result, innermost first | keep, rewrite, or stop |
//!
//! **The order is fixed**, whatever order hooks are registered in: by [`Layer`]
//! (outermost first: telemetry, budget, policy, guard, user, retry, timeout), then by
//! registration. The built-in layers are the chain's own: the `chat`/`execute_tool`
//! spans (telemetry), the [`Budget`](super::Budget) (checked before each model call,
//! on every chunk and before each tool call), the [policies](crate::policy) and
//! review ([`decide`](super::LLMChain) in one place), then your hooks, the model
//! clients' retries, and the tool's time limit innermost.
//!
//! **Every verdict that changes control flow is journaled** (a
//! [`Decision::Hook`](super::Decision::Hook) with the hook's id and version) before it
//! takes effect, with the step it governs; a `before_tool` verdict is replayed on
//! resume, not asked again. A hook's own state lives in the run's state
//! ([`HookCx::state`]), keyed by its id and version, so it survives a crash.

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use std::sync::Arc;

use super::budget::Spent;
use crate::conversation::Conversation;
use crate::message::{Message, ToolCall, ToolResult};
use crate::model::{ChatModel, ModelError, ModelStream, RequestInfo};
use crate::provider::StreamEvent;
use crate::tool::{Tool, ToolRun, WrapTool};

/// Where a hook sits in the stack, outermost first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// Observes everything (spans, metrics).
    Telemetry,
    /// Counts and limits.
    Budget,
    /// Decides what may run.
    Policy,
    /// Checks what goes in and out.
    Guard,
    /// Your own hooks (the default).
    User,
    /// Tries again.
    Retry,
    /// Bounds time; innermost.
    Timeout,
}

/// The future a hook point returns: its verdict, or why it failed (which fails closed).
pub type HookFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

fn ready<'a, T: Send + 'a>(v: T) -> HookFuture<'a, T> {
    Box::pin(std::future::ready(Ok(v)))
}

/// What a hook sees of the run, and its own durable state.
#[derive(Debug)]
pub struct HookCx<'a> {
    /// The hook's state in the run's state (`null` at first): saved with the step, so
    /// it survives a crash and is the same in whichever process resumes the run.
    pub state: &'a mut Value,
    /// What the run has spent so far.
    pub spent: &'a Spent,
    /// Model calls made in this run.
    pub run_count: u32,
}

/// `before_model`'s verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum ModelGate {
    /// Make the call (with the request as the hook left it).
    Continue,
    /// Do not make it: the run stops, with this reason.
    Stop {
        /// Why.
        reason: String,
    },
}

/// `on_chunk`'s verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum ChunkCheck {
    /// Go on.
    Pass,
    /// Abort the stream: what arrived is kept, cut off; its calls never run, and the
    /// run stops with this reason.
    Abort {
        /// Why.
        reason: String,
    },
}

/// `after_model`'s verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum AfterModel {
    /// Keep the answer.
    Accept,
    /// Ask again: the answer stays in the transcript (nothing received is lost), its
    /// calls are answered "not run" with the feedback, or the feedback follows it as a
    /// user message. Counts against the failure budget.
    Retry {
        /// What the model is told.
        feedback: String,
    },
    /// The run stops after this answer (its calls are answered "not run").
    Stop {
        /// Why.
        reason: String,
    },
}

/// `before_tool`'s verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum BeforeTool {
    /// Run it.
    Run,
    /// Run it with these arguments (stored in the call, the model's kept in its
    /// metadata, as a person's edit is).
    Rewrite {
        /// The arguments it runs with.
        arguments: Map<String, Value>,
    },
    /// Do not run it: this is its result.
    Answer {
        /// The result the model sees.
        result: String,
    },
    /// Do not run it, and stop the run after the batch.
    Stop {
        /// Why.
        reason: String,
    },
}

/// `after_tool`'s verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum AfterTool {
    /// Keep the result.
    Keep,
    /// The model and every UI see this instead (what ran, its text and the tool's
    /// native data, is kept in the tool message's metadata, `rewritten`, by call id).
    Rewrite {
        /// The text the model sees.
        content: String,
    },
    /// Keep the result, and stop the run after the batch.
    Stop {
        /// Why.
        reason: String,
    },
}

/// A hook in the decision stack (see the module docs). Every point has a default that
/// lets everything through; implement the ones you need.
///
/// ```
/// use llmchain::chain::{BeforeTool, Hook, HookCx, HookFuture};
/// use llmchain::message::ToolCall;
///
/// /// Refuses a tool after it ran three times in a run, counting durably.
/// struct AtMostThree;
///
/// impl Hook for AtMostThree {
///     fn id(&self) -> &str {
///         "at-most-three"
///     }
///     fn before_tool<'a>(
///         &'a self,
///         _call: &'a ToolCall,
///         cx: &'a mut HookCx<'_>,
///     ) -> HookFuture<'a, BeforeTool> {
///         Box::pin(async move {
///             let n = cx.state.as_u64().unwrap_or(0);
///             if n >= 3 {
///                 return Ok(BeforeTool::Answer { result: "Not run: three is enough.".into() });
///             }
///             *cx.state = (n + 1).into();
///             Ok(BeforeTool::Run)
///         })
///     }
/// }
/// ```
pub trait Hook: Send + Sync {
    /// A stable id: journaled with every verdict, and the key of its state.
    fn id(&self) -> &str;

    /// Its version: a hook whose state's meaning changes gets a new one (its state
    /// starts afresh).
    fn version(&self) -> u32 {
        1
    }

    /// Where it sits in the stack (default [`Layer::User`]).
    fn layer(&self) -> Layer {
        Layer::User
    }

    /// Around each model call (the primary's and each fallback's): the onion. Return
    /// `model` wrapped in your own [`ChatModel`] (a retry, a fallback to another model,
    /// a cache, a rate limit), or as it is (the default). The outermost hook's wrapper is
    /// the one the chain calls, so an outer layer sees every attempt an inner retry
    /// makes. A wrapper only streams: it cannot pause or stop the run (those are the
    /// other points' verdicts), and its errors are the call's errors. A hook that panics
    /// while wrapping or while its wrapper streams fails the call (fail closed).
    ///
    /// A wrapper that re-streams should override [`ChatModel::stream_until`] too,
    /// calling the inner model's, so a cancelled call keeps what arrived.
    fn wrap_model(&self, model: Arc<dyn ChatModel>) -> Arc<dyn ChatModel> {
        model
    }

    /// Before a model call: may change the request (this call's only; the stored
    /// conversation is not changed) or stop the run.
    fn before_model<'a>(
        &'a self,
        request: &'a mut Conversation,
        cx: &'a mut HookCx<'_>,
    ) -> HookFuture<'a, ModelGate> {
        let _ = (request, cx);
        ready(ModelGate::Continue)
    }

    /// On every streamed event: a cheap synchronous check. A panic aborts.
    fn on_chunk(&self, event: &StreamEvent) -> ChunkCheck {
        let _ = event;
        ChunkCheck::Pass
    }

    /// On the model's answer, once it is stored.
    fn after_model<'a>(
        &'a self,
        answer: &'a Message,
        cx: &'a mut HookCx<'_>,
    ) -> HookFuture<'a, AfterModel> {
        let _ = (answer, cx);
        ready(AfterModel::Accept)
    }

    /// Before a call runs (after the policies and review allowed it).
    fn before_tool<'a>(
        &'a self,
        call: &'a ToolCall,
        cx: &'a mut HookCx<'_>,
    ) -> HookFuture<'a, BeforeTool> {
        let _ = (call, cx);
        ready(BeforeTool::Run)
    }

    /// Around each call's run, once `before_tool` let it run: return `run` wrapped
    /// ([`ToolRun::new`], calling `run.run(args, ctx)` inside) or as it is (the
    /// default). The tool's timeout is innermost, inside every wrapper, and the call's
    /// `executing` status is stored before any wrapper runs. A wrapper may run `run`
    /// again (a retry) only to effect for an idempotent tool: for any other, the call has
    /// started, so a second run is answered with an error and the tool does not run
    /// again. A wrapper that panics fails the call.
    fn wrap_tool(&self, call: &ToolCall, tool: &Tool, run: ToolRun) -> ToolRun {
        let _ = (call, tool);
        run
    }

    /// On a call's result, before the model or a UI sees it.
    fn after_tool<'a>(
        &'a self,
        call: &'a ToolCall,
        result: &'a ToolResult,
        cx: &'a mut HookCx<'_>,
    ) -> HookFuture<'a, AfterTool> {
        let _ = (call, result, cx);
        ready(AfterTool::Keep)
    }
}

/// The hooks' wrapped model, its streams guarded: a panic in a wrapper ends the call
/// with an error instead of unwinding through the chain.
struct Guarded(Arc<dyn ChatModel>);

/// A stream that turns a panic while polling into the call's error.
fn unwind_safe(stream: ModelStream<'_>) -> ModelStream<'_> {
    use futures_util::StreamExt;
    Box::pin(
        std::panic::AssertUnwindSafe(stream)
            .catch_unwind()
            .map(|item| {
                item.unwrap_or_else(|_| {
                    Err(ModelError::Config(
                        "a hook's wrap_model wrapper panicked during the call".into(),
                    ))
                })
            })
            .scan(false, |done, item| {
                // Nothing after a panic.
                let out = (!*done).then_some(item);
                *done = *done || matches!(out, Some(Err(ModelError::Config(_))));
                std::future::ready(out)
            }),
    )
}

impl ChatModel for Guarded {
    fn model_name(&self) -> &str {
        self.0.model_name()
    }

    fn provider_name(&self) -> &str {
        self.0.provider_name()
    }

    fn genai_provider_name(&self) -> &str {
        self.0.genai_provider_name()
    }

    fn stream<'a>(&'a self, conversation: &'a Conversation) -> ModelStream<'a> {
        unwind_safe(self.0.stream(conversation))
    }

    fn request_info(&self) -> RequestInfo {
        self.0.request_info()
    }

    fn stream_until<'a>(
        &'a self,
        conversation: &'a Conversation,
        cancel: tokio_util::sync::CancellationToken,
    ) -> ModelStream<'a> {
        unwind_safe(self.0.stream_until(conversation, cancel))
    }
}

/// The key of a hook's state and journal entries: `id@version`.
pub(super) fn key(hook: &dyn Hook) -> String {
    format!("{}@{}", hook.id(), hook.version())
}

/// The hooks of a chain, in the stack's order.
#[derive(Clone, Default)]
pub(super) struct HookStack {
    hooks: Vec<std::sync::Arc<dyn Hook>>,
}

impl HookStack {
    /// Adds a hook in its place: after every hook of its layer or an outer one.
    pub(super) fn push(&mut self, hook: std::sync::Arc<dyn Hook>) {
        let at = self
            .hooks
            .iter()
            .position(|h| h.layer() > hook.layer())
            .unwrap_or(self.hooks.len());
        self.hooks.insert(at, hook);
    }

    pub(super) fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// `model` inside every hook's [`Hook::wrap_model`], innermost first, guarded so a
    /// wrapper's panic fails the call; `model` itself when no hook wraps it. `Err` names
    /// a hook that panicked while wrapping.
    pub(super) fn wrap_model(
        &self,
        model: Arc<dyn ChatModel>,
    ) -> Result<Arc<dyn ChatModel>, String> {
        let mut wrapped = model.clone();
        for hook in self.inside_out() {
            let inner = wrapped.clone();
            wrapped =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook.wrap_model(inner)))
                    .map_err(|_| format!("hook {} panicked in wrap_model", key(hook.as_ref())))?;
        }
        if Arc::ptr_eq(&wrapped, &model) {
            return Ok(model);
        }
        Ok(Arc::new(Guarded(wrapped)))
    }

    /// Every hook's [`Hook::wrap_tool`] around a call's run, innermost first; `None`
    /// without hooks.
    pub(super) fn wrap_tool(&self) -> Option<WrapTool> {
        if self.hooks.is_empty() {
            return None;
        }
        let stack = self.clone();
        Some(Arc::new(
            move |call: &ToolCall, tool: &Tool, run: ToolRun| {
                stack
                    .inside_out()
                    .fold(run, |run, hook| hook.wrap_tool(call, tool, run))
            },
        ))
    }

    /// Outermost first.
    pub(super) fn outside_in(&self) -> impl Iterator<Item = &std::sync::Arc<dyn Hook>> {
        self.hooks.iter()
    }

    /// Innermost first.
    pub(super) fn inside_out(&self) -> impl Iterator<Item = &std::sync::Arc<dyn Hook>> {
        self.hooks.iter().rev()
    }
}

/// Runs one hook point with its time limit; a panic, an error or an overrun is
/// `Err` with what happened.
pub(super) async fn guarded<T>(
    hook: &dyn Hook,
    limit: std::time::Duration,
    fut: HookFuture<'_, T>,
) -> Result<T, String> {
    use futures_util::FutureExt;
    let id = hook.id().to_owned();
    match tokio::time::timeout(limit, std::panic::AssertUnwindSafe(fut).catch_unwind()).await {
        Ok(Ok(Ok(v))) => Ok(v),
        Ok(Ok(Err(e))) => Err(format!("the hook {id} failed: {e}")),
        Ok(Err(_)) => Err(format!("the hook {id} panicked")),
        Err(_) => Err(format!("the hook {id} did not decide within {limit:?}")),
    }
}

/// The strictest of two `after_model` verdicts: stop > retry > accept (the first of
/// equals).
pub(super) fn stricter_after_model(a: AfterModel, b: AfterModel) -> AfterModel {
    fn rank(v: &AfterModel) -> u8 {
        match v {
            AfterModel::Accept => 0,
            AfterModel::Retry { .. } => 1,
            AfterModel::Stop { .. } => 2,
        }
    }
    if rank(&b) > rank(&a) { b } else { a }
}

/// The strictest of two `after_tool` verdicts: stop > rewrite > keep (a stop keeps
/// the first rewrite's text).
pub(super) fn stricter_after_tool(a: AfterTool, b: AfterTool) -> AfterTool {
    fn rank(v: &AfterTool) -> u8 {
        match v {
            AfterTool::Keep => 0,
            AfterTool::Rewrite { .. } => 1,
            AfterTool::Stop { .. } => 2,
        }
    }
    if rank(&b) > rank(&a) { b } else { a }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::Arc;

    const LAYERS: [Layer; 7] = [
        Layer::Telemetry,
        Layer::Budget,
        Layer::Policy,
        Layer::Guard,
        Layer::User,
        Layer::Retry,
        Layer::Timeout,
    ];

    struct Probe {
        id: String,
        layer: Layer,
    }

    impl Hook for Probe {
        fn id(&self) -> &str {
            &self.id
        }
        fn layer(&self) -> Layer {
            self.layer
        }
    }

    proptest! {
        /// Hooks registered in any order sit in the documented order: by layer,
        /// outermost first, then by registration.
        #[test]
        fn hooks_sit_in_the_documented_order(layers in proptest::collection::vec(0usize..7, 0..20)) {
            let mut stack = HookStack::default();
            for (i, l) in layers.iter().enumerate() {
                stack.push(Arc::new(Probe { id: format!("h{i}"), layer: LAYERS[*l] }));
            }
            let got: Vec<(Layer, usize)> = stack
                .outside_in()
                .map(|h| (h.layer(), h.id()[1..].parse().unwrap()))
                .collect();
            let mut want: Vec<(Layer, usize)> =
                layers.iter().enumerate().map(|(i, l)| (LAYERS[*l], i)).collect();
            want.sort();
            prop_assert_eq!(&got, &want);
            let back: Vec<_> = stack.inside_out().map(|h| h.id().to_owned()).collect();
            let mut fwd: Vec<_> = stack.outside_in().map(|h| h.id().to_owned()).collect();
            fwd.reverse();
            prop_assert_eq!(back, fwd);
        }

        /// Verdicts combine by severity, whatever order they come in: a retry never
        /// swallows a stop.
        #[test]
        fn a_retry_never_swallows_a_stop(verdicts in proptest::collection::vec(0u8..3, 1..12)) {
            let make = |v: u8| match v {
                0 => AfterModel::Accept,
                1 => AfterModel::Retry { feedback: "again".into() },
                _ => AfterModel::Stop { reason: "stop".into() },
            };
            let combined = verdicts.iter().map(|v| make(*v)).fold(AfterModel::Accept, stricter_after_model);
            let worst = *verdicts.iter().max().unwrap();
            prop_assert_eq!(combined, make(worst));
            let tools = verdicts
                .iter()
                .map(|v| match v {
                    0 => AfterTool::Keep,
                    1 => AfterTool::Rewrite { content: "x".into() },
                    _ => AfterTool::Stop { reason: "stop".into() },
                })
                .fold(AfterTool::Keep, stricter_after_tool);
            prop_assert_eq!(matches!(tools, AfterTool::Stop { .. }), worst == 2);
        }
    }

    struct Failing(u8);

    impl Hook for Failing {
        fn id(&self) -> &str {
            "failing"
        }
        fn before_tool<'a>(
            &'a self,
            _call: &'a ToolCall,
            _cx: &'a mut HookCx<'_>,
        ) -> HookFuture<'a, BeforeTool> {
            let how = self.0;
            Box::pin(async move {
                match how {
                    0 => panic!("boom"),
                    1 => Err("no database".into()),
                    _ => {
                        tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
                        Ok(BeforeTool::Run)
                    }
                }
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_panicking_or_slow_hook_is_an_error_the_stack_fails_closed_on() {
        let call = ToolCall::default();
        let mut state = Value::Null;
        let spent = Spent::default();
        for (how, want) in [
            (0, "panicked"),
            (1, "failed: no database"),
            (2, "did not decide"),
        ] {
            let hook = Failing(how);
            let mut cx = HookCx {
                state: &mut state,
                spent: &spent,
                run_count: 0,
            };
            let r = guarded(
                &hook,
                std::time::Duration::from_secs(5),
                hook.before_tool(&call, &mut cx),
            )
            .await;
            let e = r.unwrap_err();
            assert!(e.contains(want), "{e}");
        }
    }
}

//! [`ToolExecutor`]: runs a batch of tool calls concurrently, within limits, and
//! returns the results in call order.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::args::suggest;
use super::context::{CustomContext, ToolContext};
use super::definition::Tool;
use super::error::ToolError;
use crate::conversation::ToolDefinition;
use crate::message::{Arguments, ExecutionStatus, ToolCall, ToolException, ToolResult};

/// The default global limit of calls running at once in one executor.
pub const DEFAULT_MAX_CONCURRENCY: usize = 64;

/// The default cap on the content of one tool result: 1 MiB. See
/// [`ToolExecutor::with_max_result_bytes`].
pub const DEFAULT_MAX_RESULT_BYTES: usize = 1 << 20;

/// A boxed future returned by [`ExecutionObserver`] methods.
pub type ObserverFuture<'a, T = ()> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Sees every `execution_status` transition of every call, so the chain can persist
/// it. The executor awaits each method before going on: when `on_start` returns `Ok`,
/// the `executing` state is durable and the body runs; when it returns `Err`, the body
/// does **not** run (at-most-once: a start that was not recorded never happens).
///
/// Both methods default to doing nothing.
pub trait ExecutionObserver: Send + Sync {
    /// The call is now `executing`; its body runs next, if this returns `Ok`. An `Err`
    /// (why the start could not be recorded) keeps the body from running: the call goes
    /// back to `identified` and its result is an error saying it was not run.
    fn on_start<'a>(&'a self, call: &'a ToolCall) -> ObserverFuture<'a, Result<(), String>> {
        let _ = call;
        Box::pin(async { Ok(()) })
    }

    /// The call is now `completed` or `failed` (see [`ToolCall::execution_status`]),
    /// with this result. Also called for calls that never started (unknown tool,
    /// incomplete arguments), which go straight from `identified` to `failed`.
    fn on_finish<'a>(&'a self, call: &'a ToolCall, result: &'a ToolResult) -> ObserverFuture<'a> {
        let _ = (call, result);
        Box::pin(async {})
    }
}

type ExceptionHook = dyn Fn(&ToolCall, &ToolException) + Send + Sync;

/// Runs batches of tool calls.
///
/// * Calls run concurrently, up to [`with_max_concurrency`](Self::with_max_concurrency)
///   at once (default [`DEFAULT_MAX_CONCURRENCY`]) and up to each tool's own
///   [`max_concurrency`](super::ToolBuilder::max_concurrency).
/// * Results come back **in call order**, one per call, whatever finished first.
/// * Each call's `execution_status` moves `identified → executing → completed | failed`
///   (a result with `is_error` is `failed`; an interrupt is `completed`). A call that
///   cannot start goes `identified → failed`. Every step is reported to the
///   [`ExecutionObserver`].
/// * An incomplete call (still streaming, invalid JSON) and a call to an unknown tool
///   never run: each gives a refusal that says why (and, for an unknown tool, names
///   the available ones with a suggestion).
/// * A caught panic is passed to the `on_tool_execution_exception` hook.
/// * A result whose content is larger than
///   [`with_max_result_bytes`](Self::with_max_result_bytes) (default
///   [`DEFAULT_MAX_RESULT_BYTES`]) is replaced by an error result that names the tool,
///   the size and the limit; nothing is truncated silently.
///
/// Bodies run on the caller's task (no `tokio::spawn`): dropping the future returned
/// by [`execute`](Self::execute) drops every running body. Put CPU-heavy work in
/// `spawn_blocking` inside the body.
///
/// ```
/// use llmchain::message::ToolCall;
/// use llmchain::tool::{Tool, ToolExecutor};
/// use serde_json::json;
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let add = Tool::builder("add")
///     .schema(json!({"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}))
///     .handler(|args, _| async move {
///         let sum = args["a"].as_f64().unwrap_or(0.0) + args["b"].as_f64().unwrap_or(0.0);
///         sum.to_string()
///     })
///     .build()
///     .unwrap();
/// let executor = ToolExecutor::new([add]).unwrap();
/// let mut calls = vec![
///     ToolCall::function("c1", "add", json!({"a": 1, "b": 2})).unwrap(),
///     ToolCall::function("c2", "sub", json!({})).unwrap(),
/// ];
/// let results = executor.execute(&mut calls).await;
/// assert_eq!(results[0].content_text(), "3");
/// assert!(results[1].is_refusal());
/// assert_eq!(calls[0].execution_status(), "completed");
/// assert_eq!(calls[1].execution_status(), "failed");
/// # });
/// ```
#[derive(Clone)]
pub struct ToolExecutor {
    tools: Vec<Tool>,
    by_name: HashMap<String, usize>,
    global: Arc<Semaphore>,
    max_concurrency: usize,
    max_result_bytes: usize,
    default_timeout: Option<std::time::Duration>,
    custom: Option<CustomContext>,
    observer: Option<Arc<dyn ExecutionObserver>>,
    on_exception: Option<Arc<ExceptionHook>>,
    approved: std::collections::HashSet<String>,
    wrap_tool: Option<super::WrapTool>,
    span_result: Option<SpanText>,
}

/// What an `execute_tool` span records of a result (with the content opt-in): the text
/// as it will be shown, for a chain whose guards rewrite results after the run.
pub type SpanText = Arc<dyn Fn(&str) -> String + Send + Sync>;

/// Runs `call` inside the layers of `wrap`. A layer that panics (while wrapping, or
/// while its run goes on) fails the call with an error: the stack fails closed.
async fn wrapped(
    wrap: &super::WrapTool,
    call: &ToolCall,
    tool: &Tool,
    args: Value,
    ctx: ToolContext,
) -> ToolResult {
    use futures_util::FutureExt;
    use std::panic::AssertUnwindSafe;
    let id = ctx.tool_call_id().to_owned();
    let name = tool.name().to_owned();
    let inner = super::ToolRun::of_tool(call, tool.clone());
    let Ok(run) = std::panic::catch_unwind(AssertUnwindSafe(|| wrap(call, tool, inner))) else {
        return ToolResult::error(
            &id,
            format!("Tool call to {name} was not run: a hook's wrap_tool panicked."),
        )
        .with_name(&name);
    };
    match AssertUnwindSafe(run.run(args, ctx)).catch_unwind().await {
        Ok(result) => result,
        Err(_) => ToolResult::error(
            &id,
            format!(
                "Tool call to {name} failed: a hook's wrap_tool panicked during the call; the \
                 tool may have run."
            ),
        )
        .with_name(&name),
    }
}

impl fmt::Debug for ToolExecutor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolExecutor")
            .field("tools", &self.tools)
            .field("max_concurrency", &self.max_concurrency)
            .field("max_result_bytes", &self.max_result_bytes)
            .field("custom", &self.custom.is_some())
            .field("observer", &self.observer.is_some())
            .field("on_exception", &self.on_exception.is_some())
            .finish()
    }
}

impl ToolExecutor {
    /// An executor for `tools` (names must be unique).
    pub fn new(tools: impl IntoIterator<Item = Tool>) -> Result<Self, ToolError> {
        let tools: Vec<Tool> = tools.into_iter().collect();
        let mut by_name = HashMap::with_capacity(tools.len());
        for (i, t) in tools.iter().enumerate() {
            if by_name.insert(t.name().to_owned(), i).is_some() {
                return Err(ToolError::DuplicateTool {
                    name: t.name().to_owned(),
                });
            }
        }
        Ok(ToolExecutor {
            tools,
            by_name,
            global: Arc::new(Semaphore::new(DEFAULT_MAX_CONCURRENCY)),
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
            default_timeout: None,
            custom: None,
            observer: None,
            on_exception: None,
            approved: Default::default(),
            wrap_tool: None,
            span_result: None,
        })
    }

    /// The calls (by id) a person approved: their tools see
    /// [`ToolContext::human_approved`](crate::tool::ToolContext::human_approved). Given
    /// by whoever holds the person's decisions (the chain, from the review inbox); never
    /// read from a call's stored metadata.
    #[must_use]
    pub fn with_human_approved(mut self, ids: impl IntoIterator<Item = String>) -> Self {
        self.approved = ids.into_iter().collect();
        self
    }

    /// Sets the global limit of calls running at once (at least 1).
    pub fn with_max_concurrency(mut self, n: usize) -> Result<Self, ToolError> {
        if n == 0 {
            return Err(ToolError::ZeroConcurrency {
                name: "executor".to_owned(),
            });
        }
        let n = n.min(Semaphore::MAX_PERMITS);
        self.global = Arc::new(Semaphore::new(n));
        self.max_concurrency = n;
        Ok(self)
    }

    /// The time limit of a call whose tool sets none of its own (the tool's wins).
    #[must_use]
    pub fn with_default_timeout(mut self, limit: Option<std::time::Duration>) -> Self {
        self.default_timeout = limit;
        self
    }

    /// Sets the cap on the content of one tool result, in bytes (default
    /// [`DEFAULT_MAX_RESULT_BYTES`]). Content is measured as the sum of its parts'
    /// `content` lengths in bytes: UTF-8 text, and base64 data or a URL for images and
    /// files. A result over the cap becomes an error result (`is_error`, not an
    /// exception nor a refusal) that names the tool, the size and the limit, so the
    /// model can ask for less; its content, native data and any message expansion are
    /// dropped. Use `usize::MAX` for no cap.
    #[must_use]
    pub fn with_max_result_bytes(mut self, n: usize) -> Self {
        self.max_result_bytes = n;
        self
    }

    /// Sets the application's custom context, which every body can read with
    /// [`ToolContext::custom`].
    #[must_use]
    pub fn with_context<T: std::any::Any + Send + Sync>(mut self, value: T) -> Self {
        self.custom = Some(Arc::new(value));
        self
    }

    /// Sets an already shared custom context.
    #[must_use]
    pub fn with_context_arc(mut self, custom: Option<CustomContext>) -> Self {
        self.custom = custom;
        self
    }

    /// Wraps every call's run (see [`ToolRun`](super::ToolRun)): the layers a chain's
    /// hooks put around a call, inside its `executing` status and outside the tool's
    /// timeout. A wrapper that panics fails the call with an error result.
    #[must_use]
    pub fn with_wrap_tool(mut self, wrap: super::WrapTool) -> Self {
        self.wrap_tool = Some(wrap);
        self
    }

    /// What the `execute_tool` span records of a result, with the content opt-in: the
    /// text `f` makes of it (a chain's guards: what they hold back never reaches a span).
    #[must_use]
    pub fn with_span_result(mut self, f: SpanText) -> Self {
        self.span_result = Some(f);
        self
    }

    /// Sets the observer of `execution_status` transitions.
    #[must_use]
    pub fn with_observer(mut self, observer: Arc<dyn ExecutionObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Sets the `on_tool_execution_exception` hook: called with the call and the caught
    /// panic (message, location, backtrace) for every result that is an exception.
    #[must_use]
    pub fn on_tool_execution_exception(
        mut self,
        hook: impl Fn(&ToolCall, &ToolException) + Send + Sync + 'static,
    ) -> Self {
        self.on_exception = Some(Arc::new(hook));
        self
    }

    /// The tools, in the order given.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// The tool named `name`.
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.by_name.get(name).map(|&i| &self.tools[i])
    }

    /// The declarations to send to a model.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.tools.iter().map(Tool::definition).collect()
    }

    /// The display text for a call to `name`: the tool's, or the humanized name for
    /// an unknown tool (reference §1.7).
    pub fn display_text_for(&self, name: &str) -> String {
        match self.tool(name) {
            Some(t) => t.display_text().to_owned(),
            None => super::name::humanize_tool_name(name),
        }
    }

    /// Runs `calls` and returns one result per call, in call order. Updates each
    /// call's `execution_status`.
    pub async fn execute(&self, calls: &mut [ToolCall]) -> Vec<ToolResult> {
        self.execute_with_cancel(calls, &CancellationToken::new())
            .await
    }

    /// [`execute`](Self::execute), stopping every unfinished body when `cancel` is
    /// cancelled (each gets an error result saying it was cancelled). Each body's
    /// [`ToolContext`] token is a child of `cancel`.
    pub async fn execute_with_cancel(
        &self,
        calls: &mut [ToolCall],
        cancel: &CancellationToken,
    ) -> Vec<ToolResult> {
        let n = calls.len();
        let mut running: FuturesUnordered<_> = calls
            .iter_mut()
            .enumerate()
            .map(|(i, call)| async move { (i, self.run_call(call, cancel).await) })
            .collect();
        let mut slots: Vec<Option<ToolResult>> = Vec::with_capacity(n);
        slots.resize_with(n, || None);
        while let Some((i, r)) = running.next().await {
            slots[i] = Some(r);
        }
        // Every index was filled exactly once above.
        slots.into_iter().flatten().collect()
    }

    async fn run_call(&self, call: &mut ToolCall, cancel: &CancellationToken) -> ToolResult {
        let id = call.call_id.clone().unwrap_or_default();
        let name = call.name.clone().unwrap_or_default();

        if !call.is_complete() {
            let why = match call.clone().complete() {
                Err(e) => e.to_string(),
                Ok(_) => "the call was not finished".to_owned(),
            };
            let shown = if name.is_empty() { "(unnamed)" } else { &name };
            let r = ToolResult::refusal(
                &id,
                format!(
                    "Tool call to {shown} was not run: its arguments are invalid or incomplete ({why}). \
                     Call the tool again with its arguments as one complete JSON object."
                ),
            );
            return self.finish_unstarted(call, r, &name).await;
        }

        let Some(tool) = self.tool(&name) else {
            let r = ToolResult::refusal(&id, self.unknown_tool_text(&name));
            return self.finish_unstarted(call, r, &name).await;
        };

        // Per-tool permit first, so a call waiting for its tool does not hold a global slot.
        // The semaphores are never closed, so acquire cannot fail; if it ever did we run
        // without the permit rather than drop the call.
        let _tool_permit = match tool.permits() {
            Some(s) => s.acquire().await.ok(),
            None => None,
        };
        let _global_permit = self.global.acquire().await.ok();

        call.set_execution_status(ExecutionStatus::Executing);
        if let Some(o) = &self.observer
            && let Err(why) = o.on_start(call).await
        {
            // Not recorded as started, so not started: the call stays `identified`
            // (nothing else is reported to the observer, whose store could not be
            // written anyway).
            call.set_execution_status(ExecutionStatus::Identified);
            return ToolResult::error(
                &id,
                format!(
                    "Tool call to {name} was not run: its start could not be recorded ({why})."
                ),
            )
            .with_name(&name);
        }

        let args = match &call.arguments {
            Some(Arguments::Object(m)) => Value::Object(m.clone()),
            // A complete call always holds an object; fall back to parsing just in case.
            Some(a @ Arguments::Raw(_)) => a.parse().map(Value::Object).unwrap_or(Value::Null),
            None => Value::Null,
        };
        let approved = self.approved.contains(&id);
        let ctx = ToolContext::new(id)
            .with_custom_arc(self.custom.clone())
            .with_cancellation(cancel.child_token())
            .with_human_approval(approved)
            .with_default_timeout(self.default_timeout);
        // One span per call, with the OpenTelemetry GenAI semantic-convention names.
        let span = tracing::info_span!(
            "execute_tool",
            "otel.name" = crate::telemetry::tool_span_name(&name),
            "otel.kind" = "internal",
            "otel.status_code" = tracing::field::Empty,
            "gen_ai.operation.name" = "execute_tool",
            "gen_ai.tool.name" = name.as_str(),
            "gen_ai.tool.call.id" = ctx.tool_call_id(),
            "gen_ai.tool.type" = "function",
            "error.type" = tracing::field::Empty,
            "gen_ai.tool.call.arguments" = tracing::field::Empty,
            "gen_ai.tool.call.result" = tracing::field::Empty,
            // The policy rule that allowed it, when one did.
            "llmchain.policy.rule" = call
                .metadata
                .get("policy_rule")
                .and_then(serde_json::Value::as_str),
        );
        // Content only on the conventions' opt-in (secrets masked even then).
        let capture = !span.is_disabled() && crate::telemetry::capture_content();
        if capture {
            span.record(
                "gen_ai.tool.call.arguments",
                crate::secrets::masked(args.to_string()),
            );
        }
        let result = {
            use tracing::Instrument;
            match &self.wrap_tool {
                None => tool.execute(args, ctx).instrument(span.clone()).await,
                Some(wrap) => {
                    wrapped(wrap, call, tool, args, ctx)
                        .instrument(span.clone())
                        .await
                }
            }
        };
        let result = self.bounded(result, &name);
        if capture {
            let text = result.content_text();
            let text = match &self.span_result {
                Some(f) => f(&text),
                None => text,
            };
            span.record("gen_ai.tool.call.result", crate::secrets::masked(text));
        }
        if result.is_exception() {
            span.record("error.type", "exception");
            span.record("otel.status_code", "error");
        } else if result.is_error() {
            span.record("error.type", "tool_error");
            span.record("otel.status_code", "error");
        }

        if let (Some(hook), Some(e)) = (&self.on_exception, result.exception_info()) {
            hook(call, e);
        }
        self.finish(call, result).await
    }

    async fn finish_unstarted(&self, call: &mut ToolCall, r: ToolResult, name: &str) -> ToolResult {
        let r = if name.is_empty() {
            r
        } else {
            r.with_name(name)
                .with_display_text(self.display_text_for(name))
        };
        self.finish(call, r).await
    }

    async fn finish(&self, call: &mut ToolCall, result: ToolResult) -> ToolResult {
        call.set_execution_status(if result.is_error() {
            ExecutionStatus::Failed
        } else {
            ExecutionStatus::Completed
        });
        if let Some(o) = &self.observer {
            o.on_finish(call, &result).await;
        }
        result
    }

    /// `result`, or an error result in its place when its content is over the cap.
    /// A caught panic is left as it is: its text is the library's, and the exception
    /// must reach the hook.
    fn bounded(&self, result: ToolResult, name: &str) -> ToolResult {
        let size: usize = result.content.iter().map(|p| p.content.len()).sum();
        if size <= self.max_result_bytes || result.is_exception() {
            return result;
        }
        let mut r = ToolResult::error(
            result.tool_call_id,
            oversized_result_text(name, size, self.max_result_bytes),
        );
        r.name = result.name;
        r.display_text = result.display_text;
        r
    }

    fn unknown_tool_text(&self, name: &str) -> String {
        let shown = super::name::shown_name(name);
        let mut s = format!("Tool call made to {shown} but tool not found.");
        if let Some(best) = suggest(name, self.tools.iter().map(Tool::name)) {
            s.push_str(&format!(" Did you mean \"{best}\"?"));
        }
        if self.tools.is_empty() {
            s.push_str(" No tools are available.");
        } else {
            let names: Vec<&str> = self.tools.iter().map(Tool::name).collect();
            s.push_str(&format!(" Available tools: {}.", names.join(", ")));
        }
        s
    }
}

/// The error text that replaces a result over the size cap.
pub(crate) fn oversized_result_text(name: &str, size: usize, limit: usize) -> String {
    let name = super::name::shown_name(name);
    format!(
        "Tool {name} returned {size} bytes of content, more than the limit of {limit} bytes; \
         the output was discarded. Call the tool again in a way that returns less \
         (a narrower query, fewer fields or a page of results)."
    )
}

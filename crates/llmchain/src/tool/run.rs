//! [`ToolRun`]: one call's run as the layers around it see it (a chain's hooks'
//! `wrap_tool`). Calling it runs what is inside: the inner layers, then the tool, whose
//! timeout is innermost.
//!
//! The innermost run keeps the at-most-once promise whatever the layers do: the call
//! counts as started (its `executing` status is stored before any layer runs), so a
//! second run of it, a retry by some layer, runs the tool again only when the tool is
//! idempotent, and is otherwise answered with an error without running anything.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::Value;

use super::{Tool, ToolContext};
use crate::message::{ToolCall, ToolResult};

/// What a [`ToolRun`] returns.
pub type ToolRunFuture = Pin<Box<dyn Future<Output = ToolResult> + Send>>;

/// One call's run: a layer calls [`ToolRun::run`] to run what is inside it (see the
/// module docs). Cloning shares it.
#[derive(Clone)]
pub struct ToolRun {
    run: Arc<dyn Fn(Value, ToolContext) -> ToolRunFuture + Send + Sync>,
}

impl std::fmt::Debug for ToolRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ToolRun")
    }
}

impl ToolRun {
    /// A run from a function: what a layer returns, usually calling the run it wraps.
    ///
    /// ```
    /// use llmchain::tool::ToolRun;
    /// fn logged(inner: ToolRun) -> ToolRun {
    ///     ToolRun::new(move |args, ctx| {
    ///         let inner = inner.clone();
    ///         Box::pin(async move {
    ///             let result = inner.run(args, ctx).await;
    ///             eprintln!("ran: error = {}", result.is_error());
    ///             result
    ///         })
    ///     })
    /// }
    /// ```
    pub fn new(run: impl Fn(Value, ToolContext) -> ToolRunFuture + Send + Sync + 'static) -> Self {
        ToolRun { run: Arc::new(run) }
    }

    /// Runs what is inside with these arguments and context.
    pub fn run(&self, arguments: Value, ctx: ToolContext) -> ToolRunFuture {
        (self.run)(arguments, ctx)
    }

    /// The innermost run of `call`: `tool` itself ([`Tool::execute`], its timeout
    /// included), at most once unless the tool is idempotent.
    pub(crate) fn of_tool(call: &ToolCall, tool: Tool) -> Self {
        let runs = Arc::new(AtomicU32::new(0));
        let name = call.name.clone().unwrap_or_default();
        ToolRun::new(move |args, ctx| {
            let tool = tool.clone();
            let again = runs.fetch_add(1, Ordering::SeqCst) > 0;
            let name = name.clone();
            Box::pin(async move {
                if again && !tool.idempotent() {
                    return ToolResult::error(
                        ctx.tool_call_id(),
                        format!(
                            "Tool {name} was not run again: it is not idempotent and this call \
                             has already started."
                        ),
                    )
                    .with_name(&name);
                }
                tool.execute(args, ctx).await
            })
        })
    }
}

/// What wraps every call's run (a chain's hooks): given the call, its tool and the run
/// inside, the run to use.
pub type WrapTool = Arc<dyn Fn(&ToolCall, &Tool, ToolRun) -> ToolRun + Send + Sync>;

//! [`Tool`]: a named, described, schema-checked async function, and the three ways to
//! define one ([`ToolBuilder`] with a closure, [`ToolHandler`] impls, and `#[tool]`).

use std::fmt;
use std::future::Future;
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{Either, select};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use tokio::sync::Semaphore;

use super::args::{accepted_names, check_required, check_schema, json_type, required_names};
use super::context::ToolContext;
use super::error::ToolError;
use super::name::{humanize_tool_name, validate_name};
use super::output::ToolOutput;
use super::panic::{CatchPanic, catch, exception_text, install_hook};
use crate::conversation::{ToolDefinition, empty_object_schema};
use crate::message::ToolResult;

/// A boxed, sendable future of a tool body.
pub type BoxToolFuture = Pin<Box<dyn Future<Output = ToolOutput> + Send + 'static>>;

/// The body of a tool, as a trait: implement it on your own type and pass it to
/// [`ToolBuilder::handler_impl`].
///
/// ```
/// use llmchain::tool::{Tool, ToolContext, ToolHandler, ToolOutput};
/// use serde_json::{Map, Value};
///
/// struct Echo;
/// impl ToolHandler for Echo {
///     async fn call(&self, args: Map<String, Value>, _ctx: ToolContext) -> ToolOutput {
///         Value::Object(args).to_string().into()
///     }
/// }
/// let tool = Tool::builder("echo").description("Echoes its arguments.").handler_impl(Echo).build().unwrap();
/// assert_eq!(tool.name(), "echo");
/// ```
pub trait ToolHandler: Send + Sync + 'static {
    /// Runs the tool on checked arguments.
    fn call(
        &self,
        args: Map<String, Value>,
        ctx: ToolContext,
    ) -> impl Future<Output = ToolOutput> + Send;
}

/// The object-safe form of a handler (what [`Tool`] stores).
trait DynHandler: Send + Sync + 'static {
    fn call_boxed(&self, args: Map<String, Value>, ctx: ToolContext) -> BoxToolFuture;
}

struct FromImpl<H>(Arc<H>);

impl<H: ToolHandler> DynHandler for FromImpl<H> {
    fn call_boxed(&self, args: Map<String, Value>, ctx: ToolContext) -> BoxToolFuture {
        let h = Arc::clone(&self.0);
        Box::pin(async move { h.call(args, ctx).await })
    }
}

struct FromFn<F>(F);

impl<F, Fut, R> DynHandler for FromFn<F>
where
    F: Fn(Map<String, Value>, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = R> + Send + 'static,
    R: Into<ToolOutput>,
{
    fn call_boxed(&self, args: Map<String, Value>, ctx: ToolContext) -> BoxToolFuture {
        let fut = (self.0)(args, ctx);
        Box::pin(async move { fut.await.into() })
    }
}

type ParseArgsFn = dyn Fn(Map<String, Value>) -> Result<Map<String, Value>, String> + Send + Sync;

/// A tool: name, description, display text, JSON Schema parameters, options, limits
/// and an async body. Cheap to clone (shared).
///
/// Build one with [`Tool::builder`], or with `#[llmchain::tool]` on an async fn.
///
/// ```
/// use llmchain::tool::{Tool, ToolContext};
/// use serde_json::json;
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let tool = Tool::builder("get_weather")
///     .description("Current weather in a city.")
///     .schema(json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}))
///     .handler(|args, _ctx| async move {
///         let city = args["city"].as_str().unwrap_or_default().to_owned();
///         Ok::<_, String>(format!("18C in {city}"))
///     })
///     .build()
///     .unwrap();
///
/// let r = tool.execute(json!({"city": "Paris"}), ToolContext::new("call_1")).await;
/// assert_eq!(r.content_text(), "18C in Paris");
/// assert_eq!(r.display_text.as_deref(), Some("Get weather"));
///
/// let r = tool.execute(json!({"town": "Paris"}), ToolContext::new("call_2")).await;
/// assert!(r.is_refusal());
/// # });
/// ```
#[derive(Clone)]
pub struct Tool {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    description: String,
    display_text: String,
    schema: Value,
    strict: bool,
    options: Map<String, Value>,
    timeout: Option<Duration>,
    max_concurrency: Option<NonZeroUsize>,
    permits: Option<Semaphore>,
    idempotent: bool,
    read_only: Option<bool>,
    destructive: Option<bool>,
    open_world: Option<bool>,
    policy_name: Option<String>,
    parse_args: Option<Box<ParseArgsFn>>,
    handler: Box<dyn DynHandler>,
    validator: jsonschema::Validator,
    required: Vec<String>,
    accepted: Vec<String>,
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.inner.name)
            .field("description", &self.inner.description)
            .field("display_text", &self.inner.display_text)
            .field("schema", &self.inner.schema)
            .field("strict", &self.inner.strict)
            .field("timeout", &self.inner.timeout)
            .field("max_concurrency", &self.inner.max_concurrency)
            .field("idempotent", &self.inner.idempotent)
            .field("read_only", &self.inner.read_only)
            .field("destructive", &self.inner.destructive)
            .field("parse_args", &self.inner.parse_args.is_some())
            .finish_non_exhaustive()
    }
}

/// Why a body did not produce an output.
enum Ended {
    Done(Result<ToolOutput, crate::message::ToolException>),
    TimedOut(Duration),
    Cancelled,
}

impl Tool {
    /// Starts a tool definition.
    pub fn builder(name: impl Into<String>) -> ToolBuilder {
        ToolBuilder {
            name: name.into(),
            description: String::new(),
            display_text: None,
            schema: None,
            strict: false,
            options: Map::new(),
            timeout: None,
            max_concurrency: None,
            idempotent: false,
            read_only: None,
            destructive: None,
            open_world: None,
            policy_name: None,
            parse_args: None,
            handler: None,
        }
    }

    /// The name (`[a-zA-Z0-9_-]{1,64}`).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The description for the model.
    pub fn description(&self) -> &str {
        &self.inner.description
    }

    /// The UI text: the one given, or the humanized name.
    pub fn display_text(&self) -> &str {
        &self.inner.display_text
    }

    /// The JSON Schema of the arguments object.
    pub fn parameters_schema(&self) -> &Value {
        &self.inner.schema
    }

    /// Whether providers are asked for strict schema adherence.
    pub fn strict(&self) -> bool {
        self.inner.strict
    }

    /// Provider options, e.g. `cache_control`.
    pub fn options(&self) -> &Map<String, Value> {
        &self.inner.options
    }

    /// The time limit of one call, if any.
    pub fn timeout(&self) -> Option<Duration> {
        self.inner.timeout
    }

    /// How many calls of this tool may run at once (across every batch), if limited.
    pub fn max_concurrency(&self) -> Option<NonZeroUsize> {
        self.inner.max_concurrency
    }

    /// True when running a call twice has the same effect as once: a call found
    /// `executing` after a crash may be re-run.
    pub fn idempotent(&self) -> bool {
        self.inner.idempotent
    }

    /// `Some(true)` when the tool only reads (changes nothing in its environment);
    /// `None` when its definition does not say. Reviewers may run such calls unasked.
    pub fn read_only(&self) -> Option<bool> {
        self.inner.read_only
    }

    /// `Some(true)` when the tool may delete or overwrite things; `None` when its
    /// definition does not say (MCP assumes destructive then).
    pub fn destructive(&self) -> Option<bool> {
        self.inner.destructive
    }

    /// `Some(true)` when the tool reaches an open world (the web, other people's
    /// systems), `Some(false)` when it acts only on a closed domain (a calculator, a
    /// local directory); `None` when its definition does not say (MCP assumes open).
    pub fn open_world(&self) -> Option<bool> {
        self.inner.open_world
    }

    /// Its hints as one value: what it declares, MCP's defaults for the rest
    /// ([`ToolHints::of_tool`](super::ToolHints::of_tool)).
    pub fn hints(&self) -> super::ToolHints {
        super::ToolHints::of_tool(self)
    }

    /// The name policy rules match the tool by: `mcp:SERVER/TOOL` for a tool of an MCP
    /// server (its name on the server, whatever it is called here), otherwise its name.
    /// Policies (the `policy` module) match it.
    pub fn policy_name(&self) -> &str {
        self.inner
            .policy_name
            .as_deref()
            .unwrap_or(&self.inner.name)
    }

    /// True when a custom `parse_args` replaces the built-in argument checks.
    pub fn has_parse_args(&self) -> bool {
        self.inner.parse_args.is_some()
    }

    /// The declaration sent to models.
    pub fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.inner.name.clone(),
            description: self.inner.description.clone(),
            parameters_schema: self.inner.schema.clone(),
            strict: self.inner.strict,
            options: self.inner.options.clone(),
        }
    }

    pub(crate) fn permits(&self) -> Option<&Semaphore> {
        self.inner.permits.as_ref()
    }

    /// Checks `arguments` and runs the body, always giving a result (never panicking):
    ///
    /// 1. `null` counts as `{}`; any other non-object is a refusal.
    /// 2. With a `parse_args`: it runs instead of both checks below; its `Err` is a
    ///    refusal and its `Ok` replaces the arguments.
    /// 3. Otherwise the required-key check, then the JSON Schema; each rejection is a
    ///    refusal listing what is wrong.
    /// 4. The body runs with the context; its [`ToolOutput`] becomes the result.
    ///
    /// A panic in `parse_args` or the body (before or after an `.await`) gives an
    /// exception result ([`ToolResult::exception`]), never a refusal. A timeout or a
    /// cancellation of `ctx`'s token drops the body and gives an error result. Every
    /// result carries the call id, the tool name and its display text.
    pub async fn execute(&self, arguments: Value, ctx: ToolContext) -> ToolResult {
        let t = &*self.inner;
        let id = ctx.tool_call_id().to_owned();
        let finish = |out: ToolOutput| out.into_result(&id, &t.name, &t.display_text);

        let args = match arguments {
            Value::Object(m) => m,
            Value::Null => Map::new(),
            other => {
                return finish(ToolOutput::Refusal(format!(
                    "The arguments of tool {} must be a JSON object, but they are {}. \
                     Call the tool again with an object of named parameters.",
                    t.name,
                    json_type(&other)
                )));
            }
        };

        install_hook();
        let args = if let Some(parse) = &t.parse_args {
            match catch(|| parse(args)) {
                Ok(Ok(a)) => a,
                Ok(Err(msg)) => return finish(ToolOutput::Refusal(msg)),
                Err(e) => {
                    let text = exception_text(&t.name, " while parsing its arguments", &e);
                    return ToolResult::exception(&id, text, e)
                        .with_name(&t.name)
                        .with_display_text(&t.display_text);
                }
            }
        } else {
            if let Err(msg) = check_required(&args, &t.required, &t.accepted) {
                return finish(ToolOutput::Refusal(msg));
            }
            let v = Value::Object(args);
            if let Err(msg) = check_schema(&t.validator, &v) {
                return finish(ToolOutput::Refusal(msg));
            }
            let Value::Object(m) = v else {
                unreachable!("an object was just wrapped")
            };
            m
        };

        if ctx.is_cancelled() {
            return finish(ToolOutput::Error(format!(
                "Tool {} was cancelled before it started.",
                t.name
            )));
        }
        // This run's own token, a child of the call's: a timeout stops this run's body
        // and leaves the call's token as it was (a layer around may run it again).
        let token = ctx.cancellation_token().child_token();
        let ctx = ctx.with_cancellation(token.clone());
        let default_timeout = ctx.default_timeout();
        let ended = match catch(|| t.handler.call_boxed(args, ctx)) {
            Err(e) => Ended::Done(Err(e)),
            Ok(fut) => run_body(fut, t.timeout.or(default_timeout), &token).await,
        };
        match ended {
            Ended::Done(Ok(out)) => finish(out),
            Ended::Done(Err(e)) => {
                let text = exception_text(&t.name, "", &e);
                ToolResult::exception(&id, text, e)
                    .with_name(&t.name)
                    .with_display_text(&t.display_text)
            }
            Ended::TimedOut(d) => {
                token.cancel();
                finish(ToolOutput::Error(format!(
                    "Tool {} timed out after {} ms and was stopped; it may have done part of its work.",
                    t.name,
                    d.as_millis()
                )))
            }
            Ended::Cancelled => finish(ToolOutput::Error(format!(
                "Tool {} was cancelled before it finished; it may have done part of its work.",
                t.name
            ))),
        }
    }
}

async fn run_body(
    fut: BoxToolFuture,
    timeout: Option<Duration>,
    token: &tokio_util::sync::CancellationToken,
) -> Ended {
    let body = CatchPanic::new(fut);
    let timed = async {
        match timeout {
            // `tokio::time::timeout` needs a Tokio runtime with time enabled.
            Some(d) if tokio::runtime::Handle::try_current().is_ok() => {
                match tokio::time::timeout(d, body).await {
                    Ok(r) => Ended::Done(r),
                    Err(_) => Ended::TimedOut(d),
                }
            }
            _ => Ended::Done(body.await),
        }
    };
    let cancelled = token.cancelled();
    match select(Box::pin(timed), Box::pin(cancelled)).await {
        Either::Left((e, _)) => e,
        Either::Right(((), _)) => Ended::Cancelled,
    }
}

/// Builds a [`Tool`]; see [`Tool::builder`].
#[must_use]
pub struct ToolBuilder {
    name: String,
    description: String,
    display_text: Option<String>,
    schema: Option<Value>,
    strict: bool,
    options: Map<String, Value>,
    timeout: Option<Duration>,
    max_concurrency: Option<usize>,
    idempotent: bool,
    read_only: Option<bool>,
    destructive: Option<bool>,
    open_world: Option<bool>,
    policy_name: Option<String>,
    parse_args: Option<Box<ParseArgsFn>>,
    handler: Option<Box<dyn DynHandler>>,
}

impl ToolBuilder {
    /// What the tool does, for the model.
    pub fn description(mut self, d: impl Into<String>) -> Self {
        self.description = d.into();
        self
    }

    /// UI text (default: the humanized name, e.g. `get_weather` → "Get weather").
    pub fn display_text(mut self, d: impl Into<String>) -> Self {
        self.display_text = Some(d.into());
        self
    }

    /// The JSON Schema of the arguments object (default `{"type":"object","properties":{}}`).
    pub fn schema(mut self, schema: Value) -> Self {
        self.schema = Some(schema);
        self
    }

    /// Derives the schema from a type with schemars (see [`schema_for`]).
    pub fn schema_for<T: schemars::JsonSchema>(self) -> Self {
        self.schema(schema_for::<T>())
    }

    /// Ask providers for strict schema adherence.
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Adds a provider option, e.g. `("cache_control", json!({"type": "ephemeral"}))`.
    pub fn option(mut self, key: impl Into<String>, value: Value) -> Self {
        self.options.insert(key.into(), value);
        self
    }

    /// Limits how long one call may run; the body is dropped when it expires.
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = Some(d);
        self
    }

    /// Limits how many calls of this tool run at once, across all batches.
    pub fn max_concurrency(mut self, n: usize) -> Self {
        self.max_concurrency = Some(n);
        self
    }

    /// Marks the tool idempotent (safe to run twice).
    pub fn idempotent(mut self, yes: bool) -> Self {
        self.idempotent = yes;
        self
    }

    /// Declares whether the tool only reads (MCP `readOnlyHint`); see [`Tool::read_only`].
    pub fn read_only(mut self, yes: bool) -> Self {
        self.read_only = Some(yes);
        self
    }

    /// Declares whether the tool may delete or overwrite things (MCP `destructiveHint`);
    /// see [`Tool::destructive`].
    pub fn destructive(mut self, yes: bool) -> Self {
        self.destructive = Some(yes);
        self
    }

    /// The name policy rules match the tool by (default: its name); see
    /// [`Tool::policy_name`]. An MCP client sets `mcp:SERVER/TOOL`.
    pub fn policy_name(mut self, name: impl Into<String>) -> Self {
        self.policy_name = Some(name.into());
        self
    }

    /// Declares whether the tool reaches an open world (MCP `openWorldHint`); see
    /// [`Tool::open_world`].
    pub fn open_world(mut self, yes: bool) -> Self {
        self.open_world = Some(yes);
        self
    }

    /// A custom argument parser. It replaces the required-key and schema checks: it
    /// receives the arguments object and returns it (possibly rewritten), or the text
    /// of a refusal.
    pub fn parse_args<F, E>(mut self, f: F) -> Self
    where
        F: Fn(Map<String, Value>) -> Result<Map<String, Value>, E> + Send + Sync + 'static,
        E: fmt::Display,
    {
        self.parse_args = Some(Box::new(move |m| f(m).map_err(|e| e.to_string())));
        self
    }

    /// The body as a closure over the raw arguments object.
    pub fn handler<F, Fut, R>(mut self, f: F) -> Self
    where
        F: Fn(Map<String, Value>, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: Into<ToolOutput>,
    {
        self.handler = Some(Box::new(FromFn(f)));
        self
    }

    /// The body as a closure over a typed argument struct. The schema defaults to the
    /// type's schemars schema; arguments that pass the checks but do not deserialize
    /// into `T` give a refusal naming the path of the problem.
    pub fn typed_handler<T, F, Fut, R>(mut self, f: F) -> Self
    where
        T: DeserializeOwned + schemars::JsonSchema + Send + 'static,
        F: Fn(T, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: Into<ToolOutput>,
    {
        if self.schema.is_none() {
            self.schema = Some(schema_for::<T>());
        }
        let f = Arc::new(f);
        self.handler(move |args: Map<String, Value>, ctx: ToolContext| {
            let f = Arc::clone(&f);
            async move {
                match serde_path_to_error::deserialize::<_, T>(Value::Object(args)) {
                    Ok(t) => f(t, ctx).await.into(),
                    Err(e) => ToolOutput::Refusal(format!(
                        "The arguments could not be read: {} (at {}). Call the tool again with arguments that match its schema.",
                        e.inner(),
                        e.path()
                    )),
                }
            }
        })
    }

    /// The body as a [`ToolHandler`] impl.
    pub fn handler_impl<H: ToolHandler>(mut self, h: H) -> Self {
        self.handler = Some(Box::new(FromImpl(Arc::new(h))));
        self
    }

    /// Validates the definition and compiles the schema (once, for every call).
    pub fn build(self) -> Result<Tool, ToolError> {
        validate_name(&self.name)?;
        let handler = self.handler.ok_or_else(|| ToolError::MissingHandler {
            name: self.name.clone(),
        })?;
        let schema = self.schema.unwrap_or_else(empty_object_schema);
        let invalid = |reason: String| ToolError::InvalidSchema {
            name: self.name.clone(),
            reason,
        };
        if !schema.is_object() {
            return Err(invalid(format!(
                "it must be a JSON object, not {}",
                json_type(&schema)
            )));
        }
        if let Some(t) = schema.get("type")
            && t != "object"
        {
            return Err(invalid(format!(
                "its \"type\" must be \"object\" (tool arguments are an object), not {t}"
            )));
        }
        let validator = jsonschema::validator_for(&schema).map_err(|e| invalid(e.to_string()))?;
        let max_concurrency = match self.max_concurrency {
            None => None,
            Some(n) => Some(
                NonZeroUsize::new(n).ok_or_else(|| ToolError::ZeroConcurrency {
                    name: self.name.clone(),
                })?,
            ),
        };
        let display_text = self
            .display_text
            .unwrap_or_else(|| humanize_tool_name(&self.name));
        Ok(Tool {
            inner: Arc::new(Inner {
                required: required_names(&schema),
                accepted: accepted_names(&schema),
                validator,
                schema,
                display_text,
                description: self.description,
                strict: self.strict,
                options: self.options,
                timeout: self.timeout,
                permits: max_concurrency.map(|n| Semaphore::new(n.get())),
                max_concurrency,
                idempotent: self.idempotent,
                read_only: self.read_only,
                destructive: self.destructive,
                open_world: self.open_world,
                policy_name: self.policy_name,
                parse_args: self.parse_args,
                handler,
                name: self.name,
            }),
        })
    }
}

/// The parameters schema of `T` as schemars derives it, without the root `$schema`
/// and `title` keys (providers do not want them; `$defs` and `$ref` are kept and
/// resolve locally).
///
/// ```
/// #[derive(schemars::JsonSchema)]
/// struct Args { city: String }
/// let s = llmchain::tool::schema_for::<Args>();
/// assert_eq!(s["required"], serde_json::json!(["city"]));
/// assert!(s.get("$schema").is_none());
/// ```
pub fn schema_for<T: schemars::JsonSchema>() -> Value {
    let mut v = schemars::schema_for!(T).to_value();
    if let Value::Object(m) = &mut v {
        m.remove("$schema");
        m.remove("title");
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn noop() -> ToolBuilder {
        Tool::builder("t").handler(|_, _| async { "ok" })
    }

    #[test]
    fn build_errors() {
        assert_eq!(
            Tool::builder("t").build().unwrap_err(),
            ToolError::MissingHandler { name: "t".into() }
        );
        assert_eq!(
            noop().schema(json!(true)).build().unwrap_err().to_string(),
            "tool \"t\" has an invalid parameters schema: it must be a JSON object, not a boolean"
        );
        assert_eq!(
            noop()
                .schema(json!({"type": "array"}))
                .build()
                .unwrap_err()
                .to_string(),
            "tool \"t\" has an invalid parameters schema: its \"type\" must be \"object\" (tool arguments are an object), not \"array\""
        );
        let e = noop()
            .schema(json!({"type": "object", "properties": {"a": {"type": "no-such-type"}}}))
            .build()
            .unwrap_err();
        assert!(matches!(e, ToolError::InvalidSchema { .. }), "{e}");
        assert_eq!(
            noop().max_concurrency(0).build().unwrap_err(),
            ToolError::ZeroConcurrency { name: "t".into() }
        );
    }

    #[test]
    fn hints_are_absent_unless_declared() {
        let t = noop().build().unwrap();
        assert_eq!((t.read_only(), t.destructive()), (None, None));
        let t = noop().read_only(true).destructive(false).build().unwrap();
        assert_eq!((t.read_only(), t.destructive()), (Some(true), Some(false)));
    }

    #[test]
    fn definition() {
        let t = noop()
            .description("d")
            .strict(true)
            .option("cache_control", json!({"type": "ephemeral"}))
            .build()
            .unwrap();
        assert_eq!(
            serde_json::to_value(t.definition()).unwrap(),
            json!({"name":"t","description":"d","parameters_schema":{"type":"object","properties":{}},
                   "strict":true,"options":{"cache_control":{"type":"ephemeral"}}})
        );
        assert_eq!(t.display_text(), "T");
    }
}

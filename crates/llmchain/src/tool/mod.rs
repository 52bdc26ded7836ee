//! Tools: definitions, argument checks and safe execution.
//!
//! A [`Tool`] has a name (`[a-zA-Z0-9_-]{1,64}`), a description, a display text, a JSON
//! Schema for its arguments object, `strict`, provider `options`, an optional timeout,
//! a per-tool concurrency limit, an `idempotent` flag, an optional `parse_args` and an
//! async body. There are three ways to define one:
//!
//! * a closure: [`Tool::builder`]`("name").description(..).schema(..).handler(|args, ctx| async move { .. })`,
//!   or [`ToolBuilder::typed_handler`] for a typed argument struct;
//! * a trait impl: [`ToolHandler`] on your type, passed to [`ToolBuilder::handler_impl`];
//! * `#[llmchain::tool]` on an `async fn` whose argument struct derives `Deserialize`
//!   and `JsonSchema`; its doc comment becomes the description:
//!
//! ```
//! use llmchain::tool::ToolContext;
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct WeatherArgs {
//!     /// City name.
//!     city: String,
//! }
//!
//! /// Current weather in a city.
//! #[llmchain::tool(timeout_ms = 5000, idempotent)]
//! async fn get_weather(args: WeatherArgs) -> Result<String, String> {
//!     Ok(format!("18C in {}", args.city))
//! }
//!
//! let tool = get_weather_tool();
//! assert_eq!(tool.name(), "get_weather");
//! assert_eq!(tool.description(), "Current weather in a city.");
//! assert!(tool.idempotent());
//! ```
//!
//! The macro keeps the function as it is and adds `<fn>_tool() -> Tool`. The function
//! may take a second parameter, the [`ToolContext`]. Attributes: `name = ".."`,
//! `description = ".."` (instead of the doc comment), `display_text = ".."`,
//! `timeout_ms = N`, `max_concurrency = N`, `idempotent`, `strict`, and the MCP-style
//! hints `read_only` or `destructive` (which set the default review policy of the CLI).
//!
//! # Before the body runs
//!
//! 1. The required-key check, with the reference's message and "did you mean"
//!    suggestions.
//! 2. Full JSON Schema validation (compiled once per tool with `jsonschema`), listing
//!    every violation by JSON pointer (at most [`MAX_LISTED_VIOLATIONS`], each cut to
//!    [`MAX_VIOLATION_CHARS`] characters, so a 10 MB bad argument cannot flood the model).
//! 3. Or, instead of both, a custom `parse_args`, which may rewrite the arguments.
//!
//! Every rejection is a refusal (`is_error` + `is_refusal`): nothing ran, so a corrected
//! call is safe to resend. `null` arguments count as `{}` (as in the reference); any
//! other non-object is refused.
//!
//! # Outcomes
//!
//! The body returns anything `Into<`[`ToolOutput`]`>`; see there for the mapping to a
//! [`ToolResult`](crate::message::ToolResult). Around the body:
//!
//! * a panic (in `parse_args` or the body, before or after an `.await`) gives
//!   `is_error` + `is_exception`, with content `ERROR: tool <name> panicked: <msg> at
//!   <file:line:col>` and the virtual exception holding message, location and
//!   backtrace (see the `panic` module notes on how the location is captured). Never
//!   a refusal; the executor's `on_tool_execution_exception` hook receives it;
//! * a timeout drops the body and gives `is_error` (not an exception, not a refusal);
//! * a cancellation drops the body and gives `is_error`;
//! * an unknown tool gives a refusal naming the available tools, with a suggestion.
//!
//! # Running batches
//!
//! [`ToolExecutor`] runs a batch concurrently within a global and a per-tool limit,
//! returns the results in call order and moves each call's `execution_status`
//! `identified → executing → completed | failed`, reporting each step to an
//! [`ExecutionObserver`].

mod args;
mod context;
mod definition;
mod error;
mod executor;
mod hints;
mod name;
mod output;
mod panic;
mod run;

pub use args::{MAX_LISTED_VIOLATIONS, MAX_VIOLATION_CHARS, check_arguments};
pub use context::{CustomContext, ToolContext};
pub use definition::{BoxToolFuture, Tool, ToolBuilder, ToolHandler, schema_for};
pub use error::ToolError;
pub use executor::{
    DEFAULT_MAX_CONCURRENCY, DEFAULT_MAX_RESULT_BYTES, ExecutionObserver, ObserverFuture, SpanText,
    ToolExecutor,
};
pub use hints::ToolHints;
pub use name::{MAX_NAME_LEN, humanize_tool_name, shown_name, validate_name};
pub use output::ToolOutput;
pub use run::{ToolRun, ToolRunFuture, WrapTool};
/// The cancellation token of [`ToolContext`] and [`ToolExecutor::execute_with_cancel`].
pub use tokio_util::sync::CancellationToken;

/// Items the `#[tool]` macro expands to. Not a stable API.
#[doc(hidden)]
pub mod __private {
    pub use schemars;
    pub use serde;

    use super::{Tool, ToolContext, ToolOutput};
    use std::future::Future;

    /// What the macro read from the attribute and the doc comment.
    pub struct MacroSpec {
        pub name: &'static str,
        pub description: &'static str,
        pub display_text: Option<&'static str>,
        pub timeout_ms: Option<u64>,
        pub max_concurrency: Option<usize>,
        pub idempotent: bool,
        pub strict: bool,
        pub read_only: Option<bool>,
        pub destructive: Option<bool>,
    }

    /// Builds the tool of a `#[tool]` function.
    ///
    /// # Panics
    /// Never in practice: the macro checked the name and the limits at compile time,
    /// and schemars only emits schemas that compile.
    pub fn macro_tool<T, F, Fut, R>(spec: MacroSpec, f: F) -> Tool
    where
        T: serde::de::DeserializeOwned + schemars::JsonSchema + Send + 'static,
        F: Fn(T, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: Into<ToolOutput>,
    {
        let mut b = Tool::builder(spec.name)
            .description(spec.description)
            .idempotent(spec.idempotent)
            .strict(spec.strict)
            .typed_handler(f);
        if let Some(d) = spec.display_text {
            b = b.display_text(d);
        }
        if let Some(ms) = spec.timeout_ms {
            b = b.timeout(std::time::Duration::from_millis(ms));
        }
        if let Some(n) = spec.max_concurrency {
            b = b.max_concurrency(n);
        }
        if let Some(yes) = spec.read_only {
            b = b.read_only(yes);
        }
        if let Some(yes) = spec.destructive {
            b = b.destructive(yes);
        }
        match b.build() {
            Ok(t) => t,
            Err(e) => panic!("#[tool] {}: {e}", spec.name),
        }
    }
}

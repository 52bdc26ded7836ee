//! # llmchain
//!
//! LLM tool calling for Rust: the messages that carry a model's tool calls and the
//! application's tool results, the streaming codecs that assemble them from provider
//! wire formats, the tools that run them safely, and the chain that loops with the model.
//!
//! The message model ([`message`]) is pure: no network, database or async runtime.
//!
//! ## An agent
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use llmchain::chain::{LLMChain, Mode};
//! use llmchain::http::{HttpModel, HttpModelConfig};
//! use llmchain::message::Message;
//! use llmchain::provider::Format;
//! use llmchain::tool::Tool;
//! use serde_json::json;
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     // OPENAI_API_KEY (and OPENAI_BASE_URL for a compatible server) from the environment;
//!     // any provider of `http::providers::PROVIDERS` with `HttpModelConfig::from_env_for`.
//!     let model = HttpModel::new(HttpModelConfig::from_env(Format::OPENAI_CHAT, "gpt-4.1-mini")?)?;
//!     let weather = Tool::builder("get_weather")
//!         .description("Current weather in a city.")
//!         .schema(json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}))
//!         .handler(|args, _ctx| async move { format!("18C and sunny in {}", args["city"]) })
//!         .build()?;
//!     let mut chain = LLMChain::new(Arc::new(model)).with_tool(weather);
//!     chain.add_message(Message::user("What's the weather in Paris?")).await?;
//!     chain.run(Mode::while_needs_response()).await?;
//!     println!("{}", chain.last_message().and_then(|m| m.text()).unwrap_or_default());
//!     Ok(())
//! }
//! ```
//!
//! Durable conversations, the run queue and workers are in `llmchain-store`; MCP tools
//! in `llmchain-mcp`; an AI SDK (`useChat`) back end in `llmchain-web`.
//!
//! ## Feature flags
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `runtime` | yes | tools ([`tool`](mod@tool), `#[tool]`), the chain ([`chain`]); implies `model` |
//! | `http` | yes | [`http`]: `HttpModel` for every provider over reqwest (rustls); implies `model` |
//! | `model` | (by the two above) | [`model`]: the `ChatModel` trait, its events and errors |
//! | `bedrock` | no | AWS Bedrock (`http::aws`): SigV4, credentials files |
//! | `vertex` | no | Google Vertex AI (`http::vertex`): OAuth through `gcp_auth` |
//! | `test-util` | no | test doubles: `chain::ScriptedModel`, `provider::render` |
//!
//! With no features: [`message`], [`provider`] (the codecs), [`conversation`] and
//! [`storage_format`], with no async runtime.
//!
//! ## Seed function → Rust item
//!
//! The two reference documents (`LangChain.Message.ToolCall` and
//! `LangChain.Message.ToolResult` of LangChain for Elixir) map as follows.
//!
//! | seed | Rust |
//! |---|---|
//! | `ToolCall` struct | [`message::ToolCall`] |
//! | field `status` (`:incomplete`/`:complete`) | [`ToolCall::status`](message::ToolCall::status): [`message::ToolCallStatus`] |
//! | field `type` | [`ToolCall::r#type`](message::ToolCall::type): [`message::ToolType`] |
//! | field `call_id` | [`ToolCall::call_id`](message::ToolCall::call_id) |
//! | field `name` | [`ToolCall::name`](message::ToolCall::name) |
//! | field `arguments` | [`ToolCall::arguments`](message::ToolCall::arguments): [`message::Arguments`] (raw text or object) |
//! | field `index` | [`ToolCall::index`](message::ToolCall::index) |
//! | field `display_text` | [`ToolCall::display_text`](message::ToolCall::display_text) |
//! | field `metadata` | [`ToolCall::metadata`](message::ToolCall::metadata) |
//! | `new(attrs)` | [`ToolCall::new`](message::ToolCall::new) with [`message::ToolCallAttrs`] → `Result<ToolCall, ValidationErrors>` |
//! | `new!(attrs)` | [`ToolCall::new_or_panic`](message::ToolCall::new_or_panic) |
//! | changeset errors | [`message::ValidationErrors`] / [`message::FieldError`] |
//! | `complete(tool_call)` | [`ToolCall::complete`](message::ToolCall::complete), [`ToolCall::complete_in_place`](message::ToolCall::complete_in_place) |
//! | `arguments_as_map(tool_call)` | [`ToolCall::arguments_as_map`](message::ToolCall::arguments_as_map) |
//! | `execution_status(tool_call, default)` | [`ToolCall::execution_status`](message::ToolCall::execution_status), [`ToolCall::execution_status_or`](message::ToolCall::execution_status_or), typed [`message::ExecutionStatus`] |
//! | `set_execution_status(tool_call, status)` | [`ToolCall::set_execution_status`](message::ToolCall::set_execution_status), [`ToolCall::with_execution_status`](message::ToolCall::with_execution_status) |
//! | `merge(primary, call_part)` | [`ToolCall::merge`](message::ToolCall::merge), in place [`ToolCall::merge_from`](message::ToolCall::merge_from); errors [`message::MergeError`] |
//! | `t()` | [`message::ToolCall`] |
//! | `ToolResult` struct | [`message::ToolResult`] |
//! | field `type` | [`ToolResult::r#type`](message::ToolResult::type) |
//! | field `tool_call_id` | [`ToolResult::tool_call_id`](message::ToolResult::tool_call_id) |
//! | field `name` | [`ToolResult::name`](message::ToolResult::name) |
//! | field `content` (string or ContentParts) | [`ToolResult::content`](message::ToolResult::content): `Vec<ContentPart>`; constructors take [`message::Content`] (text or parts) |
//! | field `processed_content` | [`ToolResult::processed_content`](message::ToolResult::processed_content) (JSON; never sent to a model) |
//! | field `display_text` | [`ToolResult::display_text`](message::ToolResult::display_text) |
//! | field `options` (cache control, ...) | [`ToolResult::options`](message::ToolResult::options) |
//! | field `is_error` | [`ToolResult::is_error`](message::ToolResult::is_error), [`ToolResult::error`](message::ToolResult::error) |
//! | field `is_exception` | [`ToolResult::is_exception`](message::ToolResult::is_exception), [`ToolResult::exception`](message::ToolResult::exception) |
//! | field `exception` (virtual) | [`ToolResult::exception_info`](message::ToolResult::exception_info): [`message::ToolException`] (message, location, backtrace) |
//! | field `is_refusal` | [`ToolResult::is_refusal`](message::ToolResult::is_refusal), [`ToolResult::refusal`](message::ToolResult::refusal) |
//! | field `is_interrupt` / `interrupt_data` (virtual) | [`ToolResult::is_interrupt`](message::ToolResult::is_interrupt), [`ToolResult::interrupt`](message::ToolResult::interrupt), [`ToolResult::interrupt_data`](message::ToolResult::interrupt_data) |
//! | field `message_expansion` (virtual) | [`ToolResult::message_expansion`](message::ToolResult::message_expansion): [`message::MessageExpansion`] |
//! | `{:ok, "String response for LLM", native_data}` | [`ToolResult::text`](message::ToolResult::text) + [`ToolResult::with_processed_content`](message::ToolResult::with_processed_content) |
//! | `ContentPart` | [`message::ContentPart`] |
//! | `LangChain.MessageExpansion` | [`message::MessageExpansion`], [`message::KeepContent`] |
//! | `Message`, `MessageDelta` | [`message::Message`], [`message::MessageDelta`] |
//!
//! Where the reference has bugs, we keep its intent and fix them; each fix is documented
//! on the item (e.g. an index mismatch in `merge` is an error value, not a raise).

#![deny(missing_docs)]

#[cfg(feature = "runtime")]
pub mod chain;
pub mod conversation;
#[cfg(feature = "runtime")]
pub mod guard;
#[cfg(feature = "http")]
pub mod http;
pub mod message;
#[cfg(feature = "model")]
pub mod model;
#[cfg(feature = "runtime")]
pub mod policy;
pub mod provider;
pub mod redact;
pub mod secrets;
pub mod storage_format;
pub mod telemetry;
#[cfg(feature = "runtime")]
pub mod tool;

/// `#[tool]` on an `async fn`: see [`tool`](mod@tool).
#[cfg(feature = "runtime")]
pub use llmchain_macros::tool;

/// schemars, re-exported: `#[schemars(crate = "llmchain::schemars")]` on a tool's
/// argument type needs no schemars dependency of its own.
#[cfg(feature = "runtime")]
pub use schemars;
/// serde, re-exported: `#[serde(crate = "llmchain::serde")]` on a tool's argument type
/// needs no serde dependency of its own.
pub use serde;
/// serde_json, re-exported (tool arguments and results are JSON).
pub use serde_json;

/// What most programs use, in one import: `use llmchain::prelude::*;`.
///
/// ```
/// use llmchain::prelude::*;
///
/// /// Adds two numbers.
/// #[tool]
/// async fn add(args: AddArgs) -> String {
///     (args.a + args.b).to_string()
/// }
///
/// #[derive(Deserialize, JsonSchema)]
/// #[serde(crate = "llmchain::serde")]
/// #[schemars(crate = "llmchain::schemars")]
/// struct AddArgs {
///     a: f64,
///     b: f64,
/// }
///
/// let chain = LLMChain::new(ScriptedModel::new(Format::ANTHROPIC))
///     .with_tool(add_tool())
///     .with_review(|call| match call.name.as_deref() {
///         Some("add") => ReviewDecision::Approve,
///         _ => ReviewDecision::Interrupt,
///     });
/// # let _ = chain;
/// ```
pub mod prelude {
    pub use crate::conversation::Conversation;
    pub use crate::message::{ContentPart, Message, ToolCall, ToolResult};
    pub use crate::provider::Format;
    pub use serde::Deserialize;
    pub use serde_json::{Value, json};

    #[cfg(feature = "model")]
    pub use crate::model::{ChatModel, ModelError, ModelEvent};

    #[cfg(feature = "test-util")]
    pub use crate::chain::ScriptedModel;
    #[cfg(feature = "runtime")]
    pub use crate::chain::{
        Callbacks, ChainCallbacks, ChainError, HumanDecision, LLMChain, Mode, ReviewDecision,
        RunOutcome,
    };
    #[cfg(feature = "runtime")]
    pub use crate::tool::{Tool, ToolContext, ToolOutput};
    /// `#[tool]`: see [`tool`](mod@crate::tool).
    #[cfg(feature = "runtime")]
    pub use llmchain_macros::tool;
    #[cfg(feature = "runtime")]
    pub use schemars::JsonSchema;

    #[cfg(feature = "http")]
    pub use crate::http::{HttpModel, HttpModelConfig};
}

//! The chain: an [`LLMChain`] runs a conversation with a [`ChatModel`] and tools, in a
//! [`Mode`], with review, interrupts, message expansion, a failure budget, fallbacks,
//! cancellation, callbacks and tracing.
//!
//! ```
//! use std::sync::Arc;
//! use llmchain::chain::{LLMChain, Mode, RunOutcome, ScriptedModel};
//! use llmchain::message::Message;
//! use llmchain::provider::Format;
//! use llmchain::provider::render::ResponseScript;
//! use llmchain::tool::Tool;
//! use serde_json::json;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let model = ScriptedModel::new(Format::OPENAI_CHAT)
//!     .respond(ResponseScript::tool_call("call_1", "add", r#"{"a": 2, "b": 3}"#))?
//!     .respond(ResponseScript::text("2 + 3 = 5"))?;
//! let add = Tool::builder("add")
//!     .schema(json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}))
//!     .handler(|args, _ctx| async move {
//!         (args["a"].as_f64().unwrap_or(0.0) + args["b"].as_f64().unwrap_or(0.0)).to_string()
//!     })
//!     .build()?;
//! let mut chain = LLMChain::new(Arc::new(model)).with_tool(add);
//! chain.add_message(Message::user("What is 2 + 3?")).await?;
//! let outcome = chain.run(Mode::while_needs_response()).await?;
//! assert_eq!(outcome, RunOutcome::Done);
//! assert_eq!(chain.last_message().unwrap().text().as_deref(), Some("2 + 3 = 5"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

mod budget;
mod callbacks;
mod compaction;
mod decide;
mod error;
mod events;
mod execute;
mod extract;
mod guard_points;
mod history;
mod hook;
mod hook_points;
mod interrupt;
mod journal;
mod llm_chain;
mod mode;
mod partial_answer;
mod price;
mod review;
mod run;
#[cfg(feature = "test-util")]
mod scripted;
mod sink;
mod state;
mod steps;

pub use crate::step;
pub use budget::{
    Budget, DEFAULT_FINAL_ANSWER_TOKENS, DEFAULT_RESERVED_OUTPUT_TOKENS, OnExhausted, RunStop,
    Spent, number,
};
pub use callbacks::{Callbacks, ChainCallbacks};
pub use compaction::{CONTEXT_WINDOWS_READ, context_window, estimate_tokens};
pub use error::ChainError;
pub use events::{ChainEvent, ChainStream};
pub use extract::Extract;
pub use hook::{
    AfterModel, AfterTool, BeforeTool, ChunkCheck, Hook, HookCx, HookFuture, Layer, ModelGate,
};
pub use journal::{Decision, Entry, Journal};
pub use llm_chain::{
    DEFAULT_HOOK_TIMEOUT, DEFAULT_MAX_CALL_ARGUMENT_BYTES_PER_TURN, DEFAULT_MAX_CALLS_PER_TURN,
    DEFAULT_MAX_REPEATED_FAILURES, DEFAULT_MAX_RETRY_COUNT, LLMChain,
};
pub use mode::{
    CustomMode, DEFAULT_MAX_RUNS, Disposition, Mode, ModeFuture, RunOutcome, ShouldContinue,
};
// The model trait lives below the chain (and the HTTP clients) in `crate::model`; it is
// re-exported here because every chain user needs it.
pub use crate::model::{
    ChatModel, HttpErrorKind, ModelError, ModelEvent, ModelStream, RequestInfo, Retry,
    collect_stream,
};
pub use price::{PRICES_READ, Price};
pub use review::{HumanDecision, ReviewDecision, ReviewFuture, ReviewHandler};
#[cfg(feature = "test-util")]
pub use scripted::{ScriptedModel, ScriptedTurn};
pub use sink::{ConversationSink, SinkError, SinkErrorKind, SinkFuture};
pub use state::{ChainState, PendingCall, PendingReview, ToolInterrupt};
pub use steps::{Step, Steps};

//! [`ChainCallbacks`]: hooks into a run, as a trait with no-op defaults or as closures.
//!
//! # Order
//!
//! For one model call and its tool batch, callbacks fire in this order:
//!
//! 1. `on_llm_new_delta` for each stream event, as it arrives;
//! 2. `on_llm_new_message` once the message is decoded and stored (a message the
//!    sink refuses ends the run with [`ChainError::Persist`](crate::chain::ChainError)
//!    and is never announced), then `on_llm_token_usage` when the response reported
//!    usage (it fires for a refused message too: the tokens were spent);
//! 3. `on_tool_call_identified` for each complete call of a known tool, in call order;
//! 4. `on_message_processed` for the assistant message;
//! 5. `on_tool_call_review` for each call the review handler decided, in call order;
//! 6. `on_tool_execution_started` for every call that will run, in call order, before
//!    any body runs;
//! 7. `on_tool_pre_execution` as each body starts (concurrent calls: in start order);
//! 8. per call, in call order, once the batch is over: `on_tool_execution_exception`
//!    (a caught panic) then `on_tool_execution_failed`, or `on_tool_execution_completed`;
//!    interrupts fire neither;
//! 9. `on_tool_interrupted` once, when any result is an interrupt;
//! 10. `on_message_processed` for the tool message, then `on_tool_response_created`.
//!
//! `on_llm_error` fires for every failed model call (fallbacks included),
//! `on_retries_exceeded` when the failure budget is used up, and `on_error` once for the
//! error that ends a run. Return values are ignored; a panicking callback is a bug in the
//! callback and propagates.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::error::ChainError;
use super::review::ReviewDecision;
use crate::message::{Message, TokenUsage, ToolCall, ToolException, ToolResult};
use crate::model::{ModelError, Retry};
use crate::provider::StreamEvent;

/// Hooks into a chain run. Every method has a no-op default.
#[allow(unused_variables)]
pub trait ChainCallbacks: Send + Sync {
    /// A stream event arrived.
    fn on_llm_new_delta(&self, event: &StreamEvent<'_>) {}
    /// A typed answer ([`Extract`](super::Extract)) grew while it streams: the object so
    /// far, a view of the final one.
    fn on_partial_answer(&self, partial: &serde_json::Value) {}
    /// A model call produced a message.
    fn on_llm_new_message(&self, message: &Message) {}
    /// A model call reported usage.
    fn on_llm_token_usage(&self, usage: &TokenUsage) {}
    /// Response headers (rate limits, request ids).
    fn on_llm_response_headers(&self, headers: &Map<String, Value>) {}
    /// A model call failed (each attempt, fallbacks included).
    fn on_llm_error(&self, error: &ModelError) {}
    /// A model call's attempt failed with a retryable error and it waits before the next
    /// (the HTTP client's own retries, inside one model call).
    fn on_llm_retry(&self, retry: &Retry) {}
    /// A message was added to the conversation and processed.
    fn on_message_processed(&self, message: &Message) {}
    /// The first time a complete call of a known tool is seen.
    fn on_tool_call_identified(&self, call: &ToolCall) {}
    /// The review handler decided about a call.
    fn on_tool_call_review(&self, call: &ToolCall, decision: &ReviewDecision) {}
    /// A call is about to run (all of a batch fire before any body runs).
    fn on_tool_execution_started(&self, call: &ToolCall) {}
    /// A call's body is starting.
    fn on_tool_pre_execution(&self, call: &ToolCall) {}
    /// A call succeeded.
    fn on_tool_execution_completed(&self, call: &ToolCall, result: &ToolResult) {}
    /// A call failed (error, refusal, timeout, unknown tool, caught panic, rejection).
    fn on_tool_execution_failed(&self, call: &ToolCall, result: &ToolResult) {}
    /// A call's body panicked; fires before `on_tool_execution_failed`.
    fn on_tool_execution_exception(&self, call: &ToolCall, exception: &ToolException) {}
    /// Some results of a batch are interrupts.
    fn on_tool_interrupted(&self, results: &[ToolResult]) {}
    /// The tool message was added.
    fn on_tool_response_created(&self, message: &Message) {}
    /// The failure budget is used up.
    fn on_retries_exceeded(&self) {}
    /// A decision stopped the run before its end (a budget ran out).
    fn on_run_stopped(&self, stop: &super::budget::RunStop) {
        let _ = stop;
    }
    /// The run ended with an error.
    fn on_error(&self, error: &ChainError) {}
}

type Hook<T> = Option<Arc<dyn Fn(&T) + Send + Sync>>;
type DeltaHook = Option<Arc<dyn Fn(&StreamEvent<'_>) + Send + Sync>>;
type ResultsHook = Option<Arc<dyn Fn(&[ToolResult]) + Send + Sync>>;
type Hook2<A, B> = Option<Arc<dyn Fn(&A, &B) + Send + Sync>>;

/// [`ChainCallbacks`] from closures.
///
/// ```
/// use llmchain::chain::Callbacks;
/// let cb = Callbacks::new()
///     .on_tool_execution_started(|call| eprintln!("running {:?}", call.name))
///     .on_llm_new_message(|m| eprintln!("model said {:?}", m.text()));
/// # let _ = cb;
/// ```
#[derive(Default, Clone)]
pub struct Callbacks {
    llm_new_delta: DeltaHook,
    llm_new_message: Hook<Message>,
    llm_token_usage: Hook<TokenUsage>,
    llm_error: Hook<ModelError>,
    llm_retry: Hook<Retry>,
    message_processed: Hook<Message>,
    tool_call_identified: Hook<ToolCall>,
    tool_call_review: Hook2<ToolCall, ReviewDecision>,
    tool_execution_started: Hook<ToolCall>,
    tool_pre_execution: Hook<ToolCall>,
    tool_execution_completed: Hook2<ToolCall, ToolResult>,
    tool_execution_failed: Hook2<ToolCall, ToolResult>,
    tool_execution_exception: Hook2<ToolCall, ToolException>,
    tool_interrupted: ResultsHook,
    tool_response_created: Hook<Message>,
    retries_exceeded: Option<Arc<dyn Fn() + Send + Sync>>,
    error: Hook<ChainError>,
}

macro_rules! setter {
    ($name:ident, $field:ident, $($arg:ty),+) => {
        #[doc = concat!("Sets `", stringify!($name), "`.")]
        #[must_use]
        pub fn $name(mut self, f: impl Fn($(&$arg),+) + Send + Sync + 'static) -> Self {
            self.$field = Some(Arc::new(f));
            self
        }
    };
}

impl Callbacks {
    /// No callbacks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `on_llm_new_delta`.
    #[must_use]
    pub fn on_llm_new_delta(
        mut self,
        f: impl Fn(&StreamEvent<'_>) + Send + Sync + 'static,
    ) -> Self {
        self.llm_new_delta = Some(Arc::new(f));
        self
    }
    setter!(on_llm_new_message, llm_new_message, Message);
    setter!(on_llm_token_usage, llm_token_usage, TokenUsage);
    setter!(on_llm_error, llm_error, ModelError);
    setter!(on_llm_retry, llm_retry, Retry);
    setter!(on_message_processed, message_processed, Message);
    setter!(on_tool_call_identified, tool_call_identified, ToolCall);
    setter!(
        on_tool_call_review,
        tool_call_review,
        ToolCall,
        ReviewDecision
    );
    setter!(on_tool_execution_started, tool_execution_started, ToolCall);
    setter!(on_tool_pre_execution, tool_pre_execution, ToolCall);
    setter!(
        on_tool_execution_completed,
        tool_execution_completed,
        ToolCall,
        ToolResult
    );
    setter!(
        on_tool_execution_failed,
        tool_execution_failed,
        ToolCall,
        ToolResult
    );
    setter!(
        on_tool_execution_exception,
        tool_execution_exception,
        ToolCall,
        ToolException
    );
    setter!(on_tool_response_created, tool_response_created, Message);
    setter!(on_error, error, ChainError);

    /// Sets `on_tool_interrupted`.
    #[must_use]
    pub fn on_tool_interrupted(
        mut self,
        f: impl Fn(&[ToolResult]) + Send + Sync + 'static,
    ) -> Self {
        self.tool_interrupted = Some(Arc::new(f));
        self
    }

    /// Sets `on_retries_exceeded`.
    #[must_use]
    pub fn on_retries_exceeded(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.retries_exceeded = Some(Arc::new(f));
        self
    }
}

impl ChainCallbacks for Callbacks {
    fn on_llm_new_delta(&self, e: &StreamEvent<'_>) {
        if let Some(f) = &self.llm_new_delta {
            f(e)
        }
    }
    fn on_llm_new_message(&self, m: &Message) {
        if let Some(f) = &self.llm_new_message {
            f(m)
        }
    }
    fn on_llm_token_usage(&self, u: &TokenUsage) {
        if let Some(f) = &self.llm_token_usage {
            f(u)
        }
    }
    fn on_llm_retry(&self, r: &Retry) {
        if let Some(f) = &self.llm_retry {
            f(r)
        }
    }
    fn on_llm_error(&self, e: &ModelError) {
        if let Some(f) = &self.llm_error {
            f(e)
        }
    }
    fn on_message_processed(&self, m: &Message) {
        if let Some(f) = &self.message_processed {
            f(m)
        }
    }
    fn on_tool_call_identified(&self, c: &ToolCall) {
        if let Some(f) = &self.tool_call_identified {
            f(c)
        }
    }
    fn on_tool_call_review(&self, c: &ToolCall, d: &ReviewDecision) {
        if let Some(f) = &self.tool_call_review {
            f(c, d)
        }
    }
    fn on_tool_execution_started(&self, c: &ToolCall) {
        if let Some(f) = &self.tool_execution_started {
            f(c)
        }
    }
    fn on_tool_pre_execution(&self, c: &ToolCall) {
        if let Some(f) = &self.tool_pre_execution {
            f(c)
        }
    }
    fn on_tool_execution_completed(&self, c: &ToolCall, r: &ToolResult) {
        if let Some(f) = &self.tool_execution_completed {
            f(c, r)
        }
    }
    fn on_tool_execution_failed(&self, c: &ToolCall, r: &ToolResult) {
        if let Some(f) = &self.tool_execution_failed {
            f(c, r)
        }
    }
    fn on_tool_execution_exception(&self, c: &ToolCall, x: &ToolException) {
        if let Some(f) = &self.tool_execution_exception {
            f(c, x)
        }
    }
    fn on_tool_interrupted(&self, r: &[ToolResult]) {
        if let Some(f) = &self.tool_interrupted {
            f(r)
        }
    }
    fn on_tool_response_created(&self, m: &Message) {
        if let Some(f) = &self.tool_response_created {
            f(m)
        }
    }
    fn on_retries_exceeded(&self) {
        if let Some(f) = &self.retries_exceeded {
            f()
        }
    }
    fn on_error(&self, e: &ChainError) {
        if let Some(f) = &self.error {
            f(e)
        }
    }
}

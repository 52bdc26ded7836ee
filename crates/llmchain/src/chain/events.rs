//! [`ChainEvent`] and [`LLMChain::stream`]: a run as a `Stream` of what happens, beside
//! the callbacks (the AI SDK's `fullStream`, rig's stream of items).

use std::sync::Arc;

use futures_util::Stream;
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::callbacks::ChainCallbacks;
use super::error::ChainError;
use super::llm_chain::LLMChain;
use super::mode::{Mode, RunOutcome};
use super::review::ReviewDecision;
use crate::message::{Message, TokenUsage, ToolCall, ToolException, ToolResult};
use crate::model::{ModelError, Retry};
use crate::provider::StreamEvent;

/// One thing that happened in a run, as [`LLMChain::stream`] yields it. The variants
/// match the [`ChainCallbacks`] methods (same order, same meaning); the last item of a
/// stream is always [`ChainEvent::Finished`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ChainEvent {
    /// A stream event of the model's answer (text, reasoning, call progress).
    Delta(StreamEvent<'static>),
    /// A model call produced a message (stored already).
    ModelMessage(Message),
    /// A model call reported usage.
    Usage(TokenUsage),
    /// Response headers (rate limits, request ids).
    ResponseHeaders(Map<String, Value>),
    /// A model call failed (each attempt, fallbacks included).
    ModelFailed(ModelError),
    /// A model call waits before trying again.
    Retrying(Retry),
    /// A message was added to the conversation and processed.
    MessageProcessed(Message),
    /// A complete call of a known tool was seen.
    ToolCallIdentified(ToolCall),
    /// The review handler decided about a call.
    ToolCallReviewed {
        /// The call.
        call: ToolCall,
        /// The decision.
        decision: ReviewDecision,
    },
    /// A call is about to run.
    ToolStarted(ToolCall),
    /// A call succeeded.
    ToolCompleted {
        /// The call.
        call: ToolCall,
        /// Its result.
        result: ToolResult,
    },
    /// A call failed (error, refusal, timeout, unknown tool, caught panic, rejection).
    ToolFailed {
        /// The call.
        call: ToolCall,
        /// Its result.
        result: ToolResult,
    },
    /// A call's body panicked (before its `ToolFailed`).
    ToolPanicked {
        /// The call.
        call: ToolCall,
        /// The caught panic.
        exception: ToolException,
    },
    /// Some results of a batch are interrupts.
    ToolsInterrupted(Vec<ToolResult>),
    /// The tool message was added.
    ToolMessage(Message),
    /// The failure budget is used up.
    RetriesExceeded,
    /// The run is over: what [`LLMChain::run`] would have returned.
    Finished(Result<RunOutcome, ChainError>),
}

/// Sends every callback as an event. An unbounded channel: callbacks cannot wait, and a
/// run's events are bounded by the run (the model streams join fragments per read).
pub(crate) struct Forward(mpsc::UnboundedSender<ChainEvent>);

impl Forward {
    fn send(&self, e: ChainEvent) {
        // A stream dropped mid-run: nobody listens, and the run goes on.
        let _ = self.0.send(e);
    }
}

impl ChainCallbacks for Forward {
    fn on_llm_new_delta(&self, event: &StreamEvent<'_>) {
        self.send(ChainEvent::Delta(event.clone().into_owned()));
    }
    fn on_llm_new_message(&self, message: &Message) {
        self.send(ChainEvent::ModelMessage(message.clone()));
    }
    fn on_llm_token_usage(&self, usage: &TokenUsage) {
        self.send(ChainEvent::Usage(*usage));
    }
    fn on_llm_response_headers(&self, headers: &Map<String, Value>) {
        self.send(ChainEvent::ResponseHeaders(headers.clone()));
    }
    fn on_llm_error(&self, error: &ModelError) {
        self.send(ChainEvent::ModelFailed(error.clone()));
    }
    fn on_llm_retry(&self, retry: &Retry) {
        self.send(ChainEvent::Retrying(retry.clone()));
    }
    fn on_message_processed(&self, message: &Message) {
        self.send(ChainEvent::MessageProcessed(message.clone()));
    }
    fn on_tool_call_identified(&self, call: &ToolCall) {
        self.send(ChainEvent::ToolCallIdentified(call.clone()));
    }
    fn on_tool_call_review(&self, call: &ToolCall, decision: &ReviewDecision) {
        self.send(ChainEvent::ToolCallReviewed {
            call: call.clone(),
            decision: decision.clone(),
        });
    }
    fn on_tool_execution_started(&self, call: &ToolCall) {
        self.send(ChainEvent::ToolStarted(call.clone()));
    }
    fn on_tool_execution_completed(&self, call: &ToolCall, result: &ToolResult) {
        self.send(ChainEvent::ToolCompleted {
            call: call.clone(),
            result: result.clone(),
        });
    }
    fn on_tool_execution_failed(&self, call: &ToolCall, result: &ToolResult) {
        self.send(ChainEvent::ToolFailed {
            call: call.clone(),
            result: result.clone(),
        });
    }
    fn on_tool_execution_exception(&self, call: &ToolCall, exception: &ToolException) {
        self.send(ChainEvent::ToolPanicked {
            call: call.clone(),
            exception: exception.clone(),
        });
    }
    fn on_tool_interrupted(&self, results: &[ToolResult]) {
        self.send(ChainEvent::ToolsInterrupted(results.to_vec()));
    }
    fn on_tool_response_created(&self, message: &Message) {
        self.send(ChainEvent::ToolMessage(message.clone()));
    }
    fn on_retries_exceeded(&self) {
        self.send(ChainEvent::RetriesExceeded);
    }
}

impl LLMChain {
    /// Runs the chain in `mode` as a `Stream` of [`ChainEvent`]s, ending with
    /// [`ChainEvent::Finished`]; callbacks fire as well. Nothing runs until the stream is
    /// polled; dropping it cancels the run where it is (as dropping `run`'s future does).
    ///
    /// ```
    /// use futures_util::StreamExt;
    /// use llmchain::chain::{ChainEvent, LLMChain, Mode, ScriptedModel};
    /// use llmchain::message::Message;
    /// use llmchain::provider::{Format, render::ResponseScript};
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let model = ScriptedModel::new(Format::OPENAI_CHAT).respond(ResponseScript::text("Hi!")).unwrap();
    /// let mut chain = LLMChain::new(model);
    /// chain.add_message(Message::user("Hello")).await.unwrap();
    /// let mut text = String::new();
    /// let mut events = chain.stream(Mode::Single);
    /// while let Some(event) = events.next().await {
    ///     match event {
    ///         ChainEvent::Delta(llmchain::provider::StreamEvent::TextDelta { text: t, .. }) => text.push_str(&t),
    ///         ChainEvent::Finished(result) => assert!(result.is_ok()),
    ///         _ => {}
    ///     }
    /// }
    /// assert_eq!(text, "Hi!");
    /// # });
    /// ```
    pub fn stream(&mut self, mode: Mode) -> ChainStream<'_> {
        let (tx, rx) = mpsc::unbounded_channel();
        let run = Box::pin(async move {
            self.events = Some(Arc::new(Forward(tx)));
            let r = self.run(mode).await;
            self.events = None;
            r
        });
        let state = Streaming {
            run: Some(run),
            rx,
            finished: None,
        };
        Box::pin(futures_util::stream::unfold(state, |mut st| async move {
            loop {
                if let Ok(e) = st.rx.try_recv() {
                    return Some((e, st));
                }
                if let Some(r) = st.finished.take() {
                    return Some((ChainEvent::Finished(r), st));
                }
                let run = st.run.as_mut()?;
                tokio::select! {
                    biased;
                    Some(e) = st.rx.recv() => return Some((e, st)),
                    r = run => {
                        st.run = None;
                        st.finished = Some(r);
                    }
                }
            }
        }))
    }
}

/// The events of a run ([`LLMChain::stream`]); `Unpin`, so `.next().await` works as is.
pub type ChainStream<'a> = std::pin::Pin<Box<dyn Stream<Item = ChainEvent> + Send + 'a>>;

type RunFuture<'a> =
    std::pin::Pin<Box<dyn Future<Output = Result<RunOutcome, ChainError>> + Send + 'a>>;

struct Streaming<'a> {
    run: Option<RunFuture<'a>>,
    rx: mpsc::UnboundedReceiver<ChainEvent>,
    finished: Option<Result<RunOutcome, ChainError>>,
}

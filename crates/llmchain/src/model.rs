//! [`ChatModel`]: what the chain calls — a conversation in, a stream of events and a
//! final message out.

use std::pin::Pin;
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use serde_json::{Map, Value};

use tokio_util::sync::CancellationToken;

use crate::conversation::Conversation;
use crate::message::Message;
use crate::provider::{DecodeError, DecodeOutcome, EncodeError, StreamEvent};

/// Something a model call reports while it runs.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ModelEvent {
    /// A decoded stream event (text, reasoning, tool-call progress, usage, stop).
    Event(StreamEvent<'static>),
    /// Response headers (rate limits, request ids), reported once per response.
    Headers(Map<String, Value>),
    /// An attempt failed with a retryable error; the next starts after `delay`. Lets a
    /// caller say why nothing arrives (a 100 s `Retry-After` is waited out otherwise in
    /// silence).
    Retrying(Retry),
    /// The call is over: the decoded message. Always the last item of a successful stream.
    Done(Box<DecodeOutcome>),
    /// What the decoder had assembled when the call was cut off, as a `Cancelled`
    /// message: sent just before the error (or [`ModelError::Cancelled`]) that ends the
    /// stream, so a caller keeps what arrived without merging the events itself.
    Partial(Box<Message>),
}

/// A model call about to try again ([`ModelEvent::Retrying`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Retry {
    /// The attempt that failed (1 for the first).
    pub attempt: u32,
    /// The wait before the next attempt (the provider's `Retry-After` when it gave one).
    pub delay: Duration,
    /// Why the attempt failed, for a person (redacted like every error).
    pub reason: String,
}

impl Retry {
    /// A retry after `attempt` failed with `reason`.
    pub fn new(attempt: u32, delay: Duration, reason: impl Into<String>) -> Self {
        Retry {
            attempt,
            delay,
            reason: reason.into(),
        }
    }
}

/// The stream a [`ChatModel`] returns.
pub type ModelStream<'a> = Pin<Box<dyn Stream<Item = Result<ModelEvent, ModelError>> + Send + 'a>>;

/// The class of a provider's failure: by its HTTP status ([`HttpErrorKind::from_status`])
/// or by the error type it wrote in a body ([`HttpErrorKind::from_error_type`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HttpErrorKind {
    /// 400: the request was malformed.
    InvalidRequest,
    /// 401: missing or wrong key.
    Authentication,
    /// 403: the key may not do this.
    PermissionDenied,
    /// 404: unknown model or endpoint.
    NotFound,
    /// 413: the request is too large.
    RequestTooLarge,
    /// 429: rate limited.
    RateLimited,
    /// 500/502/503/504: the server failed.
    Server,
    /// 529 or an `overloaded` error: try later.
    Overloaded,
    /// Anything else.
    Other,
}

impl HttpErrorKind {
    /// The kind of a status code.
    pub fn from_status(status: u16) -> Self {
        match status {
            400 => HttpErrorKind::InvalidRequest,
            401 => HttpErrorKind::Authentication,
            403 => HttpErrorKind::PermissionDenied,
            404 => HttpErrorKind::NotFound,
            413 => HttpErrorKind::RequestTooLarge,
            429 => HttpErrorKind::RateLimited,
            529 => HttpErrorKind::Overloaded,
            500..=599 => HttpErrorKind::Server,
            _ => HttpErrorKind::Other,
        }
    }

    /// The kind of an error type a provider wrote in a response body (Anthropic's
    /// `overloaded_error`, OpenAI's `rate_limit_exceeded`, Gemini's `RESOURCE_EXHAUSTED`,
    /// Bedrock's `throttlingException`…), read once where the error is made.
    pub fn from_error_type(kind: &str) -> Self {
        let k = kind.to_ascii_lowercase();
        let has = |words: &[&str]| words.iter().any(|w| k.contains(w));
        if has(&["overloaded", "unavailable", "capacity"]) {
            HttpErrorKind::Overloaded
        } else if has(&[
            "rate_limit",
            "ratelimit",
            "rate-limit",
            "throttl",
            "resource_exhausted",
            "too_many",
        ]) {
            HttpErrorKind::RateLimited
        } else if has(&[
            "api_error",
            "internal",
            "server_error",
            "servererror",
            "service",
        ]) {
            HttpErrorKind::Server
        } else if has(&["authentication", "unauthenticated", "invalid_api_key"]) {
            HttpErrorKind::Authentication
        } else if has(&["permission", "forbidden", "access_denied", "accessdenied"]) {
            HttpErrorKind::PermissionDenied
        } else if has(&["not_found", "notfound"]) {
            HttpErrorKind::NotFound
        } else if has(&["too_large", "toolarge"]) {
            HttpErrorKind::RequestTooLarge
        } else if has(&["invalid", "validation", "bad_request"]) {
            HttpErrorKind::InvalidRequest
        } else {
            HttpErrorKind::Other
        }
    }

    /// Worth retrying the same request.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            HttpErrorKind::RateLimited | HttpErrorKind::Server | HttpErrorKind::Overloaded
        )
    }
}

/// The error under a [`ModelError`] (the HTTP transport's), kept so that
/// `std::error::Error::source` walks to it. Errors compare by what they say: any two
/// causes are equal, so a `ModelError` still compares by its fields.
#[derive(Clone)]
pub struct Cause(std::sync::Arc<dyn std::error::Error + Send + Sync>);

impl Cause {
    /// Wraps `error`.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Cause(std::sync::Arc::new(error))
    }

    /// The error, to downcast (`cause.get().downcast_ref::<reqwest::Error>()`).
    pub fn get(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self.0.as_ref()
    }
}

impl std::fmt::Debug for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.0, f)
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for Cause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for Cause {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// Why a model call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The provider answered with an HTTP error.
    #[error("{provider} returned HTTP {status}: {message}")]
    Http {
        /// Provider name.
        provider: String,
        /// Status code.
        status: u16,
        /// Class of the failure.
        kind: HttpErrorKind,
        /// The provider's own message.
        message: String,
        /// `Retry-After`, when given.
        retry_after: Option<Duration>,
    },
    /// The provider could not be reached.
    #[error("could not reach {provider} at {url}: {message}")]
    Connect {
        /// Provider name.
        provider: String,
        /// The URL tried (never with a key).
        url: String,
        /// What went wrong.
        message: String,
        /// The transport's own error (without its URL), to downcast (its text is in the
        /// message: not repeated as `source()`).
        cause: Option<Cause>,
    },
    /// No answer in time.
    #[error("{provider} did not answer within {after:?}")]
    Timeout {
        /// Provider name.
        provider: String,
        /// The limit.
        after: Duration,
    },
    /// A limit ended the response: its overall deadline or its size cap. What arrived
    /// is kept by the chain as a cancelled message; its calls never run. Not retried.
    #[error("{provider}: {message}")]
    Limit {
        /// Provider name.
        provider: String,
        /// Which limit, and how to raise it.
        message: String,
    },
    /// The stream stopped before the provider said it was done.
    #[error("the response stream from {provider} ended early: {message}")]
    StreamInterrupted {
        /// Provider name.
        provider: String,
        /// What happened.
        message: String,
        /// The transport's own error, when one broke the stream, to downcast (its text is
        /// in the message: not repeated as `source()`).
        cause: Option<Cause>,
    },
    /// The provider reported an error inside a 200 response.
    #[error("{provider} reported {error_type}: {message}")]
    Provider {
        /// Provider name.
        provider: String,
        /// The error's class, read from its type ([`HttpErrorKind::from_error_type`]).
        kind: HttpErrorKind,
        /// The provider's own error type, as written (e.g. `overloaded_error`).
        error_type: String,
        /// Message.
        message: String,
    },
    /// The response could not be decoded.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// The request could not be encoded.
    #[error(transparent)]
    Encode(#[from] EncodeError),
    /// Missing or wrong configuration: a key, a base URL, a scripted model's turns
    /// (`test-util`: it ran out of them, or one cannot be rendered in its format).
    #[error("{0}")]
    Config(String),
    /// Credentials could not be read or turned into a token: an AWS credentials file, a
    /// Google service-account key, application default credentials, a token endpoint.
    /// `cause` holds what failed underneath (an I/O error, `gcp_auth`'s), to downcast;
    /// its text is in the message.
    #[error("{message}")]
    Credentials {
        /// What failed and how to fix it.
        message: String,
        /// The error underneath, when there is one.
        cause: Option<Cause>,
    },
    /// The call was cancelled.
    #[error("the model call was cancelled")]
    Cancelled,
}

impl ModelError {
    /// The class of this failure as the telemetry's `error.type` names it (a short,
    /// fixed set: `http`, `connect`, `timeout`…).
    pub fn error_type(&self) -> &'static str {
        match self {
            ModelError::Http { .. } => "http",
            ModelError::Connect { .. } => "connect",
            ModelError::Timeout { .. } => "timeout",
            ModelError::Limit { .. } => "limit",
            ModelError::StreamInterrupted { .. } => "stream_interrupted",
            ModelError::Provider { .. } => "provider",
            ModelError::Decode(_) => "decode",
            ModelError::Encode(_) => "encode",
            ModelError::Config(_) => "config",
            ModelError::Credentials { .. } => "credentials",
            ModelError::Cancelled => "cancelled",
        }
    }

    /// Worth retrying the same request with the same model.
    pub fn is_retryable(&self) -> bool {
        match self {
            ModelError::Http { kind, .. } => kind.is_retryable(),
            ModelError::Connect { .. }
            | ModelError::Timeout { .. }
            | ModelError::StreamInterrupted { .. } => true,
            ModelError::Provider { kind, .. } => kind.is_retryable(),
            _ => false,
        }
    }

    /// Worth trying the next fallback model: anything but a cancellation.
    pub fn retry_on_fallback(&self) -> bool {
        !matches!(self, ModelError::Cancelled)
    }
}

/// What the telemetry says of a model's requests (the `chat` span's `server.address`,
/// `server.port`, `gen_ai.request.max_tokens`, `gen_ai.request.temperature`): what a
/// model knows of them; nothing by default.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct RequestInfo {
    /// The host the requests go to.
    pub server_address: Option<String>,
    /// Its port.
    pub server_port: Option<u16>,
    /// The most tokens a request asks for.
    pub max_tokens: Option<u32>,
    /// The sampling temperature a request sets.
    pub temperature: Option<f64>,
}

/// A chat model: takes a conversation (system prompt, tool definitions, messages) and
/// returns a stream of [`ModelEvent`]s ending with [`ModelEvent::Done`].
///
/// Streaming and non-streaming models look the same to the chain; a non-streaming model
/// yields only `Done`. Dropping the stream cancels the call.
pub trait ChatModel: Send + Sync {
    /// The model id (e.g. `gpt-4.1`), for logs and tracing.
    fn model_name(&self) -> &str;

    /// The provider name (e.g. `openai`), for logs and errors.
    fn provider_name(&self) -> &str;

    /// The provider as the GenAI conventions name it (`gen_ai.provider.name`: `openai`,
    /// `aws.bedrock`, `gcp.vertex_ai`…). By default [`provider_name`](Self::provider_name).
    fn genai_provider_name(&self) -> &str {
        self.provider_name()
    }

    /// Starts a call.
    fn stream<'a>(&'a self, conversation: &'a Conversation) -> ModelStream<'a>;

    /// What the telemetry says of this model's requests (see [`RequestInfo`]).
    fn request_info(&self) -> RequestInfo {
        RequestInfo::default()
    }

    /// Starts a call that stops when `cancel` fires: the stream then ends with
    /// [`ModelError::Cancelled`], after a [`ModelEvent::Partial`] holding what arrived.
    /// A model that decodes a stream should override this to send that partial (its
    /// decoder's [`interrupt`](crate::provider::StreamDecoder::interrupt)), and send one
    /// before any error that cuts a stream off; the default stops [`stream`](Self::stream)
    /// with no partial.
    fn stream_until<'a>(
        &'a self,
        conversation: &'a Conversation,
        cancel: CancellationToken,
    ) -> ModelStream<'a> {
        let inner = self.stream(conversation);
        Box::pin(futures_util::stream::unfold(
            Some((inner, cancel)),
            |state| async move {
                let (mut inner, cancel) = state?;
                tokio::select! {
                    biased;
                    _ = cancel.cancelled() => Some((Err(ModelError::Cancelled), None)),
                    next = inner.next() => next.map(|item| (item, Some((inner, cancel)))),
                }
            },
        ))
    }
}

/// A shared model is a model: `LLMChain::new(Arc::new(model))` and
/// `LLMChain::new(model)` both work, and an `Arc<dyn ChatModel>` passes as it is.
impl<M: ChatModel + ?Sized> ChatModel for std::sync::Arc<M> {
    fn model_name(&self) -> &str {
        (**self).model_name()
    }

    fn provider_name(&self) -> &str {
        (**self).provider_name()
    }

    fn genai_provider_name(&self) -> &str {
        (**self).genai_provider_name()
    }

    fn stream<'a>(&'a self, conversation: &'a Conversation) -> ModelStream<'a> {
        (**self).stream(conversation)
    }

    fn request_info(&self) -> RequestInfo {
        (**self).request_info()
    }

    fn stream_until<'a>(
        &'a self,
        conversation: &'a Conversation,
        cancel: CancellationToken,
    ) -> ModelStream<'a> {
        (**self).stream_until(conversation, cancel)
    }
}

/// Drives a model stream to its end, passing every event to `on_event`.
pub async fn collect_stream(
    mut stream: ModelStream<'_>,
    mut on_event: impl FnMut(&ModelEvent),
) -> Result<DecodeOutcome, ModelError> {
    while let Some(item) = stream.next().await {
        let event = item?;
        if let ModelEvent::Done(outcome) = event {
            return Ok(*outcome);
        }
        on_event(&event);
    }
    Err(ModelError::StreamInterrupted {
        provider: "model".into(),
        message: "the stream ended without a final message".into(),
        cause: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_types_in_bodies_are_classed_once_and_retried_by_class() {
        let cases = [
            ("overloaded_error", HttpErrorKind::Overloaded),
            ("rate_limit_exceeded", HttpErrorKind::RateLimited),
            ("RESOURCE_EXHAUSTED", HttpErrorKind::RateLimited),
            ("throttlingException", HttpErrorKind::RateLimited),
            ("api_error", HttpErrorKind::Server),
            ("internalServerException", HttpErrorKind::Server),
            ("authentication_error", HttpErrorKind::Authentication),
            ("permission_error", HttpErrorKind::PermissionDenied),
            ("not_found_error", HttpErrorKind::NotFound),
            ("request_too_large", HttpErrorKind::RequestTooLarge),
            ("invalid_request_error", HttpErrorKind::InvalidRequest),
            ("validationException", HttpErrorKind::InvalidRequest),
            ("something_new", HttpErrorKind::Other),
        ];
        for (error_type, kind) in cases {
            assert_eq!(
                HttpErrorKind::from_error_type(error_type),
                kind,
                "{error_type}"
            );
            let e = ModelError::Provider {
                provider: "p".into(),
                kind,
                error_type: error_type.into(),
                message: "m".into(),
            };
            assert_eq!(e.is_retryable(), kind.is_retryable(), "{error_type}");
            assert_eq!(e.to_string(), format!("p reported {error_type}: m"));
        }
    }
}

//! HTTP clients: one [`ChatModel`](crate::model::ChatModel) for every format, over reqwest
//! on rustls (feature `http`, on by default).
//!
//! [`HttpModel`] encodes the conversation with the format's codec, sends it to the
//! format's endpoint with its auth headers, and decodes the answer with the same codec:
//! streamed bytes go through [`Codec::stream_decoder`](crate::provider::Codec::stream_decoder)
//! as they arrive, so each decoded event reaches the caller as soon as its bytes do.
//!
//! | format | endpoint | auth |
//! |---|---|---|
//! | OpenAI Chat | `{base}/chat/completions` (base ends in `/v1`) | `Authorization: Bearer` |
//! | OpenAI Responses | `{base}/responses` | `Authorization: Bearer` |
//! | Anthropic | `{base}/v1/messages` | `x-api-key`, `anthropic-version` |
//! | Gemini | `{base}/v1beta/models/{model}:streamGenerateContent?alt=sse` / `:generateContent` | `x-goog-api-key` |
//! | Ollama | `{base}/api/chat` | none |
//!
//! ## Failures
//!
//! - An HTTP error becomes [`ModelError::Http`](crate::model::ModelError::Http) with the
//!   provider's own message read from its error body and `Retry-After`.
//! - 429, 5xx, 529/overloaded, connect errors and timeouts before the response are retried
//!   inside one [`ChatModel::stream`](crate::model::ChatModel::stream) call, with jittered
//!   exponential backoff, honouring `Retry-After`, under [`RetryPolicy::total_deadline`].
//! - **A stream that stops mid-way** (connection dropped, idle timeout, or a body that
//!   ends without the provider's end marker) is retried only if no
//!   [`ModelEvent::Event`](crate::model::ModelEvent::Event) was emitted yet: once the
//!   caller has seen text or call fragments, replaying the request could duplicate what
//!   it showed. Otherwise the stream ends with
//!   [`ModelError::StreamInterrupted`](crate::model::ModelError::StreamInterrupted). The
//!   chain turns that into a `Cancelled` assistant message built from the events it saw
//!   (its calls are incomplete and never run) and then tries its fallback models; a
//!   caller that wants to retry the same model can — the error is `is_retryable()`.
//! - The key is held in an [`ApiKey`], whose `Debug` prints `[redacted]`; it is sent only
//!   in a header marked sensitive; an error message that echoes it has it cut out; URLs
//!   never carry it (Gemini gets `x-goog-api-key`, not `?key=`).

mod client;
mod config;
mod endpoint;
mod error_body;

pub use client::HttpModel;
pub use config::{
    ApiKey, DEFAULT_MAX_RESPONSE_BYTES, HttpModelConfig, RetryPolicy, Timeouts, base_url_env_var,
    default_base_url, key_env_vars, provider_name,
};
pub use error_body::{provider_message, reported_headers, retry_after};

//! HTTP clients: one [`ChatModel`](crate::model::ChatModel) for every format, over reqwest
//! on rustls (feature `http`, on by default).
//!
//! [`HttpModel`] encodes the conversation with the format's codec, sends it to the
//! format's endpoint with its auth headers, and decodes the answer with the same codec:
//! streamed bytes go through [`Codec::stream_decoder`](crate::provider::Codec::stream_decoder)
//! as they arrive, so each decoded event reaches the caller as soon as its bytes do.
//!
//! Each provider is one [`providers::Provider`] in
//! [`providers::PROVIDERS`]: its codec, the route of a request for a model, its auth
//! (a key header, request signing, cached tokens: [`Auth`]), its headers, default model
//! and the environment variables it reads. [`HttpModel`] holds no `match` over them.
//!
//! | provider | endpoint | auth |
//! |---|---|---|
//! | `openai` (and Mistral, DeepSeek, Groq, xAI, OpenRouter, Together) | `{base}/chat/completions` (base ends in `/v1`) | `Authorization: Bearer` |
//! | `openai_responses` | `{base}/responses` | `Authorization: Bearer` |
//! | `anthropic` | `{base}/v1/messages` | `x-api-key`, `anthropic-version` |
//! | `gemini` | `{base}/v1beta/models/{model}:streamGenerateContent?alt=sse` / `:generateContent` | `x-goog-api-key` |
//! | `ollama` | `{base}/api/chat` | none |
//! | `bedrock` (feature `bedrock`) | `https://bedrock-runtime.{region}.amazonaws.com/model/{model}/converse-stream` / `/converse` | SigV4, or a Bedrock API key as a bearer token |
//! | `vertex` (feature `vertex`) | `https://{location}-aiplatform.googleapis.com/v1/projects/{project}/locations/{location}/publishers/google/models/{model}:streamGenerateContent?alt=sse`; express mode `https://aiplatform.googleapis.com/v1/publishers/google/models/{model}:…` | a Google OAuth token (service account, application default credentials), or `x-goog-api-key` in express mode |
//! | `vertex-anthropic` (feature `vertex`) | `…/publishers/anthropic/models/{model}:streamRawPredict` / `:rawPredict` | a Google OAuth token |
//! | `azure`, `azure_responses` | `https://{resource}.openai.azure.com/openai/v1/chat/completions` (or `/responses`); with an API version `/openai/deployments/{model}/chat/completions?api-version=` | `api-key`, or an Entra ID bearer token |
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

mod auth;
#[cfg(feature = "bedrock")]
pub mod aws;
pub mod azure;
mod client;
mod config;
mod endpoint;
mod error_body;
pub mod providers;
#[cfg(feature = "vertex")]
pub mod vertex;

/// The HTTP client crate, re-exported for [`Auth`] implementations (which sign a
/// `reqwest::Request`) to name the same version.
pub use reqwest;

pub use auth::{Auth, AuthFuture, BearerTokens, KeyHeader, Token, TokenFuture, TokenSource};
pub use client::HttpModel;
pub use config::{ApiKey, DEFAULT_MAX_RESPONSE_BYTES, HttpModelConfig, RetryPolicy, Timeouts};
pub use error_body::{provider_message, reported_headers, retry_after};
pub use providers::{Provider, provider};

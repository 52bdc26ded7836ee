//! Provider wire formats: pure codecs (no I/O) for each format.
//!
//! Each format has a request encoder ([`Codec::encode`]), a streaming decoder fed
//! arbitrary byte chunks ([`Codec::stream_decoder`]) and a non-streaming decoder
//! ([`Codec::decode_response`]). Decoding never depends on how bytes are chunked.

mod anthropic;
mod assembly;
mod bedrock;
#[cfg(feature = "test-util")]
pub mod conformance;
mod encoding;
mod error;
mod event;
mod format;
mod framed;
pub mod framing;
mod gemini;
mod ollama;
pub mod openai_chat;
pub mod openai_responses;
mod outcome;
mod placement;
pub mod preview;
mod registry;
#[cfg(feature = "test-util")]
pub mod render;
mod scan;
pub(crate) mod wire;

pub use anthropic::{AnthropicCodec, DEFAULT_MAX_TOKENS};
pub use assembly::{SYNTHESIZED_ID_KEY, SYNTHETIC_CALL_ID, THOUGHT_SIGNATURE_KEY};
pub use bedrock::BedrockCodec;
pub use error::{DecodeError, EncodeError};
pub use event::{EventBatch, StopReason, StreamEvent};
#[cfg(feature = "test-util")]
pub use format::RenderFn;
pub use format::{
    Codec, DecoderConfig, Format, FormatSpec, Framing, RequestOptions, StreamDecoder,
};
pub use gemini::{GeminiCodec, gemini_schema};
pub use ollama::OllamaCodec;
pub use outcome::{
    DecodeOutcome, DecodeReport, ProviderError, ReportIncompleteCall, ReportToolCall,
};
pub use placement::unsent_in_user_message;
pub use registry::{FormatTaken, UnknownFormat};

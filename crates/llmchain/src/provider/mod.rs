//! Provider wire formats: pure codecs (no I/O) for each format.
//!
//! Each format has a request encoder ([`Codec::encode`]), a streaming decoder fed
//! arbitrary byte chunks ([`Codec::stream_decoder`]) and a non-streaming decoder
//! ([`Codec::decode_response`]). Decoding never depends on how bytes are chunked.

mod anthropic;
pub mod assemble;
mod assembly;
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
pub mod wire;

pub use anthropic::{AnthropicCodec, DEFAULT_MAX_TOKENS};
pub use assembly::{SYNTHESIZED_ID_KEY, THOUGHT_SIGNATURE_KEY};
pub use error::{DecodeError, EncodeError};
pub use event::{StopReason, StreamEvent};
pub use format::{Codec, DecoderConfig, Format, RequestOptions, StreamDecoder};
pub use gemini::{GeminiCodec, gemini_schema};
pub use ollama::OllamaCodec;
pub use outcome::{
    DecodeOutcome, DecodeReport, ProviderError, ReportIncompleteCall, ReportToolCall,
};

/// The codec of a format, or `None` while that format has no codec in this build.
///
/// One line per format: each codec registers itself here.
pub fn codec(format: Format) -> Option<&'static dyn Codec> {
    match format {
        Format::OpenAiChat => Some(&openai_chat::OpenAiChatCodec),
        Format::OpenAiResponses => Some(&openai_responses::OpenAiResponsesCodec),
        Format::Anthropic => Some(&AnthropicCodec),
        Format::Gemini => Some(&GeminiCodec),
        Format::Ollama => Some(&OllamaCodec),
    }
}

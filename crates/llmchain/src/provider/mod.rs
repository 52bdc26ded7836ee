//! Provider wire formats: pure codecs (no I/O) for each format.
//!
//! Each format has a request encoder ([`Codec::encode`]), a streaming decoder fed
//! arbitrary byte chunks ([`Codec::stream_decoder`]) and a non-streaming decoder
//! ([`Codec::decode_response`]). Decoding never depends on how bytes are chunked.

pub mod assemble;
mod error;
mod event;
mod format;
pub mod framing;
pub mod openai_chat;
pub mod openai_responses;
mod outcome;
pub mod render;
pub mod wire;

pub use error::{DecodeError, EncodeError};
pub use event::{StopReason, StreamEvent};
pub use format::{Codec, DecoderConfig, Format, RequestOptions, StreamDecoder};
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
        Format::Anthropic => None,
        Format::Gemini => None,
        Format::Ollama => None,
    }
}

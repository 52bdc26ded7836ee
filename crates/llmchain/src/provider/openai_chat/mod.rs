//! OpenAI Chat Completions (`POST /v1/chat/completions`), also Mistral, DeepSeek, vLLM,
//! llama.cpp, OpenRouter, LiteLLM and other compatible servers.

mod chunk;
mod decode;
mod encode;

pub use decode::decode_response;
pub(crate) use encode::{
    ArgumentsText, OPENAI_IMAGES, UrlOrData, joined_text, mode_str, part_url, result_text,
    tool_parameters,
};
pub use encode::{encode, strict_schema};

use crate::conversation::Conversation;
use crate::provider::FormatSpec;
use crate::provider::{
    Codec, DecodeError, DecodeOutcome, DecoderConfig, EncodeError, Format, RequestOptions,
    StreamDecoder,
};

/// The OpenAI Chat Completions codec.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenAiChatCodec;

/// The format's name, written once.
const NAME: &str = "openai_chat";

/// The format's descriptor (its line in the registry: `provider/registry.rs`).
static FORMAT: FormatSpec = spec();

const fn spec() -> FormatSpec {
    let spec = FormatSpec::new(NAME, "OpenAI Chat", &OpenAiChatCodec).aliases(&["openai", "chat"]);
    #[cfg(feature = "test-util")]
    let spec = spec.renderer(super::render::openai_chat);
    spec
}

impl Format {
    /// OpenAI Chat.
    pub const OPENAI_CHAT: Format = Format::new(&FORMAT);
}

impl Codec for OpenAiChatCodec {
    fn format(&self) -> Format {
        Format::OPENAI_CHAT
    }

    fn encode(&self, conv: &Conversation, opts: &RequestOptions) -> Result<Vec<u8>, EncodeError> {
        encode::encode(conv, opts)
    }

    fn stream_decoder(&self, config: DecoderConfig) -> Box<dyn StreamDecoder> {
        Box::new(decode::stream_decoder(config))
    }

    fn decode_response(
        &self,
        body: &[u8],
        config: DecoderConfig,
    ) -> Result<DecodeOutcome, DecodeError> {
        decode::decode_response(body, config)
    }
}

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
use crate::provider::{
    Codec, DecodeError, DecodeOutcome, DecoderConfig, EncodeError, Format, RequestOptions,
    StreamDecoder,
};

/// The OpenAI Chat Completions codec.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenAiChatCodec;

impl Codec for OpenAiChatCodec {
    fn format(&self) -> Format {
        Format::OpenAiChat
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

//! OpenAI Responses (`POST /v1/responses`).

mod decode;
mod encode;

pub use decode::decode_response;
pub use encode::encode;

use crate::conversation::Conversation;
use crate::provider::{
    Codec, DecodeError, DecodeOutcome, DecoderConfig, EncodeError, Format, RequestOptions,
    StreamDecoder,
};

/// The OpenAI Responses codec.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenAiResponsesCodec;

impl Codec for OpenAiResponsesCodec {
    fn format(&self) -> Format {
        Format::OpenAiResponses
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

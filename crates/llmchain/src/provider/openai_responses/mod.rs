//! OpenAI Responses (`POST /v1/responses`).

mod decode;
mod encode;

pub use decode::decode_response;
pub use encode::encode;

use crate::conversation::Conversation;
use crate::provider::FormatSpec;
use crate::provider::{
    Codec, DecodeError, DecodeOutcome, DecoderConfig, EncodeError, Format, RequestOptions,
    StreamDecoder,
};

/// The OpenAI Responses codec.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenAiResponsesCodec;

/// The format's name, written once.
const NAME: &str = "openai_responses";

/// The format's descriptor (its line in the registry: `provider/registry.rs`).
static FORMAT: FormatSpec = spec();

const fn spec() -> FormatSpec {
    let spec =
        FormatSpec::new(NAME, "OpenAI Responses", &OpenAiResponsesCodec).aliases(&["responses"]);
    #[cfg(feature = "test-util")]
    let spec = spec.renderer(super::render::openai_responses);
    spec
}

impl Format {
    /// OpenAI Responses.
    pub const OPENAI_RESPONSES: Format = Format::new(&FORMAT);
}

impl Codec for OpenAiResponsesCodec {
    fn format(&self) -> Format {
        Format::OPENAI_RESPONSES
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

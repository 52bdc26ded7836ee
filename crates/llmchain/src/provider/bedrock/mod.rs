//! The Bedrock Converse codec (`POST /model/{modelId}/converse` and
//! `/converse-stream`): request encoder, event-stream decoder (AWS's binary framing,
//! [`EventStreamFramer`](super::framing::EventStreamFramer)) and Converse response
//! decoder.

mod decode;
mod encode;

use super::error::{DecodeError, EncodeError};
use super::format::{Codec, DecoderConfig, Format, RequestOptions, StreamDecoder};
use super::outcome::DecodeOutcome;
use crate::conversation::Conversation;
use crate::provider::{FormatSpec, Framing};

/// The Bedrock Converse codec.
///
/// ```
/// use llmchain::provider::{BedrockCodec, Codec, DecoderConfig};
/// let body = br#"{"output":{"message":{"role":"assistant","content":[{"toolUse":{"toolUseId":"tooluse_1","name":"get_weather","input":{"city":"Tokyo"}}}]}},"stopReason":"tool_use","usage":{"inputTokens":12,"outputTokens":7,"totalTokens":19}}"#;
/// let out = BedrockCodec.decode_response(body, DecoderConfig::default()).unwrap();
/// assert_eq!(out.message.tool_calls[0].arguments_as_map()["city"], "Tokyo");
/// assert_eq!(out.stop_reason, Some(llmchain::provider::StopReason::ToolCalls));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct BedrockCodec;

/// The format's name, written once.
const NAME: &str = "bedrock_converse";

/// The format's descriptor (its line in the registry: `provider/registry.rs`).
static FORMAT: FormatSpec = spec();

const fn spec() -> FormatSpec {
    let spec = FormatSpec::new(NAME, "Bedrock Converse", &BedrockCodec)
        .aliases(&["bedrock", "converse"])
        .framing(Framing::EventStream);
    #[cfg(feature = "test-util")]
    let spec = spec.renderer(super::render::bedrock);
    spec
}

impl Format {
    /// Bedrock Converse.
    pub const BEDROCK_CONVERSE: Format = Format::new(&FORMAT);
}

impl Codec for BedrockCodec {
    fn format(&self) -> Format {
        Format::BEDROCK_CONVERSE
    }

    fn encode(&self, conv: &Conversation, opts: &RequestOptions) -> Result<Vec<u8>, EncodeError> {
        encode::encode(conv, opts)
    }

    /// Event-stream frames, unless the body is one JSON document.
    fn stream_decoder(&self, config: DecoderConfig) -> Box<dyn StreamDecoder> {
        Box::new(decode::StreamDec::new(config))
    }

    fn decode_response(
        &self,
        body: &[u8],
        config: DecoderConfig,
    ) -> Result<DecodeOutcome, DecodeError> {
        decode::decode_whole(body, config, &mut |_| {})
    }
}

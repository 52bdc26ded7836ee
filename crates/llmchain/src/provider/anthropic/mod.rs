//! The Anthropic Messages codec (`POST /v1/messages`): request encoder, SSE stream
//! decoder and whole-response decoder.

mod decode;
mod encode;

pub use encode::DEFAULT_MAX_TOKENS;

use super::assembly::Emit;
use super::error::{DecodeError, EncodeError};
use super::format::{Codec, DecoderConfig, Format, RequestOptions, StreamDecoder};
use super::framed::SseDecoder;
use super::outcome::DecodeOutcome;
use crate::conversation::Conversation;
use crate::provider::FormatSpec;

/// The Anthropic Messages codec.
///
/// ```
/// use llmchain::provider::{AnthropicCodec, Codec, DecoderConfig};
/// let body = br#"{"type":"message","content":[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}],"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":5}}"#;
/// let out = AnthropicCodec.decode_response(body, DecoderConfig::default()).unwrap();
/// assert_eq!(out.message.tool_calls[0].arguments_as_map()["city"], "Paris");
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct AnthropicCodec;

/// The format's name, written once.
const NAME: &str = "anthropic";

/// The format's descriptor (its line in the registry: `provider/registry.rs`).
static FORMAT: FormatSpec = spec();

const fn spec() -> FormatSpec {
    let spec = FormatSpec::new(NAME, "Anthropic", &AnthropicCodec);
    #[cfg(feature = "test-util")]
    let spec = spec.renderer(super::render::anthropic);
    spec
}

impl Format {
    /// Anthropic.
    pub const ANTHROPIC: Format = Format::new(&FORMAT);
}

impl Codec for AnthropicCodec {
    fn format(&self) -> Format {
        Format::ANTHROPIC
    }

    fn encode(&self, conv: &Conversation, opts: &RequestOptions) -> Result<Vec<u8>, EncodeError> {
        encode::encode(conv, opts)
    }

    fn stream_decoder(&self, config: DecoderConfig) -> Box<dyn StreamDecoder> {
        Box::new(SseDecoder::new(NAME, decode::Events::new(config), config))
    }

    fn decode_response(
        &self,
        body: &[u8],
        config: DecoderConfig,
    ) -> Result<DecodeOutcome, DecodeError> {
        let mut sink = |_: super::StreamEvent<'_>| {};
        let emit: Emit<'_> = &mut sink;
        decode::decode_whole(body, config, emit)
    }
}

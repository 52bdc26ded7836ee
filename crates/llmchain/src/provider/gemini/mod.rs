//! The Gemini codec (`generateContent`, `streamGenerateContent?alt=sse`): request
//! encoder with the schema rewrite, SSE stream decoder and whole-response decoder.

mod decode;
mod encode;
mod schema;

pub use schema::gemini_schema;

use super::assembly::Emit;
use super::error::{DecodeError, EncodeError};
use super::format::{Codec, DecoderConfig, Format, RequestOptions, StreamDecoder};
use super::framed::SseDecoder;
use super::outcome::DecodeOutcome;
use crate::conversation::Conversation;
use crate::provider::FormatSpec;

/// The Gemini codec. Calls without ids get synthesised ones (see the decoder docs:
/// `call_<hash of responseId>_<n>`, marked `metadata.synthesized_id`).
///
/// ```
/// use llmchain::provider::{Codec, DecoderConfig, GeminiCodec};
/// let body = br#"{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"Paris"}}}]},"finishReason":"STOP"}],"responseId":"r1"}"#;
/// let out = GeminiCodec.decode_response(body, DecoderConfig::default()).unwrap();
/// let call = &out.message.tool_calls[0];
/// assert!(call.call_id.as_deref().unwrap().starts_with("call_"));
/// assert_eq!(call.arguments_as_map()["city"], "Paris");
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct GeminiCodec;

/// The format's name, written once.
const NAME: &str = "gemini";

/// The format's descriptor (its line in the registry: `provider/registry.rs`).
static FORMAT: FormatSpec = spec();

const fn spec() -> FormatSpec {
    let spec = FormatSpec::new(NAME, "Gemini", &GeminiCodec).aliases(&["google"]);
    #[cfg(feature = "test-util")]
    let spec = spec.renderer(super::render::gemini);
    spec
}

impl Format {
    /// Gemini.
    pub const GEMINI: Format = Format::new(&FORMAT);
}

impl Codec for GeminiCodec {
    fn format(&self) -> Format {
        Format::GEMINI
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

//! The Ollama codec (`POST /api/chat`): request encoder, NDJSON stream decoder and
//! whole-response decoder.

mod decode;
mod encode;

use super::assembly::Emit;
use super::error::{DecodeError, EncodeError};
use super::format::{Codec, DecoderConfig, Format, RequestOptions, StreamDecoder};
use super::framed::NdjsonDecoder;
use super::outcome::DecodeOutcome;
use crate::conversation::Conversation;
use crate::provider::{FormatSpec, Framing};

/// The Ollama native chat codec. Calls without ids get synthesised ones
/// (`call_<hash of created_at>_<n>`, marked `metadata.synthesized_id`).
///
/// ```
/// use llmchain::provider::{Codec, DecoderConfig, OllamaCodec};
/// let body = br#"{"model":"qwen3","created_at":"2025-01-01T00:00:00Z","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"get_weather","arguments":{"city":"Tokyo"}}}]},"done":true,"done_reason":"stop","prompt_eval_count":12,"eval_count":7}"#;
/// let out = OllamaCodec.decode_response(body, DecoderConfig::default()).unwrap();
/// assert_eq!(out.message.tool_calls[0].arguments_as_map()["city"], "Tokyo");
/// assert_eq!(out.stop_reason, Some(llmchain::provider::StopReason::ToolCalls));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct OllamaCodec;

/// The format's name, written once.
const NAME: &str = "ollama";

/// The format's descriptor (its line in the registry: `provider/registry.rs`).
static FORMAT: FormatSpec = spec();

const fn spec() -> FormatSpec {
    let spec = FormatSpec::new(NAME, "Ollama", &OllamaCodec).framing(Framing::Ndjson);
    #[cfg(feature = "test-util")]
    let spec = spec.renderer(super::render::ollama);
    spec
}

impl Format {
    /// Ollama.
    pub const OLLAMA: Format = Format::new(&FORMAT);
}

impl Codec for OllamaCodec {
    fn format(&self) -> Format {
        Format::OLLAMA
    }

    fn encode(&self, conv: &Conversation, opts: &RequestOptions) -> Result<Vec<u8>, EncodeError> {
        encode::encode(conv, opts)
    }

    /// NDJSON: a body is a stream unless it is one JSON document.
    fn stream_decoder(&self, config: DecoderConfig) -> Box<dyn StreamDecoder> {
        Box::new(NdjsonDecoder::new(
            NAME,
            decode::Events::new(config),
            config,
        ))
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

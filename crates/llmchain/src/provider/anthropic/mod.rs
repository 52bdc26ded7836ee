//! The Anthropic Messages codec (`POST /v1/messages`): request encoder, SSE stream
//! decoder and whole-response decoder.

mod decode;
mod encode;
#[cfg(feature = "test-util")]
mod render;

pub use encode::DEFAULT_MAX_TOKENS;

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

built_in_format! {
    /// Anthropic.
    const ANTHROPIC = AnthropicCodec {
        name: "anthropic",
        title: "Anthropic",
        aliases: [],
        framing: Sse,
    }
}

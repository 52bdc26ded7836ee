//! The Ollama codec (`POST /api/chat`): request encoder, NDJSON stream decoder and
//! whole-response decoder.

mod decode;
mod encode;
#[cfg(feature = "test-util")]
mod render;

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

built_in_format! {
    /// Ollama.
    const OLLAMA = OllamaCodec {
        name: "ollama",
        title: "Ollama",
        aliases: [],
        framing: Ndjson,
    }
}

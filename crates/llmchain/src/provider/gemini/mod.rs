//! The Gemini codec (`generateContent`, `streamGenerateContent?alt=sse`): request
//! encoder with the schema rewrite, SSE stream decoder and whole-response decoder.

mod decode;
mod encode;
#[cfg(feature = "test-util")]
mod render;
mod schema;

pub use schema::{SchemaTooLarge, gemini_schema};

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

built_in_format! {
    /// Gemini.
    const GEMINI = GeminiCodec {
        name: "gemini",
        title: "Gemini",
        aliases: ["google"],
        framing: Sse,
    }
}

//! The Bedrock Converse codec (`POST /model/{modelId}/converse` and
//! `/converse-stream`): request encoder, event-stream decoder (AWS's binary framing,
//! [`EventStreamFramer`](super::framing::EventStreamFramer)) and Converse response
//! decoder.

mod decode;
mod encode;
#[cfg(feature = "test-util")]
mod render;

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

built_in_format! {
    /// Bedrock Converse.
    const BEDROCK_CONVERSE = BedrockCodec {
        name: "bedrock_converse",
        title: "Bedrock Converse",
        aliases: ["bedrock", "converse"],
        framing: EventStream,
    }
}

//! OpenAI Responses (`POST /v1/responses`).

mod decode;
mod encode;
#[cfg(feature = "test-util")]
mod render;

pub use decode::decode_response;
pub use encode::encode;

/// The OpenAI Responses codec.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenAiResponsesCodec;

built_in_format! {
    /// OpenAI Responses.
    const OPENAI_RESPONSES = OpenAiResponsesCodec {
        name: "openai_responses",
        title: "OpenAI Responses",
        aliases: ["responses"],
        framing: Sse,
    }
}

//! OpenAI Chat Completions (`POST /v1/chat/completions`), also Mistral, DeepSeek, vLLM,
//! llama.cpp, OpenRouter, LiteLLM and other compatible servers.

mod chunk;
mod decode;
mod encode;
#[cfg(feature = "test-util")]
mod render;

pub use decode::decode_response;
pub(crate) use encode::{
    ArgumentsText, OPENAI_IMAGES, UrlOrData, joined_text, mode_str, part_url, result_text,
    tool_parameters,
};
pub use encode::{encode, strict_schema};

/// The OpenAI Chat Completions codec.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenAiChatCodec;

built_in_format! {
    /// OpenAI Chat.
    const OPENAI_CHAT = OpenAiChatCodec {
        name: "openai_chat",
        title: "OpenAI Chat",
        aliases: ["openai", "chat"],
        framing: Sse,
    }
}

//! Provider wire formats: pure codecs (no I/O) for each format.
//!
//! Each format has a request encoder ([`Codec::encode`]), a streaming decoder fed
//! arbitrary byte chunks ([`Codec::stream_decoder`]) and a non-streaming decoder
//! ([`Codec::decode_response`]). Decoding never depends on how bytes are chunked.

/// A built-in format's descriptor, its [`Format`] constant and its codec's [`Codec`]
/// impl, from its folder's `encode::encode`, `decode::stream_decoder`,
/// `decode::decode_whole` and (feature `test-util`) `render::render`: a codec folder
/// writes only what is its own.
macro_rules! built_in_format {
    (
        $(#[$doc:meta])*
        const $constant:ident = $codec:ident {
            name: $name:literal,
            title: $title:literal,
            aliases: [$($alias:literal),* $(,)?],
            framing: $framing:ident $(,)?
        }
    ) => {
        /// The format's name, written once.
        const NAME: &str = $name;

        /// The format's descriptor (its line in the registry: `provider/registry.rs`).
        static FORMAT: $crate::provider::FormatSpec = {
            let spec = $crate::provider::FormatSpec::new(NAME, $title, &$codec)
                .aliases(&[$($alias),*])
                .framing($crate::provider::Framing::$framing);
            #[cfg(feature = "test-util")]
            let spec = spec.renderer(render::render);
            spec
        };

        impl $crate::provider::Format {
            $(#[$doc])*
            pub const $constant: $crate::provider::Format =
                $crate::provider::Format::new(&FORMAT);
        }

        impl $crate::provider::Codec for $codec {
            fn format(&self) -> $crate::provider::Format {
                $crate::provider::Format::$constant
            }

            fn encode(
                &self,
                conv: &$crate::conversation::Conversation,
                opts: &$crate::provider::RequestOptions,
            ) -> Result<Vec<u8>, $crate::provider::EncodeError> {
                encode::encode(conv, opts)
            }

            fn stream_decoder(
                &self,
                config: $crate::provider::DecoderConfig,
            ) -> Box<dyn $crate::provider::StreamDecoder> {
                Box::new(decode::stream_decoder(config))
            }

            fn decode_response(
                &self,
                body: &[u8],
                config: $crate::provider::DecoderConfig,
            ) -> Result<$crate::provider::DecodeOutcome, $crate::provider::DecodeError> {
                decode::decode_whole(body, config, &mut |_| {})
            }
        }
    };
}

mod anthropic;
mod assembly;
mod bedrock;
#[cfg(feature = "test-util")]
pub mod conformance;
mod encoding;
mod error;
mod event;
mod format;
mod framed;
pub mod framing;
mod gemini;
mod ollama;
pub mod openai_chat;
pub mod openai_responses;
mod outcome;
mod placement;
pub mod preview;
mod registry;
#[cfg(feature = "test-util")]
pub mod render;
mod scan;
pub(crate) mod wire;

pub use anthropic::{AnthropicCodec, DEFAULT_MAX_TOKENS};
pub use assembly::{SYNTHESIZED_ID_KEY, SYNTHETIC_CALL_ID, THOUGHT_SIGNATURE_KEY};
pub use bedrock::BedrockCodec;
pub use error::{DecodeError, EncodeError};
pub use event::{EventBatch, StopReason, StreamEvent};
#[cfg(feature = "test-util")]
pub use format::RenderFn;
pub use format::{
    Codec, DecoderConfig, Format, FormatSpec, Framing, RequestOptions, StreamDecoder,
};
pub use gemini::{GeminiCodec, SchemaTooLarge, gemini_schema};
pub use ollama::OllamaCodec;
pub use outcome::{
    DecodeOutcome, DecodeReport, ProviderError, ReportIncompleteCall, ReportToolCall,
};
pub use placement::unsent_in_user_message;
pub use registry::{FormatTaken, UnknownFormat};

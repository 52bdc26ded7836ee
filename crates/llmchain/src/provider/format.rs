//! [`Format`], the [`Codec`] trait and the [`StreamDecoder`] trait.

use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value};

use super::error::{DecodeError, EncodeError};
use super::event::StreamEvent;
use super::outcome::DecodeOutcome;
use crate::conversation::Conversation;
use crate::message::{DEFAULT_MAX_ARGUMENT_BYTES, Message, MessageStatus};

/// A provider wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// OpenAI Chat Completions, and every compatible server (Mistral, DeepSeek, vLLM,
    /// llama.cpp, OpenRouter, LiteLLM, ...).
    OpenAiChat,
    /// OpenAI Responses.
    OpenAiResponses,
    /// Anthropic Messages.
    Anthropic,
    /// Google Gemini `generateContent`.
    Gemini,
    /// Ollama `/api/chat`.
    Ollama,
    /// AWS Bedrock Converse and ConverseStream (event-stream frames).
    BedrockConverse,
}

impl Format {
    /// All formats.
    pub const ALL: [Format; 6] = [
        Format::OpenAiChat,
        Format::OpenAiResponses,
        Format::Anthropic,
        Format::Gemini,
        Format::Ollama,
        Format::BedrockConverse,
    ];

    /// The canonical name (`openai_chat`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Format::OpenAiChat => "openai_chat",
            Format::OpenAiResponses => "openai_responses",
            Format::Anthropic => "anthropic",
            Format::Gemini => "gemini",
            Format::Ollama => "ollama",
            Format::BedrockConverse => "bedrock_converse",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown format name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown format '{0}': expected one of openai_chat (or openai), openai_responses, anthropic, gemini, ollama, bedrock_converse (or bedrock)"
)]
pub struct UnknownFormat(pub String);

impl FromStr for Format {
    type Err = UnknownFormat;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "openai_chat" | "openai" | "chat" => Format::OpenAiChat,
            "openai_responses" | "responses" => Format::OpenAiResponses,
            "anthropic" => Format::Anthropic,
            "gemini" | "google" => Format::Gemini,
            "ollama" => Format::Ollama,
            "bedrock_converse" | "bedrock" | "converse" => Format::BedrockConverse,
            other => return Err(UnknownFormat(other.to_owned())),
        })
    }
}

/// Limits for a decoder fed untrusted bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecoderConfig {
    /// Cap on one call's argument bytes.
    pub max_argument_bytes: usize,
    /// Cap on one SSE event / NDJSON line.
    pub max_line_bytes: usize,
    /// Whether the fragments of one call read in one `feed` may be reported as one
    /// [`StreamEvent::ToolCallArguments`] (the decoders' fast paths then emit one event
    /// per run of a call's events instead of one per wire event). A consumer that only
    /// concatenates fragments — the model streams, the chain — sees the same text with
    /// far fewer events; off by default, so the events of a body do not depend on how
    /// it was cut into reads.
    pub join_fragments: bool,
}

impl Default for DecoderConfig {
    fn default() -> Self {
        DecoderConfig {
            max_argument_bytes: DEFAULT_MAX_ARGUMENT_BYTES,
            max_line_bytes: 64 * 1024 * 1024,
            join_fragments: false,
        }
    }
}

/// Request settings beside the conversation.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RequestOptions {
    /// The model id.
    pub model: String,
    /// Ask for a streamed response.
    pub stream: bool,
    /// Output token cap (required by Anthropic; a default is used when unset).
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Extra top-level body fields, merged last.
    pub extra: Map<String, Value>,
}

/// A streaming decoder: feed it byte chunks of any size, then finish.
///
/// Implementations must give the same events (concatenated per call and per content
/// position) and the same outcome for every chunking of the same body.
pub trait StreamDecoder: Send {
    /// Feeds a chunk; events known so far are passed to `on_event`.
    fn feed(
        &mut self,
        chunk: &[u8],
        on_event: &mut dyn FnMut(StreamEvent<'_>),
    ) -> Result<(), DecodeError>;

    /// Ends the body: flushes what is buffered and returns the outcome. A body that ends
    /// before the provider said it was done gives a `Cancelled` message whose unfinished
    /// calls are incomplete.
    fn finish(
        &mut self,
        on_event: &mut dyn FnMut(StreamEvent<'_>),
    ) -> Result<DecodeOutcome, DecodeError>;

    /// Stops mid-body (a cancelled call, a read that failed, a cap or deadline that
    /// ended it): what was assembled from the events read whole, as a `Cancelled`
    /// message; an event still buffered is dropped. `None` when there is nothing to
    /// give (the decoder finished already), and by default.
    ///
    /// This is how a model stream keeps what arrived without merging the events a
    /// second time: the decoder's assembly is the one accumulator.
    fn interrupt(&mut self) -> Option<Message> {
        None
    }
}

/// `message` marked cut off: `Cancelled`, so none of its calls is ever executed.
pub(crate) fn cut_off(mut message: Message) -> Message {
    message.status = MessageStatus::Cancelled;
    message
}

/// One wire format's pure codec.
pub trait Codec: Send + Sync {
    /// The format.
    fn format(&self) -> Format;
    /// Encodes a request body (JSON bytes).
    fn encode(&self, conv: &Conversation, opts: &RequestOptions) -> Result<Vec<u8>, EncodeError>;
    /// A fresh streaming decoder.
    fn stream_decoder(&self, config: DecoderConfig) -> Box<dyn StreamDecoder>;
    /// Decodes a whole non-streaming response body.
    fn decode_response(
        &self,
        body: &[u8],
        config: DecoderConfig,
    ) -> Result<DecodeOutcome, DecodeError>;

    /// True when `body` is a streamed response rather than one JSON document. The
    /// default says a body is streamed unless its first non-blank byte opens a JSON
    /// object or array (right for SSE formats; NDJSON formats override it).
    fn is_stream_body(&self, body: &[u8]) -> bool {
        super::wire::looks_like_sse(body)
    }

    /// Whether a body that begins with `prefix` (and may go on) is streamed, or `None`
    /// while the prefix cannot tell; once it tells, it agrees with
    /// [`Codec::is_stream_body`] on every body with that prefix. Lets a reader decode a
    /// body of any size as it arrives (`llmchain decode`). The default decides on the
    /// first non-blank byte, like the default `is_stream_body`; a codec that overrides
    /// that must override this too.
    fn is_stream_prefix(&self, prefix: &[u8]) -> Option<bool> {
        const BOM: &[u8] = b"\xEF\xBB\xBF";
        if BOM.starts_with(prefix) {
            return None;
        }
        let body = prefix.strip_prefix(BOM).unwrap_or(prefix);
        body.iter()
            .any(|b| !b.is_ascii_whitespace())
            .then(|| self.is_stream_body(prefix))
    }

    /// Decodes a captured body, streamed or not ([`Codec::is_stream_body`]). A stream
    /// is fed `chunk_size` bytes at a time (`0` feeds it whole).
    fn decode_body(
        &self,
        body: &[u8],
        chunk_size: usize,
        config: DecoderConfig,
    ) -> Result<DecodeOutcome, DecodeError> {
        if !self.is_stream_body(body) {
            return self.decode_response(body, config);
        }
        let mut dec = self.stream_decoder(config);
        let mut sink = |_: StreamEvent<'_>| {};
        let size = if chunk_size == 0 {
            body.len().max(1)
        } else {
            chunk_size
        };
        for chunk in body.chunks(size) {
            dec.feed(chunk, &mut sink)?;
        }
        dec.finish(&mut sink)
    }
}

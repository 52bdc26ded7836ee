//! [`Format`], the [`Codec`] trait and the [`StreamDecoder`] trait.

use std::fmt;

use serde_json::{Map, Value};

use super::error::{DecodeError, EncodeError};
use super::event::StreamEvent;
use super::outcome::DecodeOutcome;
use crate::conversation::Conversation;
use crate::message::{DEFAULT_MAX_ARGUMENT_BYTES, Message, MessageStatus};

/// A provider wire format: a handle on its descriptor, the [`FormatSpec`] that holds
/// everything about it (name, aliases, title, codec, framing, test renderer).
///
/// The built-in formats are the constants ([`Format::OPENAI_CHAT`], …); a format
/// defined outside this crate is a `static` [`FormatSpec`] of its own, given to
/// [`Format::register`] so that its name is known (`"my_format".parse()`, the CLI's
/// `--format`) and used through [`Format::new`] like a built-in one. Two formats are
/// equal when their names are; a format prints as its name.
///
/// ```
/// use llmchain::provider::Format;
/// let f: Format = "bedrock".parse().unwrap();
/// assert_eq!(f, Format::BEDROCK_CONVERSE);
/// assert_eq!(f.title(), "Bedrock Converse");
/// ```
#[derive(Clone, Copy)]
pub struct Format(&'static FormatSpec);

/// How a format's streamed responses are framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Framing {
    /// Server-Sent Events (`text/event-stream`).
    Sse,
    /// Newline-delimited JSON.
    Ndjson,
    /// AWS event-stream binary frames.
    EventStream,
    /// A framing of the format's own.
    Other,
}

/// A renderer of a scripted response into the format's wire bytes (feature
/// `test-util`): what [`render_stream`](crate::provider::render::render_stream) calls.
#[cfg(feature = "test-util")]
pub type RenderFn = fn(
    &crate::provider::render::ResponseScript,
) -> Result<Vec<u8>, crate::provider::render::RenderError>;

/// The descriptor of a wire format: the one place its name, aliases, title, codec,
/// framing and test renderer are written. Build one in a `static` with
/// [`FormatSpec::new`] and the `const` setters:
///
/// ```
/// # use llmchain::provider::{Codec, FormatSpec, Framing};
/// # fn codec() -> &'static dyn Codec { Format::OPENAI_CHAT.codec() }
/// # use llmchain::provider::Format;
/// static MY_FORMAT: FormatSpec = FormatSpec::new("my_format", "My Format", &MyCodec)
///     .aliases(&["mine"])
///     .framing(Framing::Ndjson);
/// # struct MyCodec;
/// # impl Codec for MyCodec {
/// #     fn format(&self) -> Format { Format::new(&MY_FORMAT) }
/// #     fn encode(&self, c: &llmchain::conversation::Conversation, o: &llmchain::provider::RequestOptions) -> Result<Vec<u8>, llmchain::provider::EncodeError> { codec().encode(c, o) }
/// #     fn stream_decoder(&self, c: llmchain::provider::DecoderConfig) -> Box<dyn llmchain::provider::StreamDecoder> { codec().stream_decoder(c) }
/// #     fn decode_response(&self, b: &[u8], c: llmchain::provider::DecoderConfig) -> Result<llmchain::provider::DecodeOutcome, llmchain::provider::DecodeError> { codec().decode_response(b, c) }
/// # }
/// ```
#[non_exhaustive]
pub struct FormatSpec {
    /// The canonical name (`openai_chat`): lowercase, for configs and `--format`.
    pub name: &'static str,
    /// Other names it is found by (`openai`, `chat`).
    pub aliases: &'static [&'static str],
    /// The name as people write it (`OpenAI Chat`), for messages.
    pub title: &'static str,
    /// The codec.
    pub codec: &'static dyn Codec,
    /// How its streamed responses are framed.
    pub framing: Framing,
    /// Renders scripted responses (feature `test-util`); `None`: not renderable.
    #[cfg(feature = "test-util")]
    pub renderer: Option<RenderFn>,
}

impl FormatSpec {
    /// A descriptor with no aliases, SSE framing and no renderer.
    pub const fn new(name: &'static str, title: &'static str, codec: &'static dyn Codec) -> Self {
        FormatSpec {
            name,
            aliases: &[],
            title,
            codec,
            framing: Framing::Sse,
            #[cfg(feature = "test-util")]
            renderer: None,
        }
    }

    /// With these aliases.
    #[must_use]
    pub const fn aliases(mut self, aliases: &'static [&'static str]) -> Self {
        self.aliases = aliases;
        self
    }

    /// With this framing.
    #[must_use]
    pub const fn framing(mut self, framing: Framing) -> Self {
        self.framing = framing;
        self
    }

    /// With this renderer of scripted responses.
    #[cfg(feature = "test-util")]
    #[must_use]
    pub const fn renderer(mut self, renderer: RenderFn) -> Self {
        self.renderer = Some(renderer);
        self
    }

    /// Whether `name` names it (its name or an alias, ignoring case).
    pub fn is_named(&self, name: &str) -> bool {
        self.name.eq_ignore_ascii_case(name)
            || self.aliases.iter().any(|a| a.eq_ignore_ascii_case(name))
    }
}

impl fmt::Debug for FormatSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FormatSpec")
            .field("name", &self.name)
            .field("aliases", &self.aliases)
            .field("title", &self.title)
            .field("framing", &self.framing)
            .finish_non_exhaustive()
    }
}

impl Format {
    /// The format `spec` describes (built in or not; [`Format::register`] makes its
    /// name known).
    pub const fn new(spec: &'static FormatSpec) -> Format {
        Format(spec)
    }

    /// The descriptor.
    pub fn spec(self) -> &'static FormatSpec {
        self.0
    }

    /// The canonical name (`openai_chat`, ...).
    pub fn as_str(self) -> &'static str {
        self.0.name
    }

    /// The name as people write it (`OpenAI Chat`).
    pub fn title(self) -> &'static str {
        self.0.title
    }

    /// The other names it is found by.
    pub fn aliases(self) -> &'static [&'static str] {
        self.0.aliases
    }

    /// This format's codec.
    pub fn codec(self) -> &'static dyn Codec {
        self.0.codec
    }

    /// How its streamed responses are framed.
    pub fn framing(self) -> Framing {
        self.0.framing
    }
}

impl PartialEq for Format {
    fn eq(&self, other: &Self) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for Format {}

impl std::hash::Hash for Format {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.name.hash(state);
    }
}

impl fmt::Debug for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Format({})", self.0.name)
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
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

/// The first byte that is not ASCII whitespace.
fn first_non_blank(bytes: &[u8]) -> Option<u8> {
    bytes.iter().copied().find(|b| !b.is_ascii_whitespace())
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
    /// default follows the format's [`Framing`]: SSE (and a framing of its own) is
    /// streamed unless the first non-blank byte opens a JSON object or array; NDJSON
    /// unless the body is exactly one JSON value; AWS event-stream unless it starts
    /// with `{`.
    fn is_stream_body(&self, body: &[u8]) -> bool {
        match self.format().framing() {
            Framing::Ndjson => serde_json::from_slice::<serde::de::IgnoredAny>(body).is_err(),
            Framing::EventStream => first_non_blank(body) != Some(b'{'),
            _ => super::wire::looks_like_sse(body),
        }
    }

    /// Whether a body that begins with `prefix` (and may go on) is streamed, or `None`
    /// while the prefix cannot tell; once it tells, it agrees with
    /// [`Codec::is_stream_body`] on every body with that prefix. Lets a reader decode a
    /// body of any size as it arrives (`llmchain decode`). The default follows the
    /// format's [`Framing`] as `is_stream_body` does; a codec that overrides that must
    /// override this too.
    fn is_stream_prefix(&self, prefix: &[u8]) -> Option<bool> {
        match self.format().framing() {
            Framing::Ndjson => {
                // Streamed once a second value starts after the first, or the first is
                // not JSON; undecided while the first may still be going.
                let mut values = serde_json::Deserializer::from_slice(prefix)
                    .into_iter::<serde::de::IgnoredAny>();
                match values.next()? {
                    Ok(_) => prefix[values.byte_offset()..]
                        .iter()
                        .any(|b| !b.is_ascii_whitespace())
                        .then_some(true),
                    Err(e) if e.is_eof() => None,
                    Err(_) => Some(true),
                }
            }
            Framing::EventStream => first_non_blank(prefix).map(|b| b != b'{'),
            _ => {
                const BOM: &[u8] = b"\xEF\xBB\xBF";
                if BOM.starts_with(prefix) {
                    return None;
                }
                let body = prefix.strip_prefix(BOM).unwrap_or(prefix);
                body.iter()
                    .any(|b| !b.is_ascii_whitespace())
                    .then(|| self.is_stream_body(prefix))
            }
        }
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

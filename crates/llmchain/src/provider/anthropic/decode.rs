//! Decoding Anthropic Messages responses: the SSE event stream and the whole message.
//!
//! Content blocks share one `index` space (text, thinking, tool_use, ...). Each text or
//! thinking block becomes its own content part; each tool_use block becomes the next
//! tool call. `input_json_delta` fragments are appended to the call as they come; the
//! `input` object of `content_block_start` is used only when no fragment arrives.

use std::borrow::Cow;
use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::message::{ContentPart, ContentType, MessageStatus, TokenUsage};
use crate::provider::assembly::{Assembler, Emit, malformed, wrong_format};
use crate::provider::error::DecodeError;
use crate::provider::event::StopReason;
use crate::provider::format::DecoderConfig;
use crate::provider::framed::EventHandler;
use crate::provider::outcome::DecodeOutcome;
use crate::provider::scan::fragment_run::{FragmentShape, RunScratch, take_fragments};
use crate::provider::scan::json::Cursor;
use crate::provider::wire::AnyText;

use super::NAME as FORMAT;

/// Normalises an Anthropic `stop_reason`.
pub(crate) fn stop_reason(raw: &str) -> StopReason {
    match raw {
        "tool_use" => StopReason::ToolCalls,
        "end_turn" => StopReason::EndTurn,
        "max_tokens" | "model_context_window_exceeded" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "refusal" => StopReason::ContentFilter,
        _ => StopReason::Other,
    }
}

#[derive(Deserialize, Default, Clone, Copy)]
struct Usage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

impl Usage {
    /// Input tokens including cached ones, when the record names any.
    fn input(&self) -> Option<u64> {
        let parts = [
            self.input_tokens,
            self.cache_creation_input_tokens,
            self.cache_read_input_tokens,
        ];
        parts.iter().any(Option::is_some).then(|| {
            parts
                .iter()
                .flatten()
                .fold(0u64, |a, b| a.saturating_add(*b))
        })
    }
}

#[derive(Deserialize)]
struct Block<'a> {
    #[serde(rename = "type", borrow)]
    ty: Cow<'a, str>,
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default)]
    input: Option<Value>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    thinking: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    signature: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    data: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(rename = "type", default, borrow)]
    ty: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    thinking: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    signature: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    partial_json: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    stop_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct ErrorBody<'a> {
    #[serde(rename = "type", default, borrow)]
    ty: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    message: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct StartMessage {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: AnyText,
    #[serde(default)]
    usage: Option<Usage>,
}

/// The event types this decoder reads; any other is skipped.
const KNOWN_EVENTS: [&str; 8] = [
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "ping",
    "error",
];

/// The content-block types read into text, thinking and calls; any other
/// (`server_tool_use`, `web_search_tool_result`, and kinds added later) is kept whole as
/// an opaque part and replayed to Anthropic.
fn known_block(ty: &str) -> bool {
    matches!(ty, "text" | "thinking" | "redacted_thinking" | "tool_use")
}

/// An opaque part holding an Anthropic content block this decoder does not read.
pub(crate) fn opaque_part(block: Value) -> ContentPart {
    ContentPart::new(ContentType::Unsupported, "")
        .with_option("provider", FORMAT)
        .with_option("block", block)
}

/// One SSE event's data.
#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", borrow)]
    ty: Cow<'a, str>,
    #[serde(default)]
    index: Option<u64>,
    #[serde(default, borrow)]
    content_block: Option<Block<'a>>,
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    #[serde(default)]
    message: Option<StartMessage>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default, borrow)]
    error: Option<ErrorBody<'a>>,
}

/// A whole (non-streaming) response.
#[derive(Deserialize)]
struct WholeMessage<'a> {
    #[serde(rename = "type", default, borrow)]
    ty: Option<Cow<'a, str>>,
    /// Blocks as JSON: each of a known kind is read as a [`Block`], any other kept whole.
    #[serde(default)]
    content: Option<Vec<Value>>,
    #[serde(default, borrow)]
    stop_reason: Option<Cow<'a, str>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default, borrow)]
    error: Option<ErrorBody<'a>>,
    #[serde(default)]
    id: AnyText,
    #[serde(default)]
    model: AnyText,
}

#[derive(Debug, Clone, Copy)]
enum BlockState {
    Text(Option<usize>),
    Thinking(Option<usize>),
    Tool {
        pos: u32,
    },
    /// A block kept whole (an opaque part); `input_json_delta`s build its `input`.
    Opaque(usize),
    Other,
}

/// The Anthropic event handler: fed one SSE event's data at a time.
#[derive(Debug)]
pub(crate) struct Events {
    config: DecoderConfig,
    asm: Assembler,
    blocks: HashMap<u64, BlockState>,
    last: Option<(u64, BlockState)>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_tokens: Option<u64>,
    cache_write_tokens: Option<u64>,
    seen_event: bool,
    stopped: bool,
    /// The id of the message being read (from `message_start`).
    message_id: Option<String>,
    /// Scratch for [`take_fragments`].
    runs: RunScratch,
}

// The hot path: `input_json_delta` events in the exact shape the API sends, read
// without building a JSON tree. Anything else goes through serde.
const DELTA_PREFIX: &[u8; 38] = br#"{"type":"content_block_delta","index":"#;
const JSON_DELTA_MID: &[u8; 51] = br#","delta":{"type":"input_json_delta","partial_json":"#;

/// `(block index, partial_json literal, closing bytes)` for an event that may be a
/// canonical `input_json_delta`; the literal is checked as it is decoded.
#[inline]
fn fast_json_delta(data: &[u8]) -> Option<(u64, &[u8])> {
    let mut c = Cursor::new(data, 0);
    c.eat_array(DELTA_PREFIX)?;
    let index = c.number_u64()?;
    c.eat_array(JSON_DELTA_MID)?;
    Some((index, &data[c.pos()..]))
}

/// The bytes that close a canonical `input_json_delta` event after its fragment.
const JSON_DELTA_END: &[u8] = b"}}";

/// A canonical `input_json_delta` event as the API frames it, for [`take_fragments`]:
/// its `event:` line, then the data line of [`fast_json_delta`]'s shape.
const BULK_SHAPE: FragmentShape<'static> = FragmentShape {
    head: b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":",
    key: JSON_DELTA_MID,
    tail: b"}}\n\n",
    after_varying: None,
    lead: b"event: content_block_delta\n".len(),
};

impl EventHandler for Events {
    fn on_data(&mut self, data: &[u8], emit: Emit<'_>) -> Result<(), DecodeError> {
        Events::on_data(self, data, emit)
    }
    /// Runs of `input_json_delta` events for tool blocks, in the exact bytes the API
    /// sends, are taken without framing (the same events [`fast_json_delta`] accepts,
    /// with their `event:` line).
    fn raw_events(&mut self, bytes: &[u8], emit: Emit<'_>) -> Result<(usize, usize), DecodeError> {
        if self.stopped {
            return Ok((0, 0));
        }
        let Events {
            asm,
            blocks,
            last,
            runs,
            config,
            ..
        } = self;
        let call_of = |index: u64| {
            let block = match *last {
                Some((i, b)) if i == index => Some(b),
                _ => blocks.get(&index).copied(),
            };
            match block {
                Some(BlockState::Tool { pos }) => Some(pos),
                _ => None,
            }
        };
        let taken = take_fragments(bytes, BULK_SHAPE, *config, runs, asm, call_of, emit)?;
        if taken.1 > 0 {
            self.seen_event = true;
        }
        Ok(taken)
    }
    fn finish(self, emit: Emit<'_>) -> Result<DecodeOutcome, DecodeError> {
        Events::finish(self, emit)
    }
    fn decode_whole(&mut self, body: &[u8], emit: Emit<'_>) -> Result<DecodeOutcome, DecodeError> {
        decode_whole(body, self.config, emit)
    }
}

impl Events {
    /// A fresh handler.
    pub(crate) fn new(config: DecoderConfig) -> Self {
        Events {
            config,
            asm: Assembler::new(config.max_argument_bytes),
            blocks: HashMap::new(),
            last: None,
            input_tokens: None,
            output_tokens: None,
            cache_read_tokens: None,
            cache_write_tokens: None,
            seen_event: false,
            stopped: false,
            message_id: None,
            runs: RunScratch::default(),
        }
    }

    fn block(&self, index: u64) -> Option<BlockState> {
        match self.last {
            Some((i, b)) if i == index => Some(b),
            _ => self.blocks.get(&index).copied(),
        }
    }

    fn set_block(&mut self, index: u64, b: BlockState) {
        self.blocks.insert(index, b);
        self.last = Some((index, b));
    }

    /// Handles one event's data.
    pub(crate) fn on_data(&mut self, data: &[u8], emit: Emit<'_>) -> Result<(), DecodeError> {
        if self.stopped {
            return Ok(());
        }
        if let Some((index, literal)) = fast_json_delta(data) {
            // The fragment, when the event closes right after it.
            let text = || {
                let (text, n) = Cursor::string_text_at(literal)?;
                (&literal[n..] == JSON_DELTA_END).then_some(text)
            };
            let done = match self.block(index) {
                Some(BlockState::Tool { pos, .. }) => match text() {
                    Some(text) => Some(self.asm.push_arguments(pos, &text, emit)?),
                    None => None,
                },
                // An opaque block's input: read by serde below.
                Some(BlockState::Opaque(_)) => None,
                // A fragment for no tool block is dropped, once checked.
                _ => text().map(drop),
            };
            if done.is_some() {
                self.seen_event = true;
                return Ok(());
            }
        }
        let ev: Event<'_> = match serde_json::from_slice(data) {
            Ok(ev) => ev,
            Err(e) => return self.untyped(data, &e),
        };
        self.seen_event |= KNOWN_EVENTS.contains(&&*ev.ty);
        match &*ev.ty {
            "message_start" => {
                if let Some(m) = ev.message {
                    self.asm.set_response(m.id.as_deref(), m.model.0.as_deref());
                    match (&self.message_id, m.id) {
                        (Some(first), Some(second)) if *first != second => {
                            return Err(DecodeError::Spliced {
                                format: FORMAT,
                                first: first.clone(),
                                second,
                            });
                        }
                        (None, id) => self.message_id = id,
                        // The same message announced again: harmless.
                        _ => {}
                    }
                    if let Some(u) = m.usage {
                        self.take_usage(u);
                    }
                }
            }
            "content_block_start" => match (ev.index, ev.content_block) {
                (Some(index), Some(block)) if known_block(&block.ty) => {
                    self.start_block(index, block, emit)?;
                }
                (Some(index), Some(_)) => self.start_opaque(index, data),
                _ => {}
            },
            "content_block_delta" => {
                if let (Some(index), Some(delta)) = (ev.index, ev.delta) {
                    self.delta(index, delta, emit)?;
                }
            }
            "content_block_stop" => match ev.index.and_then(|i| self.block(i)) {
                Some(BlockState::Tool { pos, .. }) => self.asm.finish_call(pos, emit)?,
                Some(BlockState::Opaque(pos)) => self.finish_opaque(pos),
                _ => {}
            },
            "message_delta" => {
                if let Some(raw) = ev.delta.and_then(|d| d.stop_reason) {
                    self.asm.set_stop(stop_reason(&raw), &raw, emit);
                }
                if let Some(u) = ev.usage {
                    self.take_usage(u);
                }
            }
            "message_stop" => self.stopped = true,
            "error" => {
                let (kind, message) = match &ev.error {
                    Some(e) => (
                        e.ty.as_deref().unwrap_or("error"),
                        e.message.as_deref().unwrap_or(""),
                    ),
                    None => ("error", ""),
                };
                self.asm.set_error(kind, message, emit);
                self.stopped = true;
            }
            // `ping` and event types added later are ignored.
            _ => {}
        }
        Ok(())
    }

    /// An event the typed parse refused. One of a kind this decoder does not read, or
    /// holding a block or delta of such a kind, is skipped or kept (a provider adding
    /// kinds must never break a stream we can otherwise read); a known kind of the
    /// wrong shape is an error, and so is JSON with no `type` (another format's body).
    fn untyped(&mut self, data: &[u8], e: &serde_json::Error) -> Result<(), DecodeError> {
        let v: Value =
            serde_json::from_slice(data).map_err(|e| malformed(FORMAT, e.to_string()))?;
        let Some(ty) = v.get("type").and_then(Value::as_str) else {
            return Err(wrong_format(
                FORMAT,
                format!("an event without a string `type`: {e}"),
            ));
        };
        let kind_of = |key: &str| {
            v.get(key)
                .and_then(|b| b.get("type"))
                .and_then(Value::as_str)
        };
        match ty {
            _ if !KNOWN_EVENTS.contains(&ty) => return Ok(()),
            "content_block_start" => {
                if let (Some(index), Some(kind)) = (
                    v.get("index").and_then(Value::as_u64),
                    kind_of("content_block"),
                ) && !known_block(kind)
                {
                    self.seen_event = true;
                    self.start_opaque(index, data);
                    return Ok(());
                }
            }
            "content_block_delta" => {
                if let Some(kind) = kind_of("delta")
                    && !matches!(
                        kind,
                        "text_delta" | "thinking_delta" | "signature_delta" | "input_json_delta"
                    )
                {
                    self.seen_event = true;
                    return Ok(());
                }
            }
            _ => {}
        }
        // An Anthropic event with a field of the wrong shape, or given twice.
        Err(malformed(
            FORMAT,
            format!("an event that breaks the format: {e}"),
        ))
    }

    /// Keeps block `index` of a kind this decoder does not read whole, as an opaque part
    /// (read from the event's raw `data`: rare, so parsed again).
    fn start_opaque(&mut self, index: u64, data: &[u8]) {
        let block = serde_json::from_slice::<Value>(data)
            .ok()
            .and_then(|mut v| v.get_mut("content_block").map(Value::take))
            .unwrap_or_default();
        let pos = self.asm.push_part(opaque_part(block));
        self.set_block(index, BlockState::Opaque(pos));
    }

    /// Ends an opaque block: the `input` its deltas streamed replaces the block's own.
    fn finish_opaque(&mut self, pos: usize) {
        let Some(part) = self.asm.part_mut(pos) else {
            return;
        };
        if part.content.is_empty() {
            return;
        }
        if let Ok(input) = serde_json::from_str::<Value>(&part.content)
            && let Some(Value::Object(block)) = part.options.get_mut("block")
        {
            block.insert("input".into(), input);
            part.content.clear();
        }
    }

    /// Takes a usage record (`message_start`'s, then `message_delta`'s running totals):
    /// each figure it names replaces the one before.
    fn take_usage(&mut self, u: Usage) {
        self.input_tokens = u.input().or(self.input_tokens);
        self.output_tokens = u.output_tokens.or(self.output_tokens);
        self.cache_read_tokens = u.cache_read_input_tokens.or(self.cache_read_tokens);
        self.cache_write_tokens = u.cache_creation_input_tokens.or(self.cache_write_tokens);
        if self.input_tokens.is_some() || self.output_tokens.is_some() {
            self.asm.set_usage(
                TokenUsage::new(
                    self.input_tokens.unwrap_or(0),
                    self.output_tokens.unwrap_or(0),
                )
                .with_cache(self.cache_read_tokens, self.cache_write_tokens),
            );
        }
    }

    fn start_block(&mut self, index: u64, b: Block<'_>, emit: Emit<'_>) -> Result<(), DecodeError> {
        let state = match &*b.ty {
            "text" => {
                let mut pos = None;
                if let Some(t) = b.text.as_deref().filter(|t| !t.is_empty()) {
                    let p = self.asm.open_part(ContentType::Text);
                    self.asm.push_text(p, t, emit);
                    pos = Some(p);
                }
                BlockState::Text(pos)
            }
            "thinking" => {
                let mut pos = None;
                let t = b.thinking.as_deref().unwrap_or("");
                let s = b.signature.as_deref().unwrap_or("");
                if !t.is_empty() || !s.is_empty() {
                    let p = self.asm.open_part(ContentType::Thinking);
                    self.asm.push_text(p, t, emit);
                    self.asm.push_signature(p, s, emit);
                    pos = Some(p);
                }
                BlockState::Thinking(pos)
            }
            "redacted_thinking" => {
                let p = self.asm.open_part(ContentType::Thinking);
                self.asm.set_part_option(
                    p,
                    "redacted",
                    Value::String(b.data.as_deref().unwrap_or("").to_owned()),
                );
                BlockState::Other
            }
            "tool_use" => {
                let name = b.name.as_deref().unwrap_or("");
                let pos = self.asm.start_call(b.id.as_deref(), name, emit);
                if let Some(Value::Object(input)) = b.input
                    && !input.is_empty()
                {
                    self.asm.set_fallback_object(pos, input);
                }
                BlockState::Tool { pos }
            }
            // Read by `start_opaque` instead.
            _ => BlockState::Other,
        };
        self.set_block(index, state);
        Ok(())
    }

    fn delta(&mut self, index: u64, d: Delta<'_>, emit: Emit<'_>) -> Result<(), DecodeError> {
        let Some(state) = self.block(index) else {
            return Ok(());
        };
        match (state, d.ty.as_deref()) {
            (BlockState::Text(pos), Some("text_delta")) => {
                if let Some(t) = d.text.as_deref().filter(|t| !t.is_empty()) {
                    let p = match pos {
                        Some(p) => p,
                        None => {
                            let p = self.asm.open_part(ContentType::Text);
                            self.set_block(index, BlockState::Text(Some(p)));
                            p
                        }
                    };
                    self.asm.push_text(p, t, emit);
                }
            }
            (BlockState::Thinking(pos), Some(ty @ ("thinking_delta" | "signature_delta"))) => {
                let (t, s) = if ty == "thinking_delta" {
                    (d.thinking.as_deref().unwrap_or(""), "")
                } else {
                    ("", d.signature.as_deref().unwrap_or(""))
                };
                if t.is_empty() && s.is_empty() {
                    return Ok(());
                }
                let p = match pos {
                    Some(p) => p,
                    None => {
                        let p = self.asm.open_part(ContentType::Thinking);
                        self.set_block(index, BlockState::Thinking(Some(p)));
                        p
                    }
                };
                self.asm.push_text(p, t, emit);
                self.asm.push_signature(p, s, emit);
            }
            (BlockState::Tool { pos, .. }, Some("input_json_delta")) => {
                if let Some(frag) = d.partial_json.as_deref() {
                    self.asm.push_arguments(pos, frag, emit)?;
                }
            }
            (BlockState::Opaque(pos), Some("input_json_delta")) => {
                if let Some(frag) = d.partial_json.as_deref() {
                    self.asm.append_opaque(pos, frag)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Ends the body.
    pub(crate) fn finish(self, emit: Emit<'_>) -> Result<DecodeOutcome, DecodeError> {
        if !self.seen_event {
            return Err(wrong_format(
                FORMAT,
                "no Anthropic stream event in the body",
            ));
        }
        let cut = self.asm.stop() == Some(StopReason::MaxTokens);
        let status = if cut {
            MessageStatus::Length
        } else if self.stopped {
            MessageStatus::Complete
        } else {
            MessageStatus::Cancelled
        };
        Ok(self.asm.into_outcome(status, emit))
    }
}

/// Decodes a whole (non-streaming) Messages response, or an error body.
pub(crate) fn decode_whole(
    body: &[u8],
    config: DecoderConfig,
    emit: Emit<'_>,
) -> Result<DecodeOutcome, DecodeError> {
    let msg: WholeMessage<'_> =
        serde_json::from_slice(body).map_err(|e| malformed(FORMAT, e.to_string()))?;
    let mut asm = Assembler::new(config.max_argument_bytes);
    asm.set_response(msg.id.0.as_deref(), msg.model.0.as_deref());
    match msg.ty.as_deref() {
        Some("error") => {
            let (kind, message) = match &msg.error {
                Some(e) => (
                    e.ty.as_deref().unwrap_or("error"),
                    e.message.as_deref().unwrap_or(""),
                ),
                None => ("error", ""),
            };
            asm.set_error(kind, message, emit);
            return Ok(asm.into_outcome(MessageStatus::Cancelled, emit));
        }
        Some("message") => {}
        _ if msg.content.is_some() && msg.stop_reason.is_some() => {}
        _ => {
            return Err(wrong_format(
                FORMAT,
                "expected an object with \"type\": \"message\" or \"error\"",
            ));
        }
    }
    for v in msg.content.unwrap_or_default() {
        match v.get("type").and_then(Value::as_str) {
            Some(ty) if known_block(ty) => {}
            _ => {
                asm.push_part(opaque_part(v));
                continue;
            }
        }
        let b = Block::deserialize(&v).map_err(|e| malformed(FORMAT, e.to_string()))?;
        match &*b.ty {
            "text" => {
                let p = asm.open_part(ContentType::Text);
                asm.push_text(p, b.text.as_deref().unwrap_or(""), emit);
            }
            "thinking" => {
                let p = asm.open_part(ContentType::Thinking);
                asm.push_text(p, b.thinking.as_deref().unwrap_or(""), emit);
                asm.push_signature(p, b.signature.as_deref().unwrap_or(""), emit);
            }
            "redacted_thinking" => {
                let p = asm.open_part(ContentType::Thinking);
                asm.set_part_option(
                    p,
                    "redacted",
                    Value::String(b.data.as_deref().unwrap_or("").to_owned()),
                );
            }
            "tool_use" => {
                let pos = asm.start_call(b.id.as_deref(), b.name.as_deref().unwrap_or(""), emit);
                match b.input {
                    Some(Value::Object(o)) => asm.set_arguments_object(pos, o, emit)?,
                    None | Some(Value::Null) => asm.set_arguments_object(pos, Map::new(), emit)?,
                    // Not an object: keep its text so validation reports it.
                    Some(other) => asm.push_arguments(pos, &other.to_string(), emit)?,
                }
                asm.finish_call(pos, emit)?;
            }
            _ => {}
        }
    }
    if let Some(raw) = msg.stop_reason.as_deref() {
        asm.set_stop(stop_reason(raw), raw, emit);
    }
    if let Some(u) = msg.usage {
        asm.set_usage(
            TokenUsage::new(u.input().unwrap_or(0), u.output_tokens.unwrap_or(0))
                .with_cache(u.cache_read_input_tokens, u.cache_creation_input_tokens),
        );
    }
    let status = if asm.stop() == Some(StopReason::MaxTokens) {
        MessageStatus::Length
    } else {
        MessageStatus::Complete
    };
    Ok(asm.into_outcome(status, emit))
}

/// A streaming decoder of this format (its codec's [`Codec::stream_decoder`]).
///
/// [`Codec::stream_decoder`]: crate::provider::Codec::stream_decoder
pub(crate) fn stream_decoder(config: DecoderConfig) -> crate::provider::framed::SseDecoder<Events> {
    crate::provider::framed::SseDecoder::new(FORMAT, Events::new(config), config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::event::StreamEvent;

    #[test]
    fn fast_path_recognises_the_canonical_shape_only() {
        let d = br#"{"type":"content_block_delta","index":12,"delta":{"type":"input_json_delta","partial_json":"{\"a\\"}}"#;
        let (i, literal) = fast_json_delta(d).unwrap();
        assert_eq!(i, 12);
        assert_eq!(literal, br#""{\"a\\"}}"#);
        let mut events = Events::new(DecoderConfig::default());
        let mut got = Vec::new();
        let mut emit = |e: StreamEvent<'_>| got.push(e.into_owned());
        events.on_data(br#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}"#, &mut emit).unwrap();
        events.on_data(br#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\\"}}"#, &mut emit).unwrap();
        // Shapes the scan does not take go through serde, with the same result.
        events.on_data(br#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"x"},"extra":1}"#, &mut emit).unwrap();
        events.on_data(br#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"y"} }"#, &mut emit).unwrap();
        assert!(events.on_data(br#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"x\"}}"#, &mut emit).is_err());
        assert!(
            fast_json_delta(br#"{"type":"content_block_delta","index":,"delta":{}}"#).is_none()
        );
        let frags: Vec<_> = got
            .iter()
            .filter_map(|e| match e {
                StreamEvent::ToolCallArguments { fragment, .. } => Some(fragment.to_string()),
                _ => None,
            })
            .collect();
        assert_eq!(frags, ["{\"a\\", "x", "y"]);
    }

    #[test]
    fn stop_reasons() {
        for (raw, want) in [
            ("tool_use", StopReason::ToolCalls),
            ("end_turn", StopReason::EndTurn),
            ("max_tokens", StopReason::MaxTokens),
            ("stop_sequence", StopReason::StopSequence),
            ("refusal", StopReason::ContentFilter),
            ("pause_turn", StopReason::Other),
            ("new_thing", StopReason::Other),
        ] {
            assert_eq!(stop_reason(raw), want);
        }
    }
}

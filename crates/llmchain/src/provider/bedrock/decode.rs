//! Decoding Bedrock Converse responses: ConverseStream's event-stream frames (each an
//! event named by its `:event-type` header, JSON payload) or one Converse JSON body.
//!
//! Content blocks are numbered (`contentBlockIndex`): a `contentBlockStart` names a tool
//! use (id and name), its deltas carry the input JSON in fragments, its stop finishes
//! the call. Text and reasoning blocks may arrive without a start. `messageStop` gives
//! the stop reason; `metadata` (which may follow it) the usage. A frame whose
//! `:message-type` is `exception` (or `error`) ends the stream as a typed provider error
//! (`throttlingException`, `validationException`, `modelStreamErrorException`...).

use std::borrow::Cow;
use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::message::{ContentType, MessageStatus, TokenUsage};
use crate::provider::assembly::{Assembler, Emit, malformed, wrong_format};
use crate::provider::error::DecodeError;
use crate::provider::event::{StopReason, StreamEvent};
use crate::provider::format::{DecoderConfig, StreamDecoder, cut_off};
use crate::provider::framing::{EventStreamFramer, Frame};
use crate::provider::outcome::DecodeOutcome;
use crate::provider::scan::json::Cursor;

use super::NAME as FORMAT;

/// Normalises a Converse `stopReason`.
pub(crate) fn stop_reason(raw: &str) -> StopReason {
    match raw {
        "end_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolCalls,
        "max_tokens" | "model_context_window_exceeded" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "guardrail_intervened" | "content_filtered" => StopReason::ContentFilter,
        _ => StopReason::Other,
    }
}

// Strings are borrowed from the frame when they hold no escapes (a `String` a field
// was a third of the decoder's time).
#[cfg_attr(test, derive(Debug, PartialEq))]
#[derive(Deserialize)]
struct ToolStart<'a> {
    #[serde(rename = "toolUseId", default, borrow)]
    tool_use_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
}

#[cfg_attr(test, derive(Debug, PartialEq))]
#[derive(Deserialize, Default)]
struct Start<'a> {
    #[serde(rename = "toolUse", default, borrow)]
    tool_use: Option<ToolStart<'a>>,
}

#[cfg_attr(test, derive(Debug, PartialEq))]
#[derive(Deserialize)]
struct ToolDelta<'a> {
    #[serde(default, borrow)]
    input: Option<Cow<'a, str>>,
}

#[cfg_attr(test, derive(Debug, PartialEq))]
#[derive(Deserialize)]
struct ReasoningDelta<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    signature: Option<Cow<'a, str>>,
    #[serde(rename = "redactedContent", default, borrow)]
    redacted_content: Option<Cow<'a, str>>,
}

#[cfg_attr(test, derive(Debug, PartialEq))]
#[derive(Deserialize, Default)]
struct Delta<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(rename = "toolUse", default, borrow)]
    tool_use: Option<ToolDelta<'a>>,
    // Boxed, as `usage` below: rare, and a payload is moved whole (its size was a tenth
    // of the decoder's time on a stream of many calls).
    #[serde(rename = "reasoningContent", default, borrow)]
    reasoning: Option<Box<ReasoningDelta<'a>>>,
}

#[cfg_attr(test, derive(Debug, PartialEq))]
#[derive(Deserialize, Default)]
struct Payload<'a> {
    #[serde(rename = "contentBlockIndex", default)]
    index: Option<u64>,
    #[serde(default, borrow)]
    start: Option<Start<'a>>,
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    #[serde(rename = "stopReason", default, borrow)]
    stop_reason: Option<Cow<'a, str>>,
    #[serde(default)]
    usage: Option<Box<Usage>>,
    #[serde(default, borrow)]
    message: Option<Cow<'a, str>>,
}

/// The payloads of the frames a stream is mostly made of (a block's start, delta and
/// stop) read straight from their bytes, as serde reads them into [`Payload`]; `None`
/// for anything else (another member, a null, a repeated key, an escape serde would
/// refuse), which serde then reads. Measured: serde took half of the decoder's time on
/// a stream of many calls. Fills `p` (empty) in place, as moving a payload was a tenth
/// of that time; `false` leaves it partly filled.
fn payload_fast<'a>(b: &'a [u8], p: &mut Payload<'a>, scratch: &'a mut String) -> bool {
    if payload_as_sent(b, p, scratch).is_some() {
        return true;
    }
    *p = Payload::default();
    let mut padding = false;
    let mut c = Cursor::new(b, 0);
    c.ws();
    c.object(|c, key| {
        match key {
            b"contentBlockIndex" if p.index.is_none() => p.index = Some(c.number_u64()?),
            b"p" if !padding => {
                c.string_text()?;
                padding = true;
            }
            b"delta" if p.delta.is_none() => p.delta = Some(delta_fast(c)?),
            b"start" if p.start.is_none() => p.start = Some(start_fast(c)?),
            b"stopReason" if p.stop_reason.is_none() => p.stop_reason = Some(c.string_text()?),
            _ => return None,
        }
        Some(())
    })
    .is_some()
        && {
            c.ws();
            c.at_end()
        }
}

/// A payload exactly as Bedrock writes a block's frames, its members in its order and
/// without whitespace: `{"contentBlockIndex":N,` then `"start":{"toolUse":{"toolUseId":S,
/// "name":S}}`, `"delta":{"toolUse":{"input":S}}` or `"delta":{"text":S}`, then the
/// padding `"p":S` (a stop has only the index and the padding). Compared byte by byte
/// against these literals rather than walked member by member: the walk was most of the
/// decoder's own time on a stream of many calls. A tool's input with escapes is decoded
/// into `scratch`, not a new `String` (an allocation a call). `None` for anything else
/// (`p` may then be partly filled), which [`payload_fast`]'s walk reads.
fn payload_as_sent<'a>(b: &'a [u8], p: &mut Payload<'a>, scratch: &'a mut String) -> Option<()> {
    let mut c = Cursor::new(b, 0);
    c.eat_array(b"{\"contentBlockIndex\":")?;
    p.index = Some(c.number_u64()?);
    if c.peek_eat(b",\"delta\":{\"") {
        if c.peek_eat(b"toolUse\":{\"input\":") {
            let input = c.string_text_in(scratch)?;
            c.eat_array(b"}}")?;
            p.delta = Some(Delta {
                tool_use: Some(ToolDelta {
                    input: Some(Cow::Borrowed(input)),
                }),
                ..Delta::default()
            });
        } else {
            c.eat_array(b"text\":")?;
            let text = c.string_text()?;
            c.eat_array(b"}")?;
            p.delta = Some(Delta {
                text: Some(text),
                ..Delta::default()
            });
        }
    } else if c.peek_eat(b",\"start\":{\"toolUse\":{\"toolUseId\":") {
        let id = c.string_text()?;
        c.eat_array(b",\"name\":")?;
        let name = c.string_text()?;
        c.eat_array(b"}}")?;
        p.start = Some(Start {
            tool_use: Some(ToolStart {
                tool_use_id: Some(id),
                name: Some(name),
            }),
        });
    }
    if c.peek_eat(b",\"p\":") {
        c.string_plain()?;
    }
    c.eat_array(b"}")?;
    c.at_end().then_some(())
}

/// `{"text": S}` or `{"toolUse": {"input": S}}`.
fn delta_fast<'a>(c: &mut Cursor<'a>) -> Option<Delta<'a>> {
    let mut d = Delta::default();
    c.object(|c, key| {
        match key {
            b"text" if d.text.is_none() => d.text = Some(c.string_text()?),
            b"toolUse" if d.tool_use.is_none() => {
                let mut input = None;
                c.object(|c, key| match key {
                    b"input" if input.is_none() => {
                        input = Some(c.string_text()?);
                        Some(())
                    }
                    _ => None,
                })?;
                d.tool_use = Some(ToolDelta { input });
            }
            _ => return None,
        }
        Some(())
    })?;
    Some(d)
}

/// `{"toolUse": {"toolUseId": S, "name": S}}`.
fn start_fast<'a>(c: &mut Cursor<'a>) -> Option<Start<'a>> {
    let mut tool = None;
    c.object(|c, key| {
        if key != b"toolUse" || tool.is_some() {
            return None;
        }
        let mut t = ToolStart {
            tool_use_id: None,
            name: None,
        };
        c.object(|c, key| {
            match key {
                b"toolUseId" if t.tool_use_id.is_none() => t.tool_use_id = Some(c.string_text()?),
                b"name" if t.name.is_none() => t.name = Some(c.string_text()?),
                _ => return None,
            }
            Some(())
        })?;
        tool = Some(t);
        Some(())
    })?;
    Some(Start { tool_use: tool })
}

#[cfg_attr(test, derive(Debug, PartialEq))]
#[derive(Deserialize, Default, Clone, Copy)]
pub(crate) struct Usage {
    #[serde(rename = "inputTokens", default)]
    input: Option<u64>,
    #[serde(rename = "outputTokens", default)]
    output: Option<u64>,
    #[serde(rename = "cacheReadInputTokens", default)]
    cache_read: Option<u64>,
    #[serde(rename = "cacheWriteInputTokens", default)]
    cache_write: Option<u64>,
}

impl Usage {
    pub(crate) fn tokens(self) -> TokenUsage {
        TokenUsage::new(self.input.unwrap_or(0), self.output.unwrap_or(0))
            .with_cache(self.cache_read, self.cache_write)
    }
}

/// What a content block index is.
#[derive(Debug, Clone, Copy)]
enum Block {
    Text(usize),
    Reasoning(usize),
    Tool(u32),
}

/// What each content block index is. Indices come in order from 0, so they index a
/// `Vec`; one far beyond those seen (a hostile or odd stream) goes to a map instead, so
/// that no index makes the `Vec` grow large. Measured: hashing the index was a tenth of
/// the decoder's time on a stream of many calls.
#[derive(Default)]
struct Blocks {
    dense: Vec<Option<Block>>,
    sparse: HashMap<u64, Block>,
}

impl Blocks {
    /// How far past the last dense index an index may be and still be dense.
    const GAP: usize = 64;

    fn get(&self, index: u64) -> Option<Block> {
        if let Ok(i) = usize::try_from(index)
            && let Some(Some(block)) = self.dense.get(i)
        {
            return Some(*block);
        }
        // Also an index the dense part grew over after it was put here.
        if self.sparse.is_empty() {
            return None;
        }
        self.sparse.get(&index).copied()
    }

    fn insert(&mut self, index: u64, block: Block) {
        match usize::try_from(index) {
            Ok(i) if i < self.dense.len() + Self::GAP => {
                if i >= self.dense.len() {
                    self.dense.resize(i + 1, None);
                }
                self.dense[i] = Some(block);
                // An index once sparse is dense now: one place holds it.
                if !self.sparse.is_empty() {
                    self.sparse.remove(&index);
                }
            }
            _ => {
                self.sparse.insert(index, block);
            }
        }
    }
}

/// The ConverseStream event handler.
pub(crate) struct Events {
    asm: Assembler,
    blocks: Blocks,
    stopped: bool,
    seen_event: bool,
    /// Where a payload's escaped tool input is decoded ([`payload_as_sent`]).
    scratch: String,
}

impl Events {
    pub(crate) fn new(config: DecoderConfig) -> Self {
        Events {
            asm: Assembler::new(config.max_argument_bytes),
            blocks: Blocks::default(),
            stopped: false,
            seen_event: false,
            scratch: String::new(),
        }
    }

    fn frame(&mut self, frame: Frame<'_>, emit: Emit<'_>) -> Result<(), DecodeError> {
        if frame.message_type().is_some_and(|t| t != b"event") {
            // `exception` (a modeled error) or `error` (an unmodeled one).
            let kind = frame
                .header(":exception-type")
                .or_else(|| frame.header(":error-code"))
                .unwrap_or("error");
            let message = frame
                .header(":error-message")
                .map(str::to_owned)
                .or_else(|| {
                    serde_json::from_slice::<Payload>(frame.payload)
                        .ok()
                        .and_then(|p| p.message.map(Cow::into_owned))
                })
                .unwrap_or_else(|| String::from_utf8_lossy(frame.payload).into_owned());
            self.seen_event = true;
            self.asm.set_error(kind, &message, emit);
            self.stopped = true;
            return Ok(());
        }
        if self.asm.has_error() {
            return Ok(());
        }
        let Some(event) = frame.event_type() else {
            return Err(malformed(FORMAT, "an event frame without :event-type"));
        };
        // The payload may borrow the scratch string: it is put back once the event is
        // handled.
        let mut scratch = std::mem::take(&mut self.scratch);
        let r = self.payload_event(event, frame.payload, &mut scratch, emit);
        self.scratch = scratch;
        r
    }

    /// Reads one event's payload (the template, the member walk, then serde) and
    /// handles it.
    fn payload_event(
        &mut self,
        event: &[u8],
        payload: &[u8],
        scratch: &mut String,
        emit: Emit<'_>,
    ) -> Result<(), DecodeError> {
        let mut p = Payload::default();
        if !payload_fast(payload, &mut p, scratch) {
            p = serde_json::from_slice(payload).map_err(|e| {
                let event = String::from_utf8_lossy(event);
                if e.is_data() {
                    malformed(FORMAT, format!("a {event} event of the wrong shape: {e}"))
                } else {
                    malformed(FORMAT, format!("a {event} event that is not JSON: {e}"))
                }
            })?;
        }
        self.seen_event = true;
        self.on_event(event, &mut p, emit)
    }

    fn on_event(
        &mut self,
        event: &[u8],
        p: &mut Payload<'_>,
        emit: Emit<'_>,
    ) -> Result<(), DecodeError> {
        match event {
            b"messageStart" => {}
            b"contentBlockStart" => {
                let index = p.index.unwrap_or(0);
                if let Some(tool) = p.start.take().and_then(|s| s.tool_use) {
                    let id = tool.tool_use_id.filter(|s| !s.is_empty());
                    let name = tool.name.unwrap_or_default();
                    let pos = self.asm.start_call(id.as_deref(), &name, emit);
                    self.blocks.insert(index, Block::Tool(pos));
                }
            }
            b"contentBlockDelta" => {
                let index = p.index.unwrap_or(0);
                let Some(delta) = p.delta.take() else {
                    return Ok(());
                };
                if let Some(text) = delta.text.filter(|t| !t.is_empty()) {
                    let pos = match self.blocks.get(index) {
                        Some(Block::Text(pos)) => pos,
                        _ => {
                            let pos = self.asm.open_part(ContentType::Text);
                            self.blocks.insert(index, Block::Text(pos));
                            pos
                        }
                    };
                    self.asm.push_text(pos, &text, emit);
                }
                if let Some(r) = delta.reasoning {
                    let r = *r;
                    let pos = match self.blocks.get(index) {
                        Some(Block::Reasoning(pos)) => pos,
                        _ => {
                            let pos = self.asm.open_part(ContentType::Thinking);
                            self.blocks.insert(index, Block::Reasoning(pos));
                            pos
                        }
                    };
                    if let Some(t) = r.text.filter(|t| !t.is_empty()) {
                        self.asm.push_text(pos, &t, emit);
                    }
                    if let Some(s) = r.signature {
                        self.asm.push_signature(pos, &s, emit);
                    }
                    if let Some(data) = r.redacted_content {
                        self.asm
                            .set_part_option(pos, "redacted", Value::String(data.into_owned()));
                    }
                }
                if let Some(input) = delta.tool_use.and_then(|t| t.input) {
                    let pos = match self.blocks.get(index) {
                        Some(Block::Tool(pos)) => pos,
                        // Input for a block never started: a call without id or name.
                        _ => {
                            let pos = self.asm.start_call(None, "", emit);
                            self.blocks.insert(index, Block::Tool(pos));
                            pos
                        }
                    };
                    self.asm.push_arguments(pos, &input, emit)?;
                }
            }
            b"contentBlockStop" => {
                if let Some(Block::Tool(pos)) = p.index.and_then(|i| self.blocks.get(i)) {
                    self.asm.finish_call(pos, emit)?;
                }
            }
            b"messageStop" => {
                let raw = p.stop_reason.take().unwrap_or_else(|| "end_turn".into());
                self.asm.set_stop(stop_reason(&raw), &raw, emit);
                self.stopped = true;
            }
            b"metadata" => {
                if let Some(u) = p.usage.take() {
                    self.asm.set_usage(u.tokens());
                }
            }
            // Event types added later are skipped.
            _ => {}
        }
        Ok(())
    }

    fn finish(mut self, emit: Emit<'_>) -> Result<DecodeOutcome, DecodeError> {
        let status = if !self.stopped {
            MessageStatus::Cancelled
        } else {
            // Calls whose stop never came, in a message that did stop: finished as sent.
            self.asm.finish_all(emit)?;
            match self.asm.stop() {
                Some(StopReason::MaxTokens) => MessageStatus::Length,
                _ => MessageStatus::Complete,
            }
        };
        Ok(self.asm.into_outcome(status, emit))
    }
}

/// The ConverseStream decoder: frames, then events.
pub(crate) struct StreamDec {
    framer: EventStreamFramer,
    events: Option<Events>,
    /// A body that is JSON rather than frames (an error body, a Converse response).
    whole: Option<Vec<u8>>,
    config: DecoderConfig,
    failed: Option<DecodeError>,
    /// Only whitespace so far: JSON or frames is not decided yet.
    undecided: bool,
    /// That whitespace.
    lead: Vec<u8>,
}

impl StreamDec {
    pub(crate) fn new(config: DecoderConfig) -> Self {
        StreamDec {
            framer: EventStreamFramer::new(FORMAT, config.max_line_bytes),
            events: Some(Events::new(config)),
            whole: None,
            config,
            failed: None,
            undecided: true,
            lead: Vec::new(),
        }
    }
}

impl StreamDecoder for StreamDec {
    fn feed(
        &mut self,
        chunk: &[u8],
        on_event: &mut dyn FnMut(StreamEvent<'_>),
    ) -> Result<(), DecodeError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let Some(events) = self.events.as_mut() else {
            return Err(malformed(FORMAT, "the stream was already finished"));
        };
        // A JSON body: kept whole (capped) and decoded at the end.
        if let Some(whole) = self.whole.as_mut() {
            if whole.len() + chunk.len() > self.config.max_line_bytes {
                let e = DecodeError::LineTooLong {
                    limit: self.config.max_line_bytes,
                };
                self.failed = Some(e.clone());
                return Err(e);
            }
            whole.extend_from_slice(chunk);
            return Ok(());
        }
        // Until a byte that is not whitespace comes, the body may still be JSON: the
        // first such byte decides (as `is_stream_body` does), whatever the chunking.
        let mut lead = None;
        if self.undecided {
            match chunk.iter().position(|b| !b.is_ascii_whitespace()) {
                None => {
                    if self.lead.len() + chunk.len() > self.config.max_line_bytes {
                        let e = DecodeError::LineTooLong {
                            limit: self.config.max_line_bytes,
                        };
                        self.failed = Some(e.clone());
                        return Err(e);
                    }
                    self.lead.extend_from_slice(chunk);
                    return Ok(());
                }
                Some(i) => {
                    self.undecided = false;
                    let mut all = std::mem::take(&mut self.lead);
                    all.extend_from_slice(chunk);
                    if chunk[i] == b'{' {
                        self.whole = Some(all);
                        return Ok(());
                    }
                    lead = Some(all);
                }
            }
        }
        let bytes = lead.as_deref().unwrap_or(chunk);
        let r = self
            .framer
            .feed(bytes, &mut |frame| events.frame(frame, on_event));
        if let Err(e) = &r {
            self.failed = Some(e.clone());
        }
        r
    }

    fn finish(
        &mut self,
        on_event: &mut dyn FnMut(StreamEvent<'_>),
    ) -> Result<DecodeOutcome, DecodeError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let events = self
            .events
            .take()
            .ok_or_else(|| malformed(FORMAT, "the stream was already finished"))?;
        if let Some(whole) = self.whole.take() {
            return decode_whole(&whole, self.config, on_event);
        }
        if self.undecided {
            return Err(malformed(FORMAT, "the body is empty"));
        }
        if self.framer.pending() > 0 && !events.stopped {
            // The body ended inside a frame: what arrived whole is kept, cut off.
            return events.finish(on_event);
        }
        if !events.seen_event {
            return Err(malformed(FORMAT, "the body is empty"));
        }
        events.finish(on_event)
    }

    fn interrupt(&mut self) -> Option<crate::message::Message> {
        let events = self.events.take()?;
        let mut sink = |_: StreamEvent<'_>| {};
        let outcome = events.asm.into_outcome(MessageStatus::Cancelled, &mut sink);
        Some(cut_off(outcome.message))
    }
}

#[derive(Deserialize)]
struct Whole {
    #[serde(default)]
    output: Option<Output>,
    #[serde(rename = "stopReason", default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize)]
struct Output {
    #[serde(default)]
    message: Option<WholeMessage>,
}

#[derive(Deserialize)]
struct WholeMessage {
    #[serde(default)]
    content: Vec<Map<String, Value>>,
}

/// Decodes a Converse response body (or a JSON error body).
pub(crate) fn decode_whole(
    body: &[u8],
    config: DecoderConfig,
    emit: Emit<'_>,
) -> Result<DecodeOutcome, DecodeError> {
    if body.trim_ascii().is_empty() {
        return Err(malformed(FORMAT, "the body is empty"));
    }
    let w: Whole = serde_json::from_slice(body).map_err(|e| {
        if e.is_data() {
            wrong_format(FORMAT, format!("not a Converse response: {e}"))
        } else {
            malformed(FORMAT, e.to_string())
        }
    })?;
    let mut ev = Events::new(config);
    let Some(message) = w.output.and_then(|o| o.message) else {
        if let Some(m) = w.message {
            // An error body: `{"message": "..."}`.
            ev.asm.set_error("error", &m, emit);
            ev.stopped = true;
            return ev.finish(emit);
        }
        return Err(wrong_format(FORMAT, "a body without output.message"));
    };
    for block in message.content {
        if let Some(Value::String(t)) = block.get("text") {
            let pos = ev.asm.open_part(ContentType::Text);
            ev.asm.push_text(pos, t, emit);
        } else if let Some(Value::Object(tool)) = block.get("toolUse") {
            let id = tool.get("toolUseId").and_then(Value::as_str);
            let name = tool.get("name").and_then(Value::as_str).unwrap_or("");
            let pos = ev.asm.start_call(id, name, emit);
            match tool.get("input") {
                Some(Value::Object(o)) => ev.asm.set_arguments_object(pos, o.clone(), emit)?,
                Some(Value::Null) | None => {}
                Some(other) => ev.asm.push_arguments(pos, &other.to_string(), emit)?,
            }
            ev.asm.finish_call(pos, emit)?;
        } else if let Some(Value::Object(r)) = block.get("reasoningContent") {
            let pos = ev.asm.open_part(ContentType::Thinking);
            if let Some(Value::Object(rt)) = r.get("reasoningText") {
                if let Some(t) = rt.get("text").and_then(Value::as_str) {
                    ev.asm.push_text(pos, t, emit);
                }
                if let Some(s) = rt.get("signature").and_then(Value::as_str) {
                    ev.asm.set_signature(pos, s, emit);
                }
            }
            if let Some(Value::String(data)) = r.get("redactedContent") {
                ev.asm
                    .set_part_option(pos, "redacted", Value::String(data.clone()));
            }
        }
    }
    let raw = w.stop_reason.unwrap_or_else(|| "end_turn".into());
    ev.asm.set_stop(stop_reason(&raw), &raw, emit);
    if let Some(u) = w.usage {
        ev.asm.set_usage(u.tokens());
    }
    ev.stopped = true;
    ev.finish(emit)
}

/// A streaming decoder of this format (its codec's [`Codec::stream_decoder`]).
///
/// [`Codec::stream_decoder`]: crate::provider::Codec::stream_decoder
pub(crate) fn stream_decoder(config: DecoderConfig) -> StreamDec {
    StreamDec::new(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the fast reader reads of `b`, if it reads it.
    fn fast(b: &[u8]) -> Option<Payload<'static>> {
        let mut p = Payload::default();
        let mut scratch = String::new();
        payload_fast(b, &mut p, &mut scratch).then(|| owned(p))
    }

    /// `p` owning its text.
    fn owned(p: Payload<'_>) -> Payload<'static> {
        let own = |c: Option<Cow<'_, str>>| c.map(|c| Cow::Owned(c.into_owned()));
        Payload {
            index: p.index,
            start: p.start.map(|s| Start {
                tool_use: s.tool_use.map(|t| ToolStart {
                    tool_use_id: own(t.tool_use_id),
                    name: own(t.name),
                }),
            }),
            delta: p.delta.map(|d| Delta {
                text: own(d.text),
                tool_use: d.tool_use.map(|t| ToolDelta {
                    input: own(t.input),
                }),
                reasoning: d.reasoning.map(|r| {
                    Box::new(ReasoningDelta {
                        text: own(r.text),
                        signature: own(r.signature),
                        redacted_content: own(r.redacted_content),
                    })
                }),
            }),
            stop_reason: own(p.stop_reason),
            usage: p.usage,
            message: own(p.message),
        }
    }

    #[test]
    fn block_indices_far_apart_stay_small_and_found() {
        let mut b = Blocks::default();
        b.insert(100, Block::Tool(7));
        b.insert(u64::MAX, Block::Text(1));
        for i in 0..=60 {
            b.insert(i, Block::Text(i as usize));
        }
        // The dense part grows over 100, which stays where it was put.
        b.insert(120, Block::Reasoning(2));
        assert!(matches!(b.get(100), Some(Block::Tool(7))));
        assert!(matches!(b.get(u64::MAX), Some(Block::Text(1))));
        assert!(matches!(b.get(60), Some(Block::Text(60))));
        assert!(matches!(b.get(120), Some(Block::Reasoning(2))));
        assert!(b.get(61).is_none() && b.get(5_000).is_none());
        // Put again once dense: one place holds it.
        b.insert(100, Block::Tool(8));
        assert!(matches!(b.get(100), Some(Block::Tool(8))));
        assert!(b.dense.len() <= 121, "{}", b.dense.len());
        b.insert(1 << 40, Block::Text(3));
        assert!(b.dense.len() <= 121);
    }
    use proptest::prelude::*;

    /// A JSON string literal of `s` (characters of the basic plane), every character
    /// as a `\uXXXX` escape when `escape`.
    fn lit(s: &str, escape: bool) -> String {
        if escape {
            let body: String = s.chars().map(|c| format!("\\u{:04x}", c as u32)).collect();
            format!("\"{body}\"")
        } else {
            serde_json::to_string(s).unwrap()
        }
    }

    fn member() -> impl Strategy<Value = String> {
        let text = "[a-z\"\\\\é\n ]{0,12}";
        prop_oneof![
            (0u64..1_000_000).prop_map(|n| format!("\"contentBlockIndex\":{n}")),
            Just("\"contentBlockIndex\":1.0".to_owned()),
            Just("\"contentBlockIndex\":null".to_owned()),
            (text, any::<bool>()).prop_map(|(t, e)| format!("\"p\":{}", lit(&t, e))),
            (text, any::<bool>())
                .prop_map(|(t, e)| format!("\"delta\":{{\"text\":{}}}", lit(&t, e))),
            (text, any::<bool>()).prop_map(|(t, e)| format!(
                "\"delta\":{{\"toolUse\":{{\"input\":{}}}}}",
                lit(&t, e)
            )),
            (text, text).prop_map(|(i, n)| format!(
                "\"start\":{{\"toolUse\":{{\"toolUseId\":{},\"name\":{}}}}}",
                lit(&i, false),
                lit(&n, false)
            )),
            (text).prop_map(|t| format!("\"stopReason\":{}", lit(&t, false))),
            Just("\"other\":[1,2]".to_owned()),
            Just("\"delta\":{\"text\":\"a\\x\"}".to_owned()),
        ]
    }

    /// Payloads shaped as Bedrock sends them, with any strings in them.
    fn as_sent() -> impl Strategy<Value = String> {
        let text = "[a-z\"\\\\é\n ]{0,12}";
        let block = prop_oneof![
            Just(String::new()),
            (text, any::<bool>())
                .prop_map(|(t, e)| format!(",\"delta\":{{\"text\":{}}}", lit(&t, e))),
            (text, any::<bool>()).prop_map(|(t, e)| format!(
                ",\"delta\":{{\"toolUse\":{{\"input\":{}}}}}",
                lit(&t, e)
            )),
            (text, text, any::<bool>()).prop_map(|(i, n, e)| format!(
                ",\"start\":{{\"toolUse\":{{\"toolUseId\":{},\"name\":{}}}}}",
                lit(&i, e),
                lit(&n, false)
            )),
        ];
        // Bedrock pads every payload; a payload without the padding is read too.
        let pad = prop_oneof![
            Just(String::new()),
            (text, any::<bool>()).prop_map(|(t, e)| format!(",\"p\":{}", lit(&t, e))),
        ];
        (0u64..1_000_000, block, pad)
            .prop_map(|(n, block, pad)| format!("{{\"contentBlockIndex\":{n}{block}{pad}}}"))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// The payloads as Bedrock sends them are read as serde reads them, by the
        /// byte template whenever their strings are plain.
        #[test]
        fn payloads_as_sent_read_as_serde_reads_them(body in as_sent()) {
            let slow: Payload = serde_json::from_slice(body.as_bytes())
                .unwrap_or_else(|e| panic!("{body}: {e}"));
            let mut p = Payload::default();
            let mut scratch = String::new();
            if payload_as_sent(body.as_bytes(), &mut p, &mut scratch).is_some() {
                prop_assert_eq!(&p, &slow, "{}", body);
            } else {
                prop_assert!(body.contains('\\'), "{body}: plain, yet not read as sent");
            }
            prop_assert_eq!(fast(body.as_bytes()), Some(slow), "{}", body);
        }

        /// Whatever the fast reader accepts, serde reads the same.
        #[test]
        fn the_fast_reader_agrees_with_serde(
            members in proptest::collection::vec(member(), 0..5),
            space in any::<bool>(),
        ) {
            let sep = if space { " , " } else { "," };
            let body = format!("{{{}}}", members.join(sep));
            if let Some(fast) = fast(body.as_bytes()) {
                let slow: Payload = serde_json::from_slice(body.as_bytes())
                    .unwrap_or_else(|e| panic!("{body}: fast read it, serde says {e}"));
                prop_assert_eq!(fast, slow, "{}", body);
            }
        }
    }

    #[test]
    fn the_usual_frames_take_the_fast_reader() {
        for body in [
            r#"{"contentBlockIndex":3,"delta":{"toolUse":{"input":"{\"city\":"}},"p":"abcdefg"}"#,
            r#"{"contentBlockIndex":0,"delta":{"text":"Hello"},"p":"abc"}"#,
            r#"{"contentBlockIndex":1,"start":{"toolUse":{"toolUseId":"t1","name":"f"}},"p":"ab"}"#,
            r#"{"contentBlockIndex":1,"p":"abcdef"}"#,
            r#"{"stopReason":"tool_use","p":"a"}"#,
        ] {
            assert!(fast(body.as_bytes()).is_some(), "{body}");
            if body.starts_with(r#"{"contentBlockIndex""#) {
                let mut p = Payload::default();
                let mut scratch = String::new();
                assert!(
                    payload_as_sent(body.as_bytes(), &mut p, &mut scratch).is_some(),
                    "{body}"
                );
            }
        }
        // A repeated member is serde's to refuse.
        assert!(fast(br#"{"contentBlockIndex":1,"contentBlockIndex":2}"#).is_none());
    }
}

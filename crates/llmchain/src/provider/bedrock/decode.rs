//! Decoding Bedrock Converse responses: ConverseStream's event-stream frames (each an
//! event named by its `:event-type` header, JSON payload) or one Converse JSON body.
//!
//! Content blocks are numbered (`contentBlockIndex`): a `contentBlockStart` names a tool
//! use (id and name), its deltas carry the input JSON in fragments, its stop finishes
//! the call. Text and reasoning blocks may arrive without a start. `messageStop` gives
//! the stop reason; `metadata` (which may follow it) the usage. A frame whose
//! `:message-type` is `exception` (or `error`) ends the stream as a typed provider error
//! (`throttlingException`, `validationException`, `modelStreamErrorException`...).

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

pub(crate) const FORMAT: &str = "bedrock_converse";

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

#[derive(Deserialize)]
struct ToolStart {
    #[serde(rename = "toolUseId", default)]
    tool_use_id: Option<String>,
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize, Default)]
struct Start {
    #[serde(rename = "toolUse", default)]
    tool_use: Option<ToolStart>,
}

#[derive(Deserialize)]
struct ToolDelta {
    #[serde(default)]
    input: Option<String>,
}

#[derive(Deserialize)]
struct ReasoningDelta {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    signature: Option<String>,
    #[serde(rename = "redactedContent", default)]
    redacted_content: Option<String>,
}

#[derive(Deserialize, Default)]
struct Delta {
    #[serde(default)]
    text: Option<String>,
    #[serde(rename = "toolUse", default)]
    tool_use: Option<ToolDelta>,
    #[serde(rename = "reasoningContent", default)]
    reasoning: Option<ReasoningDelta>,
}

#[derive(Deserialize)]
struct Payload {
    #[serde(rename = "contentBlockIndex", default)]
    index: Option<u64>,
    #[serde(default)]
    start: Option<Start>,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(rename = "stopReason", default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    message: Option<String>,
}

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

/// The ConverseStream event handler.
pub(crate) struct Events {
    asm: Assembler,
    blocks: HashMap<u64, Block>,
    stopped: bool,
    seen_event: bool,
}

impl Events {
    pub(crate) fn new(config: DecoderConfig) -> Self {
        Events {
            asm: Assembler::new(config.max_argument_bytes),
            blocks: HashMap::new(),
            stopped: false,
            seen_event: false,
        }
    }

    fn frame(&mut self, frame: Frame<'_>, emit: Emit<'_>) -> Result<(), DecodeError> {
        let message_type = frame.header(":message-type").unwrap_or("event");
        if message_type != "event" {
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
                        .and_then(|p| p.message)
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
        let Some(event) = frame.header(":event-type") else {
            return Err(malformed(FORMAT, "an event frame without :event-type"));
        };
        let p: Payload = serde_json::from_slice(frame.payload).map_err(|e| {
            if e.is_data() {
                malformed(FORMAT, format!("a {event} event of the wrong shape: {e}"))
            } else {
                malformed(FORMAT, format!("a {event} event that is not JSON: {e}"))
            }
        })?;
        self.seen_event = true;
        self.on_event(event, p, emit)
    }

    fn on_event(&mut self, event: &str, p: Payload, emit: Emit<'_>) -> Result<(), DecodeError> {
        match event {
            "messageStart" => {}
            "contentBlockStart" => {
                let index = p.index.unwrap_or(0);
                if let Some(tool) = p.start.and_then(|s| s.tool_use) {
                    let id = tool.tool_use_id.filter(|s| !s.is_empty());
                    let name = tool.name.unwrap_or_default();
                    let pos = self.asm.start_call(id.as_deref(), &name, emit);
                    self.blocks.insert(index, Block::Tool(pos));
                }
            }
            "contentBlockDelta" => {
                let index = p.index.unwrap_or(0);
                let Some(delta) = p.delta else { return Ok(()) };
                if let Some(text) = delta.text.filter(|t| !t.is_empty()) {
                    let pos = match self.blocks.get(&index) {
                        Some(Block::Text(pos)) => *pos,
                        _ => {
                            let pos = self.asm.open_part(ContentType::Text);
                            self.blocks.insert(index, Block::Text(pos));
                            pos
                        }
                    };
                    self.asm.push_text(pos, &text, emit);
                }
                if let Some(r) = delta.reasoning {
                    let pos = match self.blocks.get(&index) {
                        Some(Block::Reasoning(pos)) => *pos,
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
                            .set_part_option(pos, "redacted", Value::String(data));
                    }
                }
                if let Some(input) = delta.tool_use.and_then(|t| t.input) {
                    let pos = match self.blocks.get(&index) {
                        Some(Block::Tool(pos)) => *pos,
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
            "contentBlockStop" => {
                if let Some(Block::Tool(pos)) = p.index.and_then(|i| self.blocks.get(&i)).copied() {
                    self.asm.finish_call(pos, emit)?;
                }
            }
            "messageStop" => {
                let raw = p.stop_reason.unwrap_or_else(|| "end_turn".into());
                self.asm.set_stop(stop_reason(&raw), &raw, emit);
                self.stopped = true;
            }
            "metadata" => {
                if let Some(u) = p.usage {
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

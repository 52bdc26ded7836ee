//! [`Assembler`]: builds the assistant message of a decoded body, event by event.
//!
//! The Anthropic, Gemini and Ollama decoders parse their wire events and call the
//! assembler, which keeps content parts, tool calls, usage, the stop reason and any
//! provider error, emits the matching [`StreamEvent`]s, and finally turns everything into
//! a [`DecodeOutcome`]. Hand-written because it is the core of every decoder: it appends
//! argument fragments in place (O(fragment)), caps their size, and never re-parses.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::error::DecodeError;
use super::event::{StopReason, StreamEvent};
use super::json_scan::read_string_into;
use super::outcome::{DecodeOutcome, ProviderError};
use crate::message::{
    Arguments, ContentPart, ContentType, Message, MessageStatus, Role, TokenUsage, ToolCall,
    ToolCallStatus,
};

/// The metadata key marking a call id the decoder made up (the wire had none). Encoders
/// never echo such ids to the provider.
pub const SYNTHESIZED_ID_KEY: &str = "synthesized_id";

/// The metadata key of a Gemini thought signature (on calls) and the option key on text
/// parts.
pub const THOUGHT_SIGNATURE_KEY: &str = "thought_signature";

/// Emitter of stream events.
pub(crate) type Emit<'e> = &'e mut dyn FnMut(StreamEvent<'_>);

/// A tool call being assembled.
#[derive(Debug, Default)]
pub(crate) struct CallState {
    call_id: Option<String>,
    name: String,
    raw: String,
    object: Option<Map<String, Value>>,
    finished: bool,
    metadata: Map<String, Value>,
}

/// The message being assembled. See the module docs.
#[derive(Debug)]
pub(crate) struct Assembler {
    format: &'static str,
    max_argument_bytes: usize,
    parts: Vec<ContentPart>,
    calls: Vec<CallState>,
    usage: Option<TokenUsage>,
    stop: Option<(StopReason, String)>,
    error: Option<ProviderError>,
}

impl Assembler {
    /// An empty message for `format`, with the argument cap.
    pub(crate) fn new(format: &'static str, max_argument_bytes: usize) -> Self {
        Assembler {
            format,
            max_argument_bytes,
            parts: Vec::new(),
            calls: Vec::new(),
            usage: None,
            stop: None,
            error: None,
        }
    }

    /// Opens a new content part of `ty`; returns its position.
    pub(crate) fn open_part(&mut self, ty: ContentType) -> usize {
        self.parts.push(ContentPart::new(ty, String::new()));
        self.parts.len() - 1
    }

    /// The position of the newest part when it has type `ty`, else a new part's.
    pub(crate) fn part_for(&mut self, ty: ContentType) -> usize {
        match self.parts.last() {
            Some(p) if p.r#type == ty => self.parts.len() - 1,
            _ => self.open_part(ty),
        }
    }

    /// Appends text (or reasoning, by the part's type) at `pos`.
    pub(crate) fn push_text(&mut self, pos: usize, text: &str, emit: Emit<'_>) {
        let Some(part) = self.parts.get_mut(pos) else {
            return;
        };
        if text.is_empty() {
            return;
        }
        part.content.push_str(text);
        let text = Cow::Borrowed(text);
        emit(match part.r#type {
            ContentType::Thinking => StreamEvent::ReasoningDelta { index: pos, text },
            _ => StreamEvent::TextDelta { index: pos, text },
        });
    }

    /// Appends a reasoning signature fragment to `options.signature` at `pos`.
    pub(crate) fn push_signature(&mut self, pos: usize, sig: &str, emit: Emit<'_>) {
        let Some(part) = self.parts.get_mut(pos) else {
            return;
        };
        if sig.is_empty() {
            return;
        }
        match part.options.get_mut("signature") {
            Some(Value::String(s)) => s.push_str(sig),
            _ => {
                part.options
                    .insert("signature".into(), Value::String(sig.to_owned()));
            }
        }
        emit(StreamEvent::ReasoningSignature {
            index: pos,
            signature: Cow::Borrowed(sig),
        });
    }

    /// Sets the whole reasoning signature at `pos` (Gemini: one per part, not fragments).
    pub(crate) fn set_signature(&mut self, pos: usize, sig: &str, emit: Emit<'_>) {
        if sig.is_empty() || pos >= self.parts.len() {
            return;
        }
        self.set_part_option(pos, "signature", Value::String(sig.to_owned()));
        emit(StreamEvent::ReasoningSignature {
            index: pos,
            signature: Cow::Borrowed(sig),
        });
    }

    /// Sets an option of the part at `pos` (overwriting).
    pub(crate) fn set_part_option(&mut self, pos: usize, key: &str, value: Value) {
        if let Some(part) = self.parts.get_mut(pos) {
            part.options.insert(key.to_owned(), value);
        }
    }

    /// Number of calls so far.
    pub(crate) fn call_count(&self) -> usize {
        self.calls.len()
    }

    /// True when at least one call finished.
    pub(crate) fn has_finished_calls(&self) -> bool {
        self.calls.iter().any(|c| c.finished)
    }

    /// Starts a call; an empty id counts as none. Returns its position.
    pub(crate) fn start_call(&mut self, call_id: Option<&str>, name: &str, emit: Emit<'_>) -> u32 {
        let call_id = call_id.filter(|s| !s.is_empty());
        let pos = u32::try_from(self.calls.len()).unwrap_or(u32::MAX);
        self.calls.push(CallState {
            call_id: call_id.map(str::to_owned),
            name: name.to_owned(),
            ..Default::default()
        });
        emit(StreamEvent::ToolCallStarted {
            index: pos,
            call_id: call_id.map(Cow::Borrowed),
            name: Cow::Borrowed(name),
        });
        pos
    }

    /// Starts a call whose id the decoder made up (marked in metadata).
    pub(crate) fn start_synthesized_call(
        &mut self,
        call_id: &str,
        name: &str,
        emit: Emit<'_>,
    ) -> u32 {
        let pos = self.start_call(Some(call_id), name, emit);
        self.set_call_metadata(pos, SYNTHESIZED_ID_KEY, Value::Bool(true));
        pos
    }

    /// Sets a metadata key of a call.
    pub(crate) fn set_call_metadata(&mut self, pos: u32, key: &str, value: Value) {
        if let Some(c) = self.calls.get_mut(pos as usize) {
            c.metadata.insert(key.to_owned(), value);
        }
    }

    fn call_mut(&mut self, pos: u32) -> Option<&mut CallState> {
        self.calls.get_mut(pos as usize)
    }

    fn check_cap(&self, current: usize, more: usize) -> Result<(), DecodeError> {
        if current.saturating_add(more) > self.max_argument_bytes {
            return Err(DecodeError::ArgumentsTooLarge {
                limit: self.max_argument_bytes,
            });
        }
        Ok(())
    }

    /// Appends an argument text fragment.
    pub(crate) fn push_arguments(
        &mut self,
        pos: u32,
        fragment: &str,
        emit: Emit<'_>,
    ) -> Result<(), DecodeError> {
        let cur = match self.calls.get(pos as usize) {
            Some(c) => c.raw.len(),
            None => return Ok(()),
        };
        self.check_cap(cur, fragment.len())?;
        if fragment.is_empty() {
            return Ok(());
        }
        if let Some(c) = self.call_mut(pos) {
            c.raw.push_str(fragment);
        }
        emit(StreamEvent::ToolCallArguments {
            index: pos,
            fragment: Cow::Borrowed(fragment),
        });
        Ok(())
    }

    /// The hot path of fragment streams: decodes the JSON string literal at the start
    /// of `literal` straight into the call's arguments, when exactly `tail` follows it.
    /// `None` (nothing changed, nothing emitted) when the bytes are not in that shape or
    /// might pass the cap: the caller then takes the full parse, which decides.
    pub(crate) fn push_arguments_literal(
        &mut self,
        pos: u32,
        literal: &[u8],
        tail: &[u8],
        emit: Emit<'_>,
    ) -> Option<()> {
        let limit = self.max_argument_bytes;
        let c = self.calls.get_mut(pos as usize)?;
        // Decoding never makes text longer: the literal's length bounds the growth.
        if c.raw.len().saturating_add(literal.len()) > limit {
            return None;
        }
        let start = c.raw.len();
        match read_string_into(literal, &mut c.raw) {
            Some(n) if &literal[n..] == tail => {}
            _ => {
                c.raw.truncate(start);
                return None;
            }
        }
        if c.raw.len() > start {
            emit(StreamEvent::ToolCallArguments {
                index: pos,
                fragment: Cow::Borrowed(&c.raw[start..]),
            });
        }
        Some(())
    }

    /// Sets a call's arguments given whole as an object: they are emitted as one
    /// fragment of their JSON text.
    pub(crate) fn set_arguments_object(
        &mut self,
        pos: u32,
        object: Map<String, Value>,
        emit: Emit<'_>,
    ) -> Result<(), DecodeError> {
        let text = Value::Object(object).to_string();
        self.check_cap(0, text.len())?;
        let Some(c) = self.call_mut(pos) else {
            return Ok(());
        };
        c.raw.clear();
        c.raw.push_str(&text);
        emit(StreamEvent::ToolCallArguments {
            index: pos,
            fragment: Cow::Borrowed(&text),
        });
        Ok(())
    }

    /// Keeps an object to use when no argument text arrives (Anthropic's whole `input`).
    pub(crate) fn set_fallback_object(&mut self, pos: u32, object: Map<String, Value>) {
        if let Some(c) = self.call_mut(pos) {
            c.object = Some(object);
        }
    }

    /// Marks a call's arguments complete on the wire.
    pub(crate) fn finish_call(&mut self, pos: u32, emit: Emit<'_>) -> Result<(), DecodeError> {
        let Some(c) = self.calls.get(pos as usize) else {
            return Ok(());
        };
        if c.finished {
            return Ok(());
        }
        if c.raw.is_empty()
            && let Some(obj) = c.object.clone()
            && !obj.is_empty()
        {
            self.set_arguments_object(pos, obj, emit)?;
        }
        if let Some(c) = self.call_mut(pos) {
            c.finished = true;
            c.object = None;
        }
        emit(StreamEvent::ToolCallFinished { index: pos });
        Ok(())
    }

    /// Records the stop reason and emits it.
    pub(crate) fn set_stop(&mut self, reason: StopReason, raw: &str, emit: Emit<'_>) {
        self.stop = Some((reason, raw.to_owned()));
        emit(StreamEvent::Stop {
            reason,
            raw: Cow::Borrowed(raw),
        });
    }

    /// The stop reason so far.
    pub(crate) fn stop(&self) -> Option<StopReason> {
        self.stop.as_ref().map(|s| s.0)
    }

    /// Replaces the usage record (providers here report cumulative figures).
    pub(crate) fn set_usage(&mut self, usage: TokenUsage) {
        self.usage = Some(usage);
    }

    /// Records a provider error and emits it.
    pub(crate) fn set_error(&mut self, kind: &str, message: &str, emit: Emit<'_>) {
        self.error = Some(ProviderError {
            kind: kind.to_owned(),
            message: message.to_owned(),
        });
        emit(StreamEvent::Error {
            kind: Cow::Borrowed(kind),
            message: Cow::Borrowed(message),
        });
    }

    /// True once a provider error was recorded.
    pub(crate) fn has_error(&self) -> bool {
        self.error.is_some()
    }

    /// Ends the message. `status` is what the wire said; a message that is `Complete`
    /// with an unfinished call becomes `Cancelled`. A provider error makes it
    /// `Cancelled`. Emits the final usage.
    pub(crate) fn into_outcome(self, mut status: MessageStatus, emit: Emit<'_>) -> DecodeOutcome {
        let mut streaming_error = None;
        if let Some(e) = &self.error {
            status = MessageStatus::Cancelled;
            streaming_error = Some(format!("{}: {}", e.kind, e.message));
        }
        if status == MessageStatus::Complete && self.calls.iter().any(|c| !c.finished) {
            status = MessageStatus::Cancelled;
            streaming_error = Some("a tool call never finished".to_owned());
        }
        if let Some(u) = self.usage {
            emit(StreamEvent::Usage(u));
        }
        let tool_calls = self
            .calls
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let arguments = if !c.raw.is_empty() {
                    Some(Arguments::Raw(c.raw))
                } else if c.finished {
                    Some(Arguments::Object(Map::new()))
                } else {
                    None
                };
                ToolCall {
                    status: ToolCallStatus::Incomplete,
                    call_id: c.call_id,
                    name: (!c.name.is_empty()).then_some(c.name),
                    arguments,
                    index: Some(u32::try_from(i).unwrap_or(u32::MAX)),
                    metadata: c.metadata,
                    ..Default::default()
                }
            })
            .collect();
        let mut message = Message {
            role: Role::Assistant,
            status,
            content: self
                .parts
                .into_iter()
                .filter(|p| !p.content.is_empty() || !p.options.is_empty())
                .collect(),
            tool_calls,
            ..Default::default()
        };
        if let Some(e) = streaming_error {
            message
                .metadata
                .insert("streaming_error".into(), Value::String(e));
        }
        if let Some(u) = self.usage {
            message.set_usage(u);
        }
        let invalid_tool_calls = message.complete_tool_calls();
        let (stop_reason, raw_stop_reason) = match self.stop {
            Some((r, raw)) => (Some(r), Some(raw)),
            None if self.error.is_some() => (Some(StopReason::Error), None),
            None => (None, None),
        };
        DecodeOutcome {
            message,
            invalid_tool_calls,
            stop_reason,
            raw_stop_reason,
            usage: self.usage,
            error: self.error,
        }
    }
}

/// A `Malformed` error for `format`.
pub(crate) fn malformed(format: &'static str, message: impl Into<String>) -> DecodeError {
    DecodeError::Malformed {
        format,
        message: message.into(),
    }
}

/// A `WrongFormat` error for `format`.
pub(crate) fn wrong_format(format: &'static str, message: impl Into<String>) -> DecodeError {
    DecodeError::WrongFormat {
        format,
        message: message.into(),
    }
}

/// A short stable hash (FNV-1a, 32 bits) used to make synthesised ids unique per response.
pub(crate) fn short_hash(s: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in s.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcome_rules() {
        let mut a = Assembler::new("t", 10);
        let mut sink = |_: StreamEvent<'_>| {};
        let p = a.start_call(Some(""), "f", &mut sink);
        assert!(a.push_arguments(p, "{\"a\":1}", &mut sink).is_ok());
        assert_eq!(
            a.push_arguments(p, "xxxxxx", &mut sink),
            Err(DecodeError::ArgumentsTooLarge { limit: 10 })
        );
        let out = a.into_outcome(MessageStatus::Complete, &mut sink);
        // Unfinished call in a "complete" message: never executable.
        assert_eq!(out.message.status, MessageStatus::Cancelled);
        assert_eq!(out.message.tool_calls[0].call_id, None);
        assert!(!out.message.is_tool_call());
    }
}

//! [`Assembler`]: builds the assistant message of a decoded body, event by event.
//!
//! Every decoder parses its wire events and calls the assembler, which keeps content
//! parts, tool calls, usage, the stop reason and any provider error, emits the matching
//! [`StreamEvent`]s, and finally turns everything into a [`DecodeOutcome`]. Hand-written
//! because it is the core of every decoder: it appends argument fragments in place
//! (O(fragment)), caps their size, and never re-parses.
//!
//! Equivalent to folding `MessageDelta`s with `ToolCall::merge` (raw fragments
//! concatenated, an object replaces raw text and later fragments are dropped, a non-empty
//! id wins), without an intermediate `ToolCall` per event.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::error::DecodeError;
use super::event::{StopReason, StreamEvent};
use super::outcome::{DecodeOutcome, ProviderError};
use super::scan::json::read_object;
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

/// The metadata key marking a call id synthesised for a complete OpenAI-style message
/// whose call had none (some vLLM streams, old servers); the decode report shows such
/// ids as null.
pub const SYNTHETIC_CALL_ID: &str = "synthetic_call_id";

/// The argument buffer a call starts with: most tool calls' arguments are a few
/// hundred bytes to a few KiB, and a streamed call grows its buffer fragment by
/// fragment, so starting at one allocation that fits most of them saves the doublings
/// from 8 bytes up (measured: a 1 KiB call in 8-byte fragments spent ~5 % of its decode
/// in eight reallocations). Completing the call drops the buffer.
const ARGUMENTS_CAPACITY: usize = 512;

/// Emitter of stream events.
pub(crate) type Emit<'e> = &'e mut dyn FnMut(StreamEvent<'_>);

/// A tool call being assembled.
#[derive(Debug, Default)]
pub(crate) struct CallState {
    /// The wire id (never empty).
    pub(crate) call_id: Option<String>,
    /// The tool name (empty until known).
    pub(crate) name: String,
    /// Raw argument text received so far.
    raw: String,
    /// Arguments given as an object: they replace `raw`, and later fragments are dropped.
    object: Option<Map<String, Value>>,
    /// An object to use when no argument text arrives (Anthropic's whole `input`).
    fallback: Option<Map<String, Value>>,
    finished: bool,
    /// Provider state kept on the call (e.g. `item_id`).
    pub(crate) metadata: Map<String, Value>,
}

/// The message being assembled. See the module docs.
#[derive(Debug)]
pub(crate) struct Assembler {
    max_argument_bytes: usize,
    parts: Vec<ContentPart>,
    calls: Vec<CallState>,
    /// Start a new content part on the next text, even of the last part's type.
    split_next: bool,
    usage: Option<TokenUsage>,
    stop: Option<(StopReason, String)>,
    error: Option<ProviderError>,
    response_id: Option<String>,
    response_model: Option<String>,
}

impl Assembler {
    /// An empty message, with the argument cap.
    pub(crate) fn new(max_argument_bytes: usize) -> Self {
        Assembler {
            max_argument_bytes,
            parts: Vec::new(),
            calls: Vec::new(),
            split_next: false,
            usage: None,
            stop: None,
            error: None,
            response_id: None,
            response_model: None,
        }
    }

    /// Records the response's id and the answering model; the first report of each
    /// wins (later chunks repeat them) and an empty string counts as none.
    pub(crate) fn set_response(&mut self, id: Option<&str>, model: Option<&str>) {
        fn keep(slot: &mut Option<String>, value: Option<&str>) {
            if slot.is_none()
                && let Some(v) = value.filter(|v| !v.is_empty())
            {
                // Bounded: an id or a model name is short; a server sending megabytes
                // here gets them cut, not stored whole on every span.
                let mut end = v.len().min(MAX_RESPONSE_FIELD);
                while !v.is_char_boundary(end) {
                    end -= 1;
                }
                *slot = Some(v[..end].to_owned());
            }
        }
        keep(&mut self.response_id, id);
        keep(&mut self.response_model, model);
    }

    /// True once both the response id and model are known (a decoder stops looking).
    pub(crate) fn knows_response(&self) -> bool {
        self.response_id.is_some() && self.response_model.is_some()
    }

    /// Adds a whole part (an opaque provider block); returns its position.
    pub(crate) fn push_part(&mut self, part: ContentPart) -> usize {
        self.parts.push(part);
        self.parts.len() - 1
    }

    /// Opens a new content part of `ty`; returns its position.
    pub(crate) fn open_part(&mut self, ty: ContentType) -> usize {
        self.parts.push(ContentPart::new(ty, String::new()));
        self.parts.len() - 1
    }

    /// The position of the newest part when it has type `ty` (and no split was asked
    /// for), else a new part's.
    pub(crate) fn part_for(&mut self, ty: ContentType) -> usize {
        match self.parts.last() {
            Some(p) if p.r#type == ty && !self.split_next => self.parts.len() - 1,
            _ => {
                self.split_next = false;
                self.open_part(ty)
            }
        }
    }

    /// Makes the next content start a new part (a new output item).
    pub(crate) fn split_content(&mut self) {
        self.split_next = true;
    }

    /// Appends visible text (`Text`) or reasoning (`Thinking`) to the newest part of
    /// that type ([`part_for`](Self::part_for)) and emits the delta.
    pub(crate) fn push_content(&mut self, ty: ContentType, text: &str, emit: Emit<'_>) {
        if text.is_empty() {
            return;
        }
        let pos = self.part_for(ty);
        self.push_text(pos, text, emit);
    }

    /// The part at `pos`.
    pub(crate) fn part_mut(&mut self, pos: usize) -> Option<&mut ContentPart> {
        self.parts.get_mut(pos)
    }

    /// True when some part has type `ty`.
    pub(crate) fn has_part(&self, ty: ContentType) -> bool {
        self.parts.iter().any(|p| p.r#type == ty)
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
        if self.calls.capacity() == 0 {
            // Most messages hold one call: room for one is a small block from the
            // allocator's fast path (the default first growth, four, is ~1.2 KB).
            self.calls.reserve_exact(1);
        }
        self.calls.push(CallState {
            call_id: call_id.map(str::to_owned),
            name: name.to_owned(),
            raw: String::with_capacity(ARGUMENTS_CAPACITY),
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

    /// The call at `pos`.
    pub(crate) fn call(&self, pos: u32) -> Option<&CallState> {
        self.calls.get(pos as usize)
    }

    /// The position of the newest call with wire id `id`.
    pub(crate) fn last_call_with_id(&self, id: &str) -> Option<u32> {
        self.calls
            .iter()
            .rposition(|c| c.call_id.as_deref() == Some(id))
            .map(|p| u32::try_from(p).unwrap_or(u32::MAX))
    }

    /// Sets the id (a non-empty id wins) and fills or extends the name of a call.
    pub(crate) fn update_call(&mut self, pos: u32, call_id: Option<&str>, name: Option<&str>) {
        let Some(c) = self.call_mut(pos) else {
            return;
        };
        if let Some(id) = call_id.filter(|s| !s.is_empty())
            && c.call_id.as_deref() != Some(id)
        {
            c.call_id = Some(id.to_owned());
        }
        if let Some(n) = name.filter(|s| !s.is_empty())
            && c.name != n
        {
            // As `ToolCall::merge`: a different name is appended (streamed names).
            c.name.push_str(n);
        }
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

    /// Appends `fragment` to part `pos`'s content without emitting anything (the input of
    /// a provider-side block, kept opaque), within the argument cap.
    pub(crate) fn append_opaque(&mut self, pos: usize, fragment: &str) -> Result<(), DecodeError> {
        let cur = self.parts.get(pos).map_or(0, |p| p.content.len());
        self.check_cap(cur, fragment.len())?;
        if let Some(p) = self.parts.get_mut(pos) {
            p.content.push_str(fragment);
        }
        Ok(())
    }

    /// Appends an argument text fragment. Inlined: the fragment loops of the fast
    /// decoders call it once per 8-byte fragment.
    #[inline]
    pub(crate) fn push_arguments(
        &mut self,
        pos: u32,
        fragment: &str,
        emit: Emit<'_>,
    ) -> Result<(), DecodeError> {
        let limit = self.max_argument_bytes;
        // One lookup: no such call, or arguments given as an object, drop the fragment.
        let Some(c) = self
            .calls
            .get_mut(pos as usize)
            .filter(|c| c.object.is_none())
        else {
            return Ok(());
        };
        if c.raw.len().saturating_add(fragment.len()) > limit {
            return Err(DecodeError::ArgumentsTooLarge { limit });
        }
        if fragment.is_empty() {
            return Ok(());
        }
        c.raw.push_str(fragment);
        emit(StreamEvent::ToolCallArguments {
            index: pos,
            fragment: Cow::Borrowed(fragment),
        });
        Ok(())
    }

    /// Call `pos`'s argument text so far, for a reader that appends fragments to it in
    /// place (`provider::scan::fragment_run`, within [`arguments_room`](Self::arguments_room)
    /// and emitting what it appends, as [`push_arguments`](Self::push_arguments) does);
    /// `None` when there is no such call or its arguments came as an object.
    #[inline]
    pub(crate) fn arguments_mut(&mut self, pos: u32) -> Option<&mut String> {
        self.calls
            .get_mut(pos as usize)
            .filter(|c| c.object.is_none())
            .map(|c| &mut c.raw)
    }

    /// How many more bytes of argument text call `pos` may take within the cap; `None`
    /// when there is no such call or its arguments came as an object (fragments are
    /// then dropped).
    #[inline]
    pub(crate) fn arguments_room(&self, pos: u32) -> Option<usize> {
        let c = self.calls.get(pos as usize)?;
        if c.object.is_some() {
            return None;
        }
        Some(self.max_argument_bytes.saturating_sub(c.raw.len()))
    }

    /// Replaces a call's arguments with the final text the wire gave (unless they came
    /// as an object).
    pub(crate) fn replace_arguments(&mut self, pos: u32, text: &str) -> Result<(), DecodeError> {
        self.check_cap(0, text.len())?;
        if let Some(c) = self.call_mut(pos)
            && c.object.is_none()
            && c.raw != text
        {
            c.raw.clear();
            c.raw.push_str(text);
        }
        Ok(())
    }

    /// Sets a call's arguments given whole as an object: they replace any text, later
    /// fragments are dropped, and they are emitted as one fragment of their JSON text.
    pub(crate) fn set_arguments_object(
        &mut self,
        pos: u32,
        object: Map<String, Value>,
        emit: Emit<'_>,
    ) -> Result<(), DecodeError> {
        if self.calls.get(pos as usize).is_none() {
            return Ok(());
        }
        let text = serde_json::to_string(&object).unwrap_or_default();
        self.check_cap(0, text.len())?;
        if let Some(c) = self.call_mut(pos) {
            c.raw.clear();
            c.object = Some(object);
        }
        emit(StreamEvent::ToolCallArguments {
            index: pos,
            fragment: Cow::Owned(text),
        });
        Ok(())
    }

    /// Keeps an object to use when no argument text arrives (Anthropic's whole `input`).
    pub(crate) fn set_fallback_object(&mut self, pos: u32, object: Map<String, Value>) {
        if let Some(c) = self.call_mut(pos) {
            c.fallback = Some(object);
        }
    }

    /// Marks a call's arguments complete on the wire and emits it (once).
    pub(crate) fn finish_call(&mut self, pos: u32, emit: Emit<'_>) -> Result<(), DecodeError> {
        let Some(c) = self.calls.get_mut(pos as usize) else {
            return Ok(());
        };
        if c.finished {
            return Ok(());
        }
        if let Some(obj) = c.fallback.take()
            && c.raw.is_empty()
            && c.object.is_none()
            && !obj.is_empty()
        {
            self.set_arguments_object(pos, obj, emit)?;
        }
        if let Some(c) = self.call_mut(pos) {
            c.finished = true;
        }
        emit(StreamEvent::ToolCallFinished { index: pos });
        Ok(())
    }

    /// Marks every call finished.
    pub(crate) fn finish_all(&mut self, emit: Emit<'_>) -> Result<(), DecodeError> {
        for pos in 0..self.calls.len() {
            self.finish_call(u32::try_from(pos).unwrap_or(u32::MAX), emit)?;
        }
        Ok(())
    }

    /// Gives every call the wire left without an id a synthesised one, derived from its
    /// position, name and arguments, marked `metadata.synthetic_call_id: true` (OpenAI
    /// Chat: some vLLM streams and old servers send calls without ids).
    pub(crate) fn synthesize_missing_ids(&mut self) {
        for (i, c) in self.calls.iter_mut().enumerate() {
            if c.call_id.is_none() {
                c.call_id = Some(synthetic_id(i, c));
                c.metadata
                    .insert(SYNTHETIC_CALL_ID.into(), Value::Bool(true));
            }
        }
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
        if self.error.is_some() {
            status = MessageStatus::Cancelled;
        }
        if status == MessageStatus::Complete && self.calls.iter().any(|c| !c.finished) {
            status = MessageStatus::Cancelled;
            streaming_error = Some("a tool call never finished".to_owned());
        }
        if let Some(u) = self.usage {
            emit(StreamEvent::Usage(u));
        }
        let (stop_reason, raw_stop_reason) = match &self.stop {
            Some((r, raw)) => (Some(*r), Some(raw.clone())),
            None if self.error.is_some() => (Some(StopReason::Error), None),
            None => (None, None),
        };
        let end = End {
            status,
            stop_reason,
            raw_stop_reason,
            usage: self.usage,
            error: self.error.clone(),
        };
        self.build(end, streaming_error)
    }

    /// Ends the message as `end` says (decoders that track the stop, usage and error
    /// themselves, emitting them as they come).
    pub(crate) fn into_outcome_as(self, end: End) -> DecodeOutcome {
        self.build(end, None)
    }

    fn build(self, end: End, streaming_error: Option<String>) -> DecodeOutcome {
        let streaming_error = match &end.error {
            Some(e) => Some(format!("{}: {}", e.kind, e.message)),
            None => streaming_error,
        };
        let complete = end.status == MessageStatus::Complete;
        let mut tool_calls = Vec::with_capacity(self.calls.len());
        tool_calls.extend(self.calls.into_iter().enumerate().map(|(i, c)| {
            let arguments = if let Some(o) = c.object {
                Some(Arguments::Object(o))
            } else if let Some(o) = (complete
                && c.finished
                && c.call_id.as_deref().is_some_and(|id| !id.is_empty())
                && !c.name.is_empty())
            .then(|| read_object(c.raw.as_bytes()))
            .flatten()
            {
                // A call `complete_tool_calls` will complete: the byte scan reads what
                // serde_json would, faster; text it leaves is parsed there (serde_json
                // decides). Any other call keeps its text as it came.
                Some(Arguments::Object(o))
            } else if !c.raw.is_empty() {
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
        }));
        let mut message = Message {
            role: Role::Assistant,
            status: end.status,
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
        if let Some(u) = end.usage {
            message.set_usage(u);
        }
        let invalid_tool_calls = message.complete_tool_calls();
        DecodeOutcome {
            message,
            invalid_tool_calls,
            stop_reason: end.stop_reason,
            raw_stop_reason: end.raw_stop_reason,
            usage: end.usage,
            error: end.error,
            response_id: self.response_id,
            response_model: self.response_model,
        }
    }
}

/// How a body ended, for decoders that track it themselves
/// ([`Assembler::into_outcome_as`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct End {
    /// The message status.
    pub(crate) status: MessageStatus,
    /// Normalised stop reason.
    pub(crate) stop_reason: Option<StopReason>,
    /// Wire stop reason.
    pub(crate) raw_stop_reason: Option<String>,
    /// Usage.
    pub(crate) usage: Option<TokenUsage>,
    /// A provider error from the body.
    pub(crate) error: Option<ProviderError>,
}

/// The longest response id or model name kept (bytes).
const MAX_RESPONSE_FIELD: usize = 256;

/// `call_` + 16 hex digits of an FNV-1a hash of position, name and arguments.
fn synthetic_id(pos: usize, c: &CallState) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    eat(&pos.to_le_bytes());
    eat(c.name.as_bytes());
    eat(c.raw.as_bytes());
    format!("call_{h:016x}")
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

    /// The assembler ends in the same calls as folding `MessageDelta`s with
    /// `ToolCall::merge` over the same fragments.
    #[test]
    fn same_calls_as_message_delta_merge() {
        use crate::message::{DeltaStatus, MessageDelta};
        let frags = ["{\"ci", "ty\":\"Pa", "ris\"}"];
        let mut a = Assembler::new(1 << 20);
        let mut sink = |_: StreamEvent<'_>| {};
        let p = a.start_call(Some("call_1"), "get_weather", &mut sink);
        for f in frags {
            a.push_arguments(p, f, &mut sink).unwrap();
        }
        a.finish_call(p, &mut sink).unwrap();
        let ours = a.into_outcome(MessageStatus::Complete, &mut sink).message;

        let mut d = MessageDelta::default();
        d.merge(MessageDelta::tool_call_fragment(ToolCall {
            call_id: Some("call_1".into()),
            name: Some("get_weather".into()),
            index: Some(0),
            ..Default::default()
        }))
        .unwrap();
        for f in frags {
            d.merge(MessageDelta::tool_call_fragment(ToolCall {
                arguments: Some(f.into()),
                index: Some(0),
                ..Default::default()
            }))
            .unwrap();
        }
        d.merge(MessageDelta::status_fragment(DeltaStatus::Complete))
            .unwrap();
        let theirs = d.to_message().unwrap().message;
        assert_eq!(ours.tool_calls, theirs.tool_calls);
    }

    #[test]
    fn an_object_replaces_text_and_drops_later_fragments() {
        let mut a = Assembler::new(1 << 20);
        let mut sink = |_: StreamEvent<'_>| {};
        let p = a.start_call(None, "f", &mut sink);
        a.push_arguments(p, "{\"x\"", &mut sink).unwrap();
        let mut o = Map::new();
        o.insert("a".into(), Value::from(1));
        a.set_arguments_object(p, o.clone(), &mut sink).unwrap();
        a.push_arguments(p, "junk", &mut sink).unwrap();
        assert_eq!(a.arguments_room(p), None);
        a.finish_call(p, &mut sink).unwrap();
        a.synthesize_missing_ids();
        let out = a.into_outcome(MessageStatus::Complete, &mut sink);
        let call = &out.message.tool_calls[0];
        assert_eq!(call.arguments, Some(Arguments::Object(o)));
        assert_eq!(call.metadata[SYNTHETIC_CALL_ID], Value::Bool(true));
        assert!(out.message.is_tool_call());
    }

    #[test]
    fn outcome_rules() {
        let mut a = Assembler::new(10);
        let mut sink = |_: StreamEvent<'_>| {};
        let p = a.start_call(Some(""), "f", &mut sink);
        assert_eq!(a.arguments_room(p), Some(10));
        assert!(a.push_arguments(p, "{\"a\":1}", &mut sink).is_ok());
        assert_eq!(a.arguments_room(p), Some(3));
        assert_eq!(a.arguments_room(p + 1), None);
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

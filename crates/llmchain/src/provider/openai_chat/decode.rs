//! OpenAI Chat Completions decoders (streaming and not), covering the compatible servers'
//! quirks: ids on every delta or on none, `id: ""` continuations, an index reused or
//! starting at 1 (gateways), arguments as an object (some llama.cpp builds), a missing
//! `index` (Mistral), error events inside a 200 stream (OpenRouter).
//!
//! The streaming hot path: a chunk that only carries the next argument fragment of an
//! open call (by far the most common chunk of a tool-call stream) is recognised by a
//! strict byte scan of its exact shape and its fragment unescaped in place, without
//! building a parse tree; so are a call's first chunk (its id and name) and the chunk
//! that ends the choice, which come once per call but cost as much as dozens of
//! fragments through the full parse. Anything else (or anything unusual in such a
//! chunk) goes through the chunk scan into borrowed typed structs
//! ([`Chunk::parse`](super::chunk::Chunk)), and serde_json where the scan declines.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;

use super::chunk::{Chunk, ChunkPrefix, Delta, WireCall};
use crate::message::{ContentType, MessageStatus, TokenUsage};
use crate::provider::assembly::{Assembler, Emit, End};
use crate::provider::framed::{EventHandler, SseDecoder};
use crate::provider::scan::fragment_run::{FragmentShape, RunScratch, take_fragments};
use crate::provider::scan::json::Cursor;
use crate::provider::wire::{ArgsField, chat_stop_reason, malformed, provider_error, wrong_format};
use crate::provider::{DecodeError, DecodeOutcome, DecoderConfig, StopReason, StreamEvent};

use super::NAME as FORMAT;

/// Decoding state shared by the streaming and the whole-body decoders.
#[derive(Debug)]
struct State {
    asm: Assembler,
    /// Open calls by wire index → position in `asm.calls`.
    open: OpenCalls,
    finish_reason: Option<String>,
    usage: Option<TokenUsage>,
    error: Option<crate::provider::ProviderError>,
    done: bool,
    /// The last chunk prefix (`{…,"choices":`) validated: consecutive chunks repeat
    /// it byte for byte, so it is compared, not re-validated, by the fast path and by
    /// the scan of other chunks alike.
    prefix: ChunkPrefix,
    /// The raw bytes of the last fragment-only event the fast path accepted, around its
    /// wire index and fragment: [`raw_events`](Self::raw_events) takes the events that
    /// repeat them byte for byte without framing or re-validating them.
    shape: Option<Shape>,
    /// The limits: events taken unframed respect the framer's line cap too; and
    /// whether a run of fragments may be reported as one event.
    config: DecoderConfig,
    /// Scratch for [`raw_events`](Self::raw_events).
    runs: RunScratch,
    /// Chunks left to read the response `id` and `model` from: a few, as Azure's
    /// first chunk (prompt filter results) has them empty; not every chunk, which
    /// would cost the fast path a second read of each.
    meta_tries: u8,
}

/// The bytes of a fragment-only event around its variable parts (see [`State::raw_events`]).
#[derive(Debug)]
struct Shape {
    /// The head, the tail, then what follows the `obfuscation` string if the chunks
    /// have one, in one allocation.
    bytes: Vec<u8>,
    /// The head's length.
    head_len: usize,
    /// The tail's length.
    tail_len: usize,
    /// The chunks close with an `obfuscation` string, which differs in each.
    varying: bool,
}

impl Shape {
    /// `data: ` and the validated chunk prefix through `"tool_calls":[{"index":`.
    fn head(&self) -> &[u8] {
        &self.bytes[..self.head_len]
    }

    /// What closed the chunk after the fragment's string, then the blank line (`\n\n`);
    /// for `varying` chunks, up to the `obfuscation` string.
    fn tail(&self) -> &[u8] {
        &self.bytes[self.head_len..self.head_len + self.tail_len]
    }

    /// For `varying` chunks, what closed them after the `obfuscation` string, then the
    /// blank line.
    fn after(&self) -> &[u8] {
        &self.bytes[self.head_len + self.tail_len..]
    }
}

/// What follows the wire index in a fragment-only chunk, up to the fragment's string.
const FRAGMENT_KEY: &[u8; 25] = b",\"function\":{\"arguments\":";

/// What follows the chunk prefix in a fragment-only chunk, up to the wire index.
const FRAGMENT_MIDDLE: &[u8] = b"[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":";

/// [`FRAGMENT_MIDDLE`] and the variants servers send, with a role (gateways repeat it
/// in every delta) or a null content before `tool_calls`: members serde_json reads as
/// nothing, as the full path does.
const FRAGMENT_MIDDLES: [&[u8]; 4] = [
    FRAGMENT_MIDDLE,
    b"[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":",
    b"[{\"index\":0,\"delta\":{\"content\":null,\"tool_calls\":[{\"index\":",
    b"[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"index\":",
];

impl State {
    fn new(config: DecoderConfig) -> Self {
        State {
            asm: Assembler::new(config.max_argument_bytes),
            open: OpenCalls::default(),
            finish_reason: None,
            usage: None,
            error: None,
            done: false,
            prefix: ChunkPrefix::default(),
            shape: None,
            config,
            runs: RunScratch::default(),
            meta_tries: 4,
        }
    }

    /// Reads the response `id` and `model` from a chunk (see `meta_tries`).
    fn read_meta(&mut self, data: &[u8]) {
        let (id, model) = super::chunk::response_meta(data);
        self.asm.set_response(id.as_deref(), model.as_deref());
        self.meta_tries = if self.asm.knows_response() {
            0
        } else {
            self.meta_tries - 1
        };
    }

    fn open_at(&self, wire: u64) -> Option<u32> {
        self.open.get(wire)
    }

    /// One `data:` payload of the stream.
    fn data(&mut self, data: &[u8], on_event: Emit<'_>) -> Result<(), DecodeError> {
        if self.done {
            return Ok(()); // after [DONE] nothing counts
        }
        let trimmed = trim_ascii(data);
        if trimmed == b"[DONE]" {
            self.done = true;
            return Ok(());
        }
        if self.meta_tries > 0 {
            self.read_meta(trimmed);
        }
        // The chunk prefix is compared (or validated) once, for both paths.
        let prefix_len = self.prefix.learn(trimmed);
        let usage_free = !self.prefix.holds_usage();
        if let Some((wire, middle, literal)) = fast_fragment(trimmed, prefix_len)
            && let Some(pos) = self.open_at(wire)
            && let Some((text, n)) = Cursor::string_text_at(literal)
            && let Some(end) = fragment_chunk_end(&literal[n..], usage_free)
        {
            self.asm.push_arguments(pos, &text, on_event)?;
            self.learn_shape(middle, &literal[n..], end);
            return Ok(());
        }
        if prefix_len > 0 {
            let rest = &trimmed[prefix_len..];
            // A call's first chunk (its id and name, usually empty arguments) and the
            // chunk that ends the choice: each once per call or stream, but each costs
            // as much as dozens of fragments through the full parse.
            if let Some((wire, _, at)) = one_call(rest)
                && let Some(start) = call_start(&rest[at..], usage_free)
            {
                let pos = self.open_call(Some(wire), Some(start.id), Some(start.name), on_event);
                return self.asm.push_arguments(pos, &start.arguments, on_event);
            }
            if let Some(reason) = finish_only(rest, usage_free) {
                if let Some(r) = reason {
                    self.finish_choice(r, on_event)?;
                }
                return Ok(());
            }
        }
        self.slow(trimmed, prefix_len > 0, on_event)
    }

    /// Remembers the bytes of a fragment-only chunk the fast path just accepted (its
    /// prefix is `prefix`, then `middle`; `rest` what closed it, as `end` found) for
    /// [`raw_events`](Self::raw_events).
    fn learn_shape(&mut self, middle: &[u8], rest: &[u8], end: ChunkEnd) {
        const DATA: &[u8] = b"data: ";
        // The bytes before and after the `obfuscation` string, if any.
        let (tail, after) = match end {
            ChunkEnd::Fixed => (rest, None),
            ChunkEnd::Obfuscated(value) => (&rest[..value.start], Some(&rest[value.end..])),
        };
        let head_len = DATA.len() + self.prefix.bytes.len() + middle.len();
        let same = self.shape.as_ref().is_some_and(|s| {
            s.head_len == head_len
                && s.head()[DATA.len()..].starts_with(&self.prefix.bytes)
                && s.head().ends_with(middle)
                && s.varying == after.is_some()
                && match after {
                    None => s.tail().strip_suffix(b"\n\n") == Some(tail),
                    Some(a) => s.tail() == tail && s.after().strip_suffix(b"\n\n") == Some(a),
                }
        });
        if !same {
            let mut bytes = [DATA, &self.prefix.bytes, middle, tail].concat();
            if let Some(a) = after {
                bytes.extend_from_slice(a);
            }
            bytes.extend_from_slice(b"\n\n");
            self.shape = Some(Shape {
                tail_len: match after {
                    None => bytes.len() - head_len,
                    Some(_) => tail.len(),
                },
                bytes,
                head_len,
                varying: after.is_some(),
            });
        }
    }

    /// Takes the fragment-only events at the front of `bytes` (raw stream bytes at an
    /// event boundary) that repeat the last accepted one's bytes around their wire index
    /// and fragment: `data: ` + the validated prefix, an open call's index, the
    /// fragment's string, the validated tail and a blank line. Such an event is exactly
    /// the chunk the fast path validated with another fragment, so it is handled without
    /// framing its lines or re-reading its JSON envelope; the first event that differs
    /// in any byte (or whose fragment needs more than the plain scan) is left to the
    /// framer and the full path.
    fn raw_events(&mut self, bytes: &[u8], emit: Emit<'_>) -> Result<(usize, usize), DecodeError> {
        let State {
            shape,
            asm,
            open,
            runs,
            done,
            config,
            ..
        } = self;
        let Some(shape) = shape.as_ref().filter(|_| !*done) else {
            return Ok((0, 0));
        };
        let shape = FragmentShape {
            head: shape.head(),
            key: FRAGMENT_KEY,
            tail: shape.tail(),
            after_varying: shape.varying.then(|| shape.after()),
            lead: 0,
        };
        take_fragments(bytes, shape, *config, runs, asm, |w| open.get(w), emit)
    }

    /// The full path for one payload; `after_prefix` when it starts with the validated
    /// chunk prefix.
    fn slow(
        &mut self,
        data: &[u8],
        after_prefix: bool,
        on_event: Emit<'_>,
    ) -> Result<(), DecodeError> {
        let prefix = after_prefix.then_some(&self.prefix);
        let chunk = Chunk::parse_after(data, prefix).map_err(|e| bad_json(data, &e))?;
        self.chunk(chunk, on_event, true)
    }

    fn chunk(
        &mut self,
        chunk: Chunk<'_>,
        on_event: Emit<'_>,
        streaming: bool,
    ) -> Result<(), DecodeError> {
        if let Some(err) = chunk.error.as_ref().filter(|e| !e.is_null()) {
            let e = provider_error(err);
            on_event(StreamEvent::Error {
                kind: Cow::Borrowed(&e.kind),
                message: Cow::Borrowed(&e.message),
            });
            self.error = Some(e);
            return Ok(());
        }
        if chunk.choices.is_none() && chunk.usage.is_none() {
            let what = match (&chunk.kind, &chunk.object) {
                (Some(t), _) => format!("an event of type '{t}'"),
                (None, Some(o)) => format!("an object '{o}'"),
                _ => "JSON without `choices`".to_owned(),
            };
            return Err(wrong_format(
                FORMAT,
                format!("expected a chat completion chunk, found {what}"),
            ));
        }
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index.unwrap_or(0) != 0 {
                continue; // only the first choice is decoded
            }
            let delta = if streaming {
                choice.delta.or(choice.message.map(|m| *m))
            } else {
                choice.message.map(|m| *m).or(choice.delta)
            };
            if let Some(d) = delta {
                self.delta(d, on_event)?;
            }
            if let Some(r) = choice.finish_reason {
                self.finish_choice(&r, on_event)?;
            }
        }
        if let Some(u) = chunk.usage {
            let u = TokenUsage::from(u);
            on_event(StreamEvent::Usage(u));
            self.usage = Some(u);
        }
        Ok(())
    }

    /// The choice stopped for `raw` (its `finish_reason`): every call is finished.
    fn finish_choice(&mut self, raw: &str, on_event: Emit<'_>) -> Result<(), DecodeError> {
        on_event(StreamEvent::Stop {
            reason: chat_stop_reason(raw),
            raw: Cow::Borrowed(raw),
        });
        self.finish_reason = Some(raw.to_owned());
        self.asm.finish_all(on_event)?;
        self.open.clear();
        Ok(())
    }

    fn delta(&mut self, d: Delta<'_>, on_event: Emit<'_>) -> Result<(), DecodeError> {
        for r in [&d.reasoning_content, &d.reasoning].into_iter().flatten() {
            self.asm.push_content(ContentType::Thinking, r, on_event);
        }
        if let Some(c) = &d.content {
            c.for_each(|reasoning, t| {
                let kind = if reasoning {
                    ContentType::Thinking
                } else {
                    ContentType::Text
                };
                self.asm.push_content(kind, t, on_event);
            });
        }
        for call in d.tool_calls.into_iter().flatten() {
            self.call(call, on_event)?;
        }
        if let Some(f) = d.function_call {
            // Legacy `function_call`: one call, no id.
            self.call(
                WireCall {
                    index: Some(u64::MAX),
                    id: None,
                    function: Some(*f),
                },
                on_event,
            )?;
        }
        Ok(())
    }

    /// Correlates one `tool_calls[]` entry: by its `index` (the id and name come only on
    /// a call's first delta; compatible servers send `id: ""`, repeat the id, omit the
    /// index or reuse one for a new id).
    fn call(&mut self, c: WireCall<'_>, on_event: Emit<'_>) -> Result<(), DecodeError> {
        let f = c.function;
        let id = c.id.as_deref().or(f.as_ref().and_then(|f| f.id.as_deref()));
        let name = f.as_ref().and_then(|f| f.name.as_deref());
        let pos = self.open_call(c.index, id, name, on_event);
        match f.and_then(|f| f.arguments) {
            Some(ArgsField::Text(t)) => self.asm.push_arguments(pos, &t, on_event)?,
            Some(ArgsField::Object(o)) => self.asm.set_arguments_object(pos, o, on_event)?,
            Some(ArgsField::Other(t)) => self.asm.push_arguments(pos, &t, on_event)?,
            None => {}
        }
        Ok(())
    }

    /// The call a `tool_calls[]` entry with this wire `index`, `id` (an empty one counts
    /// as none) and `name` belongs to, started when it is a new one; its position.
    fn open_call(
        &mut self,
        index: Option<u64>,
        id: Option<&str>,
        name: Option<&str>,
        on_event: Emit<'_>,
    ) -> u32 {
        let id = id.filter(|s| !s.is_empty());
        let existing = match index {
            Some(wire) => self.open_at(wire).filter(|&p| {
                // A different id at an open index starts a new call.
                match (id, self.asm.call(p).and_then(|k| k.call_id.as_deref())) {
                    (Some(new), Some(old)) => new == old,
                    _ => true,
                }
            }),
            // No index (Mistral): one call per entry, unless the id repeats.
            None => id.and_then(|id| self.asm.last_call_with_id(id)),
        };
        match existing {
            Some(p) => {
                self.asm.update_call(p, id, name);
                p
            }
            None => {
                let p = self.asm.start_call(id, name.unwrap_or(""), on_event);
                if let Some(wire) = index {
                    self.open.insert(wire, p);
                }
                p
            }
        }
    }

    fn end(mut self, streaming: bool) -> DecodeOutcome {
        let (status, stop_reason) = if self.error.is_some() {
            (MessageStatus::Cancelled, Some(StopReason::Error))
        } else {
            match self.finish_reason.as_deref() {
                Some(r) => {
                    let reason = chat_stop_reason(r);
                    let status = if reason == StopReason::MaxTokens {
                        MessageStatus::Length
                    } else {
                        MessageStatus::Complete
                    };
                    (status, Some(reason))
                }
                // A stream that never said why it stopped was cut off.
                None if streaming => (MessageStatus::Cancelled, None),
                None => (MessageStatus::Complete, None),
            }
        };
        if status == MessageStatus::Complete {
            self.asm.synthesize_missing_ids();
        }
        self.asm.into_outcome_as(End {
            status,
            stop_reason,
            raw_stop_reason: self.finish_reason,
            usage: self.usage,
            error: self.error,
        })
    }
}

impl EventHandler for State {
    // A Chat stream is SSE only: a plain JSON body is a non-streaming response.
    const WHOLE_BODIES: bool = false;

    fn on_data(&mut self, data: &[u8], emit: Emit<'_>) -> Result<(), DecodeError> {
        self.data(data, emit)
    }

    fn raw_events(&mut self, bytes: &[u8], emit: Emit<'_>) -> Result<(usize, usize), DecodeError> {
        State::raw_events(self, bytes, emit)
    }

    fn on_done(&mut self) {
        self.done = true; // after [DONE] nothing counts
    }

    fn finish(self, _emit: Emit<'_>) -> Result<DecodeOutcome, DecodeError> {
        Ok(self.end(true))
    }

    fn decode_whole(
        &mut self,
        _body: &[u8],
        _emit: Emit<'_>,
    ) -> Result<DecodeOutcome, DecodeError> {
        Err(wrong_format(FORMAT, "not an SSE stream"))
    }
}

/// The streaming OpenAI Chat decoder: the shared SSE decoder over the Chat handler.
pub(crate) fn stream_decoder(config: DecoderConfig) -> SseDecoder<impl EventHandler> {
    SseDecoder::new(FORMAT, State::new(config), config)
}

/// A whole body, as every built-in codec decodes one (its events are not reported:
/// [`decode_response`] reads it in one piece).
pub(crate) fn decode_whole(
    body: &[u8],
    config: DecoderConfig,
    _emit: Emit<'_>,
) -> Result<DecodeOutcome, DecodeError> {
    decode_response(body, config)
}

/// Decodes a whole non-streaming Chat Completions body.
pub fn decode_response(body: &[u8], config: DecoderConfig) -> Result<DecodeOutcome, DecodeError> {
    let chunk = Chunk::parse(body).map_err(|e| bad_json(body, &e))?;
    let mut state = State::new(config);
    state.read_meta(body);
    let mut sink = |_: StreamEvent<'_>| {};
    if chunk.choices.is_none() && chunk.error.as_ref().is_none_or(Value::is_null) {
        return Err(wrong_format(
            FORMAT,
            "expected a chat completion with `choices`",
        ));
    }
    state.chunk(chunk, &mut sink, false)?;
    state.asm.finish_all(&mut sink)?;
    Ok(state.end(false))
}

/// A parse failure: `WrongFormat` when the JSON is valid but typed like another
/// format's event (`"type": …`), `Malformed` otherwise.
fn bad_json(data: &[u8], e: &serde_json::Error) -> DecodeError {
    #[derive(Deserialize)]
    struct T {
        #[serde(rename = "type")]
        kind: String,
    }
    match serde_json::from_slice::<T>(data) {
        Ok(t) => wrong_format(
            FORMAT,
            format!(
                "expected a chat completion chunk, found an event of type '{}'",
                t.kind
            ),
        ),
        Err(_) => malformed(FORMAT, e),
    }
}

/// The open calls by wire index: the latest call started at each index. Indices count
/// from 0 in practice, so they index a vector; a server that sends huge or sparse
/// indices gets a map. Either way a lookup or a new call costs O(1), so a turn with 10⁵
/// calls is linear (a list searched per call made it quadratic).
#[derive(Debug, Default)]
struct OpenCalls {
    dense: Vec<Option<u32>>,
    sparse: std::collections::HashMap<u64, u32>,
}

/// Wire indices below this are kept in the vector.
const DENSE_INDICES: u64 = 1 << 16;

impl OpenCalls {
    /// The call open at wire index `wire`, if any.
    #[inline]
    fn get(&self, wire: u64) -> Option<u32> {
        if wire < DENSE_INDICES {
            self.dense.get(wire as usize).copied().flatten()
        } else {
            self.sparse.get(&wire).copied()
        }
    }

    /// `p` is now the call at `wire` (replacing an earlier one there).
    fn insert(&mut self, wire: u64, p: u32) {
        if wire < DENSE_INDICES {
            let i = wire as usize;
            if self.dense.len() <= i {
                self.dense.resize(i + 1, None);
            }
            self.dense[i] = Some(p);
        } else {
            self.sparse.insert(wire, p);
        }
    }

    fn clear(&mut self) {
        self.dense.clear();
        self.sparse.clear();
    }
}

fn trim_ascii(b: &[u8]) -> &[u8] {
    b.trim_ascii()
}

// ---------------------------------------------------------------------------------
// Fast path: an argument-fragment-only chunk.

/// Recognises the start of `{<flat scalar members>,"choices":[{"index":0,"delta":
/// {"tool_calls":[{"index":N,"function":{"arguments":"…"}}]}…}]…}` exactly (no
/// whitespace; a role or a null content may come before `tool_calls`, see
/// [`FRAGMENT_MIDDLES`]) and returns `N`, the middle it found and the bytes from the
/// fragment's opening quote on; the rest is checked by [`fragment_chunk_end`] as the
/// fragment is read. Anything else returns `None` and takes the full parse.
///
/// `prefix_len` is the length of the validated `{…,"choices":` prefix `data` starts
/// with ([`ChunkPrefix::learn`]; 0 for none).
fn fast_fragment(data: &[u8], prefix_len: usize) -> Option<(u64, &'static [u8], &[u8])> {
    if prefix_len == 0 {
        return None;
    }
    let rest = &data[prefix_len..];
    let (wire, middle, at) = one_call(rest)?;
    let literal = rest[at..].strip_prefix(FRAGMENT_KEY.as_slice())?;
    Some((wire, middle, literal))
}

/// The wire index of the one tool call in `rest` (a chunk after its validated prefix,
/// from `[{"index":0,"delta":{` on), the one of [`FRAGMENT_MIDDLES`] before it, and the
/// position after it.
fn one_call(rest: &[u8]) -> Option<(u64, &'static [u8], usize)> {
    let middle = FRAGMENT_MIDDLES.into_iter().find(|m| rest.starts_with(m))?;
    let mut p = Cursor::new(rest, middle.len());
    let wire = p.number_u64()?;
    Some((wire, middle, p.pos()))
}

/// A call's first chunk, after its wire index, as [`call_start`] reads it.
#[derive(Debug, PartialEq)]
struct CallStart<'a> {
    id: &'a str,
    name: &'a str,
    arguments: Cow<'a, str>,
}

/// Reads what follows the wire index in a call's first chunk exactly: `,"id":"…"`, an
/// optional `,"type":"function"`, `,"function":{"name":"…","arguments":"…"}}]}` (id
/// and name without escapes; arguments any string), then the choice's close as
/// [`choice_end`] reads it, without a finish reason. Anything else is `None` and takes
/// the full parse (members in another order, arguments as an object, a finish reason
/// in the same chunk, whitespace…). The full parse would read the same call from these
/// bytes (the role, a null content, the `type` are members it does not keep).
fn call_start(after: &[u8], usage_free: bool) -> Option<CallStart<'_>> {
    let mut p = Cursor::new(after, 0);
    p.eat(b",\"id\":")?;
    let id = p.string().filter(|s| !s.escaped)?.raw;
    p.peek_eat(b",\"type\":\"function\"");
    p.eat(b",\"function\":{\"name\":")?;
    let name = p.string().filter(|s| !s.escaped)?.raw;
    p.eat(b",\"arguments\":")?;
    let arguments = p.string_text()?;
    p.eat(b"}}]}")?;
    match choice_end(after, p.pos(), usage_free)? {
        (_, None) => Some(CallStart {
            id,
            name,
            arguments,
        }),
        (_, Some(_)) => None,
    }
}

/// What follows the chunk prefix in a chunk whose only choice has an empty delta.
const FINISH_MIDDLE: &[u8] = b"[{\"index\":0,\"delta\":{}";

/// Reads a chunk whose only choice has an empty delta (`rest` after its validated
/// prefix), exactly: [`FINISH_MIDDLE`], then the choice's close as [`choice_end`] reads
/// it. Returns its finish reason, if any (the chunk that ends the choice says why).
fn finish_only(rest: &[u8], usage_free: bool) -> Option<Option<&str>> {
    if !rest.starts_with(FINISH_MIDDLE) {
        return None;
    }
    choice_end(rest, FINISH_MIDDLE.len(), usage_free).map(|(_, reason)| reason)
}

/// How a fragment-only chunk closes after its fragment ([`fragment_chunk_end`]).
#[derive(Debug, Clone, PartialEq, Eq)]
enum ChunkEnd {
    /// With fixed bytes.
    Fixed,
    /// With an `obfuscation` member (OpenAI's `stream_options.include_obfuscation`,
    /// on by default): a random string that differs in every chunk, at these bytes
    /// (its quotes included) of what closes the chunk.
    Obfuscated(std::ops::Range<usize>),
}

/// How `rest` closes a fragment-only chunk after its fragment, if it is exactly such a
/// closing: `}}]}`, then the choice's close as [`choice_end`] reads it, without a
/// finish reason.
fn fragment_chunk_end(rest: &[u8], usage_free: bool) -> Option<ChunkEnd> {
    if !rest.starts_with(b"}}]}") {
        return None;
    }
    match choice_end(rest, 4, usage_free)? {
        (end, None) => Some(end),
        (_, Some(_)) => None,
    }
}

/// How `rest` closes a chunk's only choice from `at` on (after its `delta`), if it is
/// exactly such a closing: the choice's other members (`logprobs`, vLLM's
/// `stop_reason`, any other but `index`, `delta` and `message`, none twice, at most
/// four), null but for `finish_reason`, which may be a string without escapes; `}]`;
/// a null `usage` when `usage_free` (the chunk prefix did not hold one: serde_json
/// rejects a repeated field); an `obfuscation` string without escapes; and `}`.
/// Returns how the chunk ended and the finish reason.
fn choice_end(rest: &[u8], at: usize, usage_free: bool) -> Option<(ChunkEnd, Option<&str>)> {
    let mut p = Cursor::new(rest, at);
    // At most four members, each key once (a repeated unknown key is harmless to
    // serde_json, a repeated `finish_reason` is not; four keeps the check short).
    let mut keys: [&[u8]; 4] = [b""; 4];
    let mut n = 0;
    let mut reason = None;
    while p.peek_eat(b",") {
        let key = p.string_plain()?;
        p.eat(b":")?;
        if !p.peek_eat(b"null") {
            if key != b"finish_reason" {
                return None;
            }
            reason = Some(p.string().filter(|s| !s.escaped)?.raw);
        }
        if n == keys.len()
            || matches!(key, b"index" | b"delta" | b"message")
            || keys[..n].contains(&key)
        {
            return None;
        }
        keys[n] = key;
        n += 1;
    }
    p.eat(b"}]")?;
    if usage_free {
        p.peek_eat(b",\"usage\":null");
    }
    let end = if p.peek_eat(b",\"obfuscation\":") {
        let start = p.pos();
        p.string_plain()?;
        ChunkEnd::Obfuscated(start..p.pos())
    } else {
        ChunkEnd::Fixed
    };
    p.eat(b"}")?;
    p.at_end().then_some((end, reason))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::scan::json::read_string_into;

    /// The fast path's reading of a chunk: (wire index, fragment) or `None`.
    fn fast(d: &[u8], known: &mut ChunkPrefix) -> Option<(u64, String)> {
        let (w, _, literal) = fast_fragment(d, known.learn(d))?;
        let mut s = String::new();
        let n = read_string_into(literal, &mut s)?;
        fragment_chunk_end(&literal[n..], !known.holds_usage()).map(|_| (w, s))
    }

    /// Decodes `chunks` (payloads) twice, with the fast paths and with the full parse
    /// alone; returns each way's events, error and outcome (as text).
    fn fast_and_full(chunks: &[String]) -> [String; 2] {
        [true, false].map(|fast| {
            let mut state = State::new(DecoderConfig::default());
            let mut events = Vec::new();
            let mut sink = |e: StreamEvent<'_>| events.push(format!("{e:?}"));
            let mut error = None;
            for c in chunks {
                let r = if fast {
                    state.data(c.as_bytes(), &mut sink)
                } else {
                    if state.meta_tries > 0 {
                        state.read_meta(c.as_bytes());
                    }
                    let prefix_len = state.prefix.learn(c.as_bytes());
                    state.slow(c.as_bytes(), prefix_len > 0, &mut sink)
                };
                if let Err(e) = r {
                    error = Some(e.to_string());
                    break;
                }
            }
            let outcome = state.end(true);
            format!("{events:#?}\n{error:?}\n{outcome:#?}")
        })
    }

    /// One of `options`, drawn from `draws`.
    fn pick<'o>(draws: &mut impl Iterator<Item = u16>, options: &[&'o str]) -> &'o str {
        options[usize::from(draws.next().unwrap_or(0)) % options.len()]
    }

    /// A chunk that starts a call, ends the choice or carries a fragment, in the usual
    /// shapes and in the near misses that must leave the fast paths.
    fn generated_chunk(draws: &mut impl Iterator<Item = u16>) -> String {
        let prefix = pick(
            draws,
            &[
                r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":"#,
                r#"{"choices":"#,
                r#"{"usage":null,"choices":"#,
                r#"{"object":"chat.completion.chunk","choices":"#,
            ],
        );
        let index = pick(draws, &["0", "0", "0", "1"]);
        let delta = match draws.next().unwrap_or(0) % 3 {
            // A call's first chunk.
            0 => {
                let middle = pick(
                    draws,
                    &[
                        "",
                        r#""role":"assistant","#,
                        r#""content":null,"#,
                        r#""role":"assistant","content":null,"#,
                        r#""content":"hi","#,
                        r#""refusal":null,"#,
                    ],
                );
                let wire = pick(draws, &["0", "1", "2", "01"]);
                let id = pick(
                    draws,
                    &[
                        r#","id":"c1""#,
                        r#","id":"c2""#,
                        r#","id":"""#,
                        r#","id":"c\u0031""#,
                        r#","id":null"#,
                        "",
                    ],
                );
                let ty = pick(draws, &["", r#","type":"function""#, r#","type":"custom""#]);
                let name = pick(draws, &[r#""f""#, r#""g""#, r#""f\"x""#, r#""""#, "null"]);
                let args = pick(
                    draws,
                    &[
                        r#""""#,
                        r#""""#,
                        r#""{\"a\":1}""#,
                        r#""x""#,
                        "{}",
                        "null",
                        r#""\ud800""#,
                    ],
                );
                let extra = pick(draws, &["", "", r#","refusal":null"#]);
                format!(
                    r#"{{{middle}"tool_calls":[{{"index":{wire}{id}{ty},"function":{{"name":{name},"arguments":{args}}}}}]{extra}}}"#
                )
            }
            // The chunk that ends the choice, or an empty one.
            1 => pick(draws, &["{}", "{}", "{}", r#"{"content":"x"}"#, r#"{ }"#]).to_owned(),
            // A fragment.
            _ => {
                let wire = pick(draws, &["0", "1", "2"]);
                let text = pick(draws, &[r#""a""#, r#""\"b""#, r#""""#]);
                format!(
                    r#"{{"tool_calls":[{{"index":{wire},"function":{{"arguments":{text}}}}}]}}"#
                )
            }
        };
        let mut members = String::new();
        for _ in 0..draws.next().unwrap_or(0) % 5 {
            members.push(',');
            members.push_str(pick(
                draws,
                &[
                    r#""logprobs":null"#,
                    r#""finish_reason":null"#,
                    r#""finish_reason":"tool_calls""#,
                    r#""finish_reason":"stop""#,
                    r#""finish_reason":"a\"b""#,
                    r#""stop_reason":null"#,
                    r#""stop_reason":"x""#,
                    r#""index":null"#,
                    r#""fin\u0069sh_reason":null"#,
                ],
            ));
        }
        let usage = pick(
            draws,
            &[
                "",
                "",
                r#","usage":null"#,
                r#","usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}"#,
            ],
        );
        let obfuscation = pick(
            draws,
            &["", "", r#","obfuscation":"ab""#, r#","obfuscation":"a\"b""#],
        );
        let chunk = format!(
            r#"{prefix}[{{"index":{index},"delta":{delta}{members}}}]{usage}{obfuscation}}}"#
        );
        match draws.next().unwrap_or(0) % 8 {
            // Whitespace, or bytes cut off.
            0 => chunk.replacen("\":", "\": ", 2),
            1 => chunk[..chunk.len() - 1].to_owned(),
            _ => chunk,
        }
    }

    #[test]
    fn call_starts_and_finishes_read_as_the_full_parse_does() {
        let real = [
            // OpenAI (obfuscated), a gateway, this repository's benchmark.
            r#"{"id":"chatcmpl-A","object":"chat.completion.chunk","created":1734611820,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_d28bcae782","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_JMW1","type":"function","function":{"name":"get_weather","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"2LmlZGEO"}"#,
            r#"{"id":"chatcmpl-A","object":"chat.completion.chunk","created":1734611820,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_d28bcae782","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"Yl"}"#,
            r#"{"id":"chatcmpl-A","object":"chat.completion.chunk","created":1734611820,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_d28bcae782","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null,"obfuscation":"Q"}"#,
            r#"{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,"model":"gpt-bench","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_0000","type":"function","function":{"name":"write_file","arguments":""}}]},"finish_reason":null}]}"#,
            r#"{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,"model":"gpt-bench","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        ]
        .map(str::to_owned);
        let [fast, full] = fast_and_full(&real);
        assert_eq!(fast, full);
        assert!(
            fast.contains("get_weather") && fast.contains("ToolCalls"),
            "{fast}"
        );
        assert_eq!(
            call_start(
                br#","id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}"#,
                true
            ),
            Some(CallStart {
                id: "c",
                name: "f",
                arguments: Cow::Owned(r#"{"a":1}"#.to_owned()),
            })
        );
        assert_eq!(
            finish_only(br#"[{"index":0,"delta":{},"finish_reason":"stop"}]}"#, true),
            Some(Some("stop"))
        );
        assert_eq!(
            finish_only(br#"[{"index":0,"delta":{},"logprobs":null}]}"#, true),
            Some(None)
        );
        for refused in [
            &br#"[{"index":0,"delta":{},"finish_reason":"stop","finish_reason":"stop"}]}"#[..],
            br#"[{"index":0,"delta":{},"finish_reason":"a\"b"}]}"#,
            br#"[{"index":0,"delta":{},"stop_reason":"x"}]}"#,
            br#"[{"index":0,"delta":{}}],"usage":{}}"#,
            br#"[{"index":1,"delta":{},"finish_reason":"stop"}]}"#,
        ] {
            assert_eq!(
                finish_only(refused, true),
                None,
                "{}",
                String::from_utf8_lossy(refused)
            );
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        #[test]
        fn generated_chunks_read_as_the_full_parse_does(
            draws in proptest::collection::vec(proptest::prelude::any::<u16>(), 0..200),
        ) {
            let mut draws = draws.into_iter();
            let chunks: Vec<String> = (0..1 + draws.len() % 5)
                .map(|_| generated_chunk(&mut draws))
                .collect();
            let [fast, full] = fast_and_full(&chunks);
            proptest::prop_assert_eq!(fast, full, "{:#?}", chunks);
        }
    }

    #[test]
    fn fast_path_reads_other_null_members_of_the_choice() {
        // vLLM: `stop_reason` next to `finish_reason`.
        let d = br#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"tz"}}]},"logprobs":null,"finish_reason":null,"stop_reason":null}]}"#;
        assert_eq!(
            fast(d, &mut ChunkPrefix::default()),
            Some((0, "{\"tz".to_owned()))
        );
        let d = br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"x"}}]},"stop_reason":null,"finish_reason":null,"a":null,"b":null}]}"#;
        assert_eq!(
            fast(d, &mut ChunkPrefix::default()),
            Some((0, "x".to_owned()))
        );
        // A gateway's role, a null content, before `tool_calls`.
        let d = br#"{"id":"msg_1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":1,"function":{"arguments":"{\"q"}}]},"finish_reason":null}]}"#;
        assert_eq!(
            fast(d, &mut ChunkPrefix::default()),
            Some((1, "{\"q".to_owned()))
        );
        let d = br#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"function":{"arguments":"x"}}]}}]}"#;
        assert_eq!(
            fast(d, &mut ChunkPrefix::default()),
            Some((0, "x".to_owned()))
        );
        // Content that is not null is the full path's.
        let d = br#"{"choices":[{"index":0,"delta":{"content":"hi","tool_calls":[{"index":0,"function":{"arguments":"x"}}]}}]}"#;
        assert_eq!(fast(d, &mut ChunkPrefix::default()), None);
        // A repeated `finish_reason` is left to the full parse, which rejects it.
        let body = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"f\",\"arguments\":\"\"}}]}}]}\n\n\
            data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"x\"}}]},\"finish_reason\":null,\"finish_reason\":null}]}\n\n";
        let mut dec = stream_decoder(DecoderConfig::default());
        let err = crate::provider::StreamDecoder::feed(&mut dec, body, &mut |_| {}).unwrap_err();
        assert!(err.to_string().contains("duplicate field"), "{err}");
    }

    #[test]
    fn fast_path_reads_obfuscated_chunks() {
        // OpenAI's default `include_obfuscation`: a random string closes every chunk.
        let d = br#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"ci"}}]},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"a1b2"}"#;
        let mut known = ChunkPrefix::default();
        assert_eq!(fast(d, &mut known), Some((0, "{\"ci".to_owned())));
        let d = br#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ty"}}]},"logprobs":null,"finish_reason":null}],"obfuscation":""}"#;
        assert_eq!(fast(d, &mut known), Some((0, "ty".to_owned())));
        // A stream of such chunks decodes as the same stream without the member does.
        let decode = |obfuscation: &str| {
            let open = r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":""}}]}}]}"#;
            let frag = |a: &str| {
                format!(
                    r#"{{"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"function":{{"arguments":{a}}}}}]}}}}]{obfuscation}}}"#
                )
            };
            let close = r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#;
            let body = [open, &frag(r#""{\"a""#), &frag(r#""\":1}""#), close]
                .map(|d| format!("data: {d}\n\n"))
                .concat();
            let mut events = Vec::new();
            let mut sink = |e: StreamEvent<'_>| events.push(format!("{e:?}"));
            let mut dec = stream_decoder(DecoderConfig::default());
            crate::provider::StreamDecoder::feed(&mut dec, body.as_bytes(), &mut sink).unwrap();
            let outcome = crate::provider::StreamDecoder::finish(&mut dec, &mut sink).unwrap();
            (events, outcome.message)
        };
        let plain = decode("");
        assert_eq!(decode(r#","obfuscation":"Qx7""#), plain);
        assert_eq!(decode(r#","usage":null,"obfuscation":"""#), plain);
        assert!(plain.1.tool_calls[0].is_complete());
        assert_eq!(plain.0.len(), 5, "{:?}", plain.0);
    }

    #[test]
    fn fast_path_recognises_fragment_chunks() {
        let d = br#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","system_fingerprint":"fp_x","choices":[{"index":0,"delta":{"tool_calls":[{"index":2,"function":{"arguments":"{\"ci"}}]},"logprobs":null,"finish_reason":null}]}"#;
        assert_eq!(
            fast(d, &mut ChunkPrefix::default()),
            Some((2, "{\"ci".to_owned()))
        );
        let plain = br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"city"}}]}}],"usage":null}"#;
        let mut known = ChunkPrefix::default();
        assert_eq!(fast(plain, &mut known), Some((0, "city".to_owned())));
        assert_eq!(known.bytes, b"{\"choices\":");
        // With a known prefix, the rest is still checked.
        assert_eq!(fast(plain, &mut known), Some((0, "city".to_owned())));
        assert_eq!(fast(b"{\"choices\":[]}", &mut known), None);
        // Anything else is left to the full parse.
        for other in [
            &br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"x","function":{"arguments":""}}]}}]}"#[..],
            br#"{"choices":[{"index":1,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"a"}}]}}]}"#,
            br#"{"a":{},"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"a"}}]}}]}"#,
            br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"a"}}]}}]} "#,
            br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"a"}}]},"finish_reason":"stop"}]}"#,
            br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"a\"}}]}}]}"#,
            br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\ud83d"}}]}}]}"#,
            // A prefix serde_json reads otherwise: a provider error, a repeated field.
            br#"{"error":"boom","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"a"}}]}}]}"#,
            br#"{"object":"x","object":"y","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"a"}}]}}]}"#,
            br#"{"object":1,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"a"}}]}}]}"#,
            // An `obfuscation` string with an escape, or not a string; a second member.
            br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"a"}}]}}],"obfuscation":"a\"b"}"#,
            br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"a"}}]}}],"obfuscation":1}"#,
            br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"a"}}]}}],"obfuscation":"a","x":1}"#,
            // `usage` in the prefix and again after `choices`: serde_json rejects it.
            br#"{"usage":null,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"a"}}]}}],"usage":null}"#,
            // A choice member repeated, a known one again, one not null, too many.
            br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"a"}}]},"finish_reason":null,"finish_reason":null}]}"#,
            br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"a"}}]},"x":null,"x":null}]}"#,
            br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"a"}}]},"index":null}]}"#,
            br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"a"}}]},"delta":null}]}"#,
            br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"a"}}]},"stop_reason":"x"}]}"#,
            br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"a"}}]},"a":null,"b":null,"c":null,"d":null,"e":null}]}"#,
            br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"a"}}]},"fin\u0069sh_reason":null}]}"#,
        ] {
            assert_eq!(
                fast(other, &mut ChunkPrefix::default()),
                None,
                "{}",
                String::from_utf8_lossy(other)
            );
        }
    }
}

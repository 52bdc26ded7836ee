//! OpenAI Chat Completions decoders (streaming and not), covering the compatible servers'
//! quirks (wire-formats.md §1.3, §6, §7, §9).
//!
//! The streaming hot path: a chunk that only carries the next argument fragment of an
//! open call (by far the most common chunk of a tool-call stream) is recognised by a
//! strict byte scan of its exact shape and its fragment unescaped in place, without
//! building a parse tree. Anything else (or anything unusual in such a chunk) goes
//! through serde_json into borrowed typed structs.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;

use crate::message::{ContentType, MessageStatus, TokenUsage};
use crate::provider::assemble::{Assembler, End, OnEvent};
use crate::provider::framing::SseFramer;
use crate::provider::wire::{
    ArgsField, ContentField, WireUsage, chat_stop_reason, malformed, provider_error, wrong_format,
};
use crate::provider::{DecodeError, DecodeOutcome, DecoderConfig, StopReason, StreamEvent};

const FORMAT: &str = "openai_chat";

#[derive(Debug, Deserialize)]
struct Chunk<'a> {
    #[serde(default, borrow)]
    choices: Option<Vec<Choice<'a>>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default, borrow)]
    object: Option<Cow<'a, str>>,
    #[serde(default, rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
}

#[derive(Debug, Deserialize)]
struct Choice<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    #[serde(default, borrow)]
    message: Option<Delta<'a>>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Debug, Deserialize)]
struct Delta<'a> {
    #[serde(default, borrow)]
    content: Option<ContentField<'a>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    tool_calls: Option<Vec<WireCall<'a>>>,
    #[serde(default, borrow)]
    function_call: Option<WireFunction<'a>>,
}

#[derive(Debug, Deserialize)]
struct WireCall<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    function: Option<WireFunction<'a>>,
}

#[derive(Debug, Deserialize)]
struct WireFunction<'a> {
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    arguments: Option<ArgsField<'a>>,
    /// Old llama.cpp builds put the id here.
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
}

/// Decoding state shared by the streaming and the whole-body decoders.
#[derive(Debug)]
struct State {
    asm: Assembler,
    /// Open calls by wire index: (wire index, position in `asm.calls`).
    open: Vec<(u64, usize)>,
    finish_reason: Option<String>,
    usage: Option<TokenUsage>,
    error: Option<crate::provider::ProviderError>,
    done: bool,
    /// Reused buffer for unescaped fast-path fragments.
    scratch: String,
}

impl State {
    fn new(config: DecoderConfig) -> Self {
        State {
            asm: Assembler::new(config.max_argument_bytes),
            open: Vec::new(),
            finish_reason: None,
            usage: None,
            error: None,
            done: false,
            scratch: String::new(),
        }
    }

    fn open_at(&self, wire: u64) -> Option<usize> {
        self.open
            .iter()
            .rev()
            .find(|(w, _)| *w == wire)
            .map(|(_, p)| *p)
    }

    /// One `data:` payload of the stream.
    fn data(&mut self, data: &[u8], on_event: &mut OnEvent<'_>) -> Result<(), DecodeError> {
        if self.done {
            return Ok(()); // after [DONE] nothing counts
        }
        let trimmed = trim_ascii(data);
        if trimmed == b"[DONE]" {
            self.done = true;
            return Ok(());
        }
        if let Some((wire, frag)) = fast_fragment(trimmed)
            && let Some(pos) = self.open_at(wire)
        {
            let text: &str = match frag {
                Frag::Plain(s) => s,
                Frag::Escaped(span) => {
                    self.scratch.clear();
                    if unescape_into(span, &mut self.scratch).is_some() {
                        // Borrow-split: take the scratch out while pushing.
                        let scratch = std::mem::take(&mut self.scratch);
                        let r = self.asm.push_args(pos, &scratch, on_event);
                        self.scratch = scratch;
                        return r;
                    }
                    return self.slow(trimmed, on_event);
                }
            };
            return self.asm.push_args(pos, text, on_event);
        }
        self.slow(trimmed, on_event)
    }

    fn slow(&mut self, data: &[u8], on_event: &mut OnEvent<'_>) -> Result<(), DecodeError> {
        let chunk: Chunk<'_> = serde_json::from_slice(data).map_err(|e| bad_json(data, &e))?;
        self.chunk(chunk, on_event, true)
    }

    fn chunk(
        &mut self,
        chunk: Chunk<'_>,
        on_event: &mut OnEvent<'_>,
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
                choice.delta.or(choice.message)
            } else {
                choice.message.or(choice.delta)
            };
            if let Some(d) = delta {
                self.delta(d, on_event)?;
            }
            if let Some(r) = choice.finish_reason {
                let reason = chat_stop_reason(&r);
                on_event(StreamEvent::Stop {
                    reason,
                    raw: Cow::Borrowed(&r),
                });
                self.finish_reason = Some(r.into_owned());
                self.asm.finish_all(on_event);
                self.open.clear();
            }
        }
        if let Some(u) = chunk.usage {
            let u = TokenUsage::from(u);
            on_event(StreamEvent::Usage(u));
            self.usage = Some(u);
        }
        Ok(())
    }

    fn delta(&mut self, d: Delta<'_>, on_event: &mut OnEvent<'_>) -> Result<(), DecodeError> {
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
                    function: Some(f),
                },
                on_event,
            )?;
        }
        Ok(())
    }

    /// Correlates one `tool_calls[]` entry (wire-formats.md §9.3).
    fn call(&mut self, c: WireCall<'_>, on_event: &mut OnEvent<'_>) -> Result<(), DecodeError> {
        let f = c.function;
        let id =
            c.id.as_deref()
                .or(f.as_ref().and_then(|f| f.id.as_deref()))
                .filter(|s| !s.is_empty());
        let name = f.as_ref().and_then(|f| f.name.as_deref());
        let existing = match c.index {
            Some(wire) => self.open_at(wire).filter(|&p| {
                // A different id at an open index starts a new call.
                match (id, self.asm.calls[p].call_id.as_deref()) {
                    (Some(new), Some(old)) => new == old,
                    _ => true,
                }
            }),
            // No index (Mistral): one call per entry, unless the id repeats.
            None => id.and_then(|id| {
                self.asm
                    .calls
                    .iter()
                    .rposition(|k| k.call_id.as_deref() == Some(id))
            }),
        };
        let pos = match existing {
            Some(p) => {
                self.asm.update_call(p, id, name);
                p
            }
            None => {
                let p = self.asm.start_call(id, name.unwrap_or(""), on_event);
                if let Some(wire) = c.index {
                    self.open.retain(|(w, _)| *w != wire);
                    self.open.push((wire, p));
                }
                p
            }
        };
        match f.and_then(|f| f.arguments) {
            Some(ArgsField::Text(t)) => self.asm.push_args(pos, &t, on_event)?,
            Some(ArgsField::Object(o)) => self.asm.set_args_object(pos, o, on_event)?,
            Some(ArgsField::Other(t)) => self.asm.push_args(pos, &t, on_event)?,
            None => {}
        }
        Ok(())
    }

    fn end(self, streaming: bool) -> DecodeOutcome {
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
        self.asm.into_outcome(End {
            status,
            stop_reason,
            raw_stop_reason: self.finish_reason,
            usage: self.usage,
            error: self.error,
        })
    }
}

/// The streaming OpenAI Chat decoder.
#[derive(Debug)]
pub struct ChatStreamDecoder {
    framer: SseFramer,
    state: Option<State>,
    config: DecoderConfig,
    saw_bytes: bool,
    saw_data: bool,
    failed: Option<DecodeError>,
}

impl ChatStreamDecoder {
    /// A decoder with the given limits.
    pub fn new(config: DecoderConfig) -> Self {
        ChatStreamDecoder {
            framer: SseFramer::new(config.max_line_bytes),
            state: Some(State::new(config)),
            config,
            saw_bytes: false,
            saw_data: false,
            failed: None,
        }
    }
}

impl crate::provider::StreamDecoder for ChatStreamDecoder {
    fn feed(
        &mut self,
        chunk: &[u8],
        on_event: &mut dyn FnMut(StreamEvent<'_>),
    ) -> Result<(), DecodeError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        self.saw_bytes |= !chunk.is_empty();
        let Some(state) = self.state.as_mut() else {
            return Err(wrong_format(FORMAT, "the decoder has already finished"));
        };
        let saw_data = &mut self.saw_data;
        let r = self.framer.feed(chunk, &mut |ev| {
            *saw_data = true;
            state.data(ev.data, on_event)
        });
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
        let Some(mut state) = self.state.take() else {
            return Err(wrong_format(FORMAT, "the decoder has already finished"));
        };
        let saw_data = &mut self.saw_data;
        self.framer.finish(&mut |ev| {
            *saw_data = true;
            state.data(ev.data, on_event)
        })?;
        if self.saw_bytes && !self.saw_data {
            return Err(wrong_format(
                FORMAT,
                "no SSE `data:` event in the body (is it a non-streaming response?)",
            ));
        }
        self.state = None;
        let _ = self.config;
        Ok(state.end(true))
    }
}

/// Decodes a whole non-streaming Chat Completions body.
pub fn decode_response(body: &[u8], config: DecoderConfig) -> Result<DecodeOutcome, DecodeError> {
    let chunk: Chunk<'_> = serde_json::from_slice(body).map_err(|e| bad_json(body, &e))?;
    let mut state = State::new(config);
    let mut sink = |_: StreamEvent<'_>| {};
    if chunk.choices.is_none() && chunk.error.as_ref().is_none_or(Value::is_null) {
        return Err(wrong_format(
            FORMAT,
            "expected a chat completion with `choices`",
        ));
    }
    state.chunk(chunk, &mut sink, false)?;
    state.asm.finish_all(&mut sink);
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

fn trim_ascii(b: &[u8]) -> &[u8] {
    b.trim_ascii()
}

// ---------------------------------------------------------------------------------
// Fast path: an argument-fragment-only chunk.

/// The fragment of a fast-path chunk.
#[derive(Debug, PartialEq)]
enum Frag<'a> {
    /// No escapes: the text as it is.
    Plain(&'a str),
    /// The raw JSON string body, with escapes.
    Escaped(&'a [u8]),
}

/// Recognises `{<flat scalar members>,"choices":[{"index":0,"delta":{"tool_calls":
/// [{"index":N,"function":{"arguments":"…"}}]}[,"logprobs":null][,"finish_reason":null]}]
/// [,"usage":null]}` exactly (no whitespace, no other members) and returns `N` and the
/// fragment. Anything else returns `None` and takes the full parse.
fn fast_fragment(data: &[u8]) -> Option<(u64, Frag<'_>)> {
    let mut p = Cursor { b: data, i: 0 };
    p.eat(b"{")?;
    loop {
        let key = p.string_plain()?;
        p.eat(b":")?;
        if key == b"choices" {
            break;
        }
        p.scalar()?;
        p.eat(b",")?;
    }
    p.eat(b"[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":")?;
    let wire = p.number_u64()?;
    p.eat(b",\"function\":{\"arguments\":")?;
    let frag = p.string_any()?;
    p.eat(b"}}]}")?;
    p.peek_eat(b",\"logprobs\":null");
    p.peek_eat(b",\"finish_reason\":null");
    p.eat(b"}]")?;
    p.peek_eat(b",\"usage\":null");
    p.eat(b"}")?;
    (p.i == data.len()).then_some((wire, frag))
}

struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    fn eat(&mut self, lit: &[u8]) -> Option<()> {
        if self.b.get(self.i..self.i + lit.len())? == lit {
            self.i += lit.len();
            Some(())
        } else {
            None
        }
    }

    fn peek_eat(&mut self, lit: &[u8]) -> bool {
        self.eat(lit).is_some()
    }

    /// A string without escapes or control characters; returns its bytes.
    fn string_plain(&mut self) -> Option<&'a [u8]> {
        self.eat(b"\"")?;
        let rest = &self.b[self.i..];
        let end = memchr::memchr2(b'"', b'\\', rest)?;
        if rest[end] != b'"' {
            return None;
        }
        let s = &rest[..end];
        if s.iter().any(|&c| c < 0x20) || std::str::from_utf8(s).is_err() {
            return None;
        }
        self.i += end + 1;
        Some(s)
    }

    /// A string that may hold escapes; returns the fragment.
    fn string_any(&mut self) -> Option<Frag<'a>> {
        self.eat(b"\"")?;
        let start = self.i;
        let mut escaped = false;
        let mut j = start;
        loop {
            let k = j + memchr::memchr2(b'"', b'\\', &self.b[j..])?;
            if self.b[k] == b'"' {
                let s = &self.b[start..k];
                if s.iter().any(|&c| c < 0x20) {
                    return None;
                }
                self.i = k + 1;
                return Some(if escaped {
                    Frag::Escaped(s)
                } else {
                    Frag::Plain(std::str::from_utf8(s).ok()?)
                });
            }
            escaped = true;
            j = k + 2; // skip the escaped character
            if j > self.b.len() {
                return None;
            }
        }
    }

    /// A string, number, `null`, `true` or `false` (no objects or arrays).
    fn scalar(&mut self) -> Option<()> {
        match *self.b.get(self.i)? {
            b'"' => self.string_plain().map(|_| ()),
            b'n' => self.eat(b"null"),
            b't' => self.eat(b"true"),
            b'f' => self.eat(b"false"),
            b'-' | b'0'..=b'9' => {
                let start = self.i;
                while let Some(c) = self.b.get(self.i) {
                    if matches!(c, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') {
                        self.i += 1;
                    } else {
                        break;
                    }
                }
                // Let serde_json judge anything but a plain integer.
                let n = &self.b[start..self.i];
                let digits = n.strip_prefix(b"-").unwrap_or(n);
                (!digits.is_empty()
                    && digits.iter().all(u8::is_ascii_digit)
                    && (digits.len() == 1 || digits[0] != b'0'))
                    .then_some(())
            }
            _ => None,
        }
    }

    fn number_u64(&mut self) -> Option<u64> {
        let start = self.i;
        while matches!(self.b.get(self.i), Some(b'0'..=b'9')) {
            self.i += 1;
        }
        let n = &self.b[start..self.i];
        if n.is_empty() || n.len() > 18 || (n.len() > 1 && n[0] == b'0') {
            return None;
        }
        Some(n.iter().fold(0u64, |a, &d| a * 10 + u64::from(d - b'0')))
    }
}

/// Unescapes a JSON string body into `out`. `None` for anything invalid (lone
/// surrogates, bad escapes, invalid UTF-8): the caller then takes the full parse, which
/// reports the error.
fn unescape_into(span: &[u8], out: &mut String) -> Option<()> {
    let s = std::str::from_utf8(span).ok()?;
    let b = s.as_bytes();
    let mut i = 0;
    while let Some(k) = memchr::memchr(b'\\', &b[i..]) {
        let k = i + k;
        out.push_str(&s[i..k]);
        let c = *b.get(k + 1)?;
        i = k + 2;
        match c {
            b'"' => out.push('"'),
            b'\\' => out.push('\\'),
            b'/' => out.push('/'),
            b'b' => out.push('\u{8}'),
            b'f' => out.push('\u{c}'),
            b'n' => out.push('\n'),
            b'r' => out.push('\r'),
            b't' => out.push('\t'),
            b'u' => {
                let hi = hex4(b.get(i..i + 4)?)?;
                i += 4;
                let cp = if (0xD800..0xDC00).contains(&hi) {
                    if b.get(i..i + 2)? != b"\\u" {
                        return None;
                    }
                    let lo = hex4(b.get(i + 2..i + 6)?)?;
                    if !(0xDC00..0xE000).contains(&lo) {
                        return None;
                    }
                    i += 6;
                    0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                } else if (0xDC00..0xE000).contains(&hi) {
                    return None;
                } else {
                    hi
                };
                out.push(char::from_u32(cp)?);
            }
            _ => return None,
        }
    }
    out.push_str(&s[i..]);
    Some(())
}

fn hex4(h: &[u8]) -> Option<u32> {
    let mut v = 0u32;
    for &c in h {
        v = v * 16 + (c as char).to_digit(16)?;
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_path_recognises_fragment_chunks() {
        let d = br#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","system_fingerprint":"fp_x","choices":[{"index":0,"delta":{"tool_calls":[{"index":2,"function":{"arguments":"{\"ci"}}]},"logprobs":null,"finish_reason":null}]}"#;
        let (w, f) = fast_fragment(d).unwrap();
        assert_eq!(w, 2);
        let Frag::Escaped(span) = f else { panic!() };
        let mut s = String::new();
        unescape_into(span, &mut s).unwrap();
        assert_eq!(s, "{\"ci");
        let plain = br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"city"}}]}}],"usage":null}"#;
        assert_eq!(fast_fragment(plain), Some((0, Frag::Plain("city"))));
        // Anything else is left to the full parse.
        for other in [
            &br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"x","function":{"arguments":""}}]}}]}"#[..],
            br#"{"choices":[{"index":1,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"a"}}]}}]}"#,
            br#"{"a":{},"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"a"}}]}}]}"#,
            br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"a"}}]}}]} "#,
            br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"a"}}]},"finish_reason":"stop"}]}"#,
            br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"a\"}}]}}]}"#,
        ] {
            assert_eq!(fast_fragment(other), None, "{}", String::from_utf8_lossy(other));
        }
    }

    #[test]
    fn unescape_matches_serde() {
        for s in [
            r#"plain"#,
            r#"a\"b\\c\/d\n\r\t\b\f"#,
            r#"\u00e9\u4e2d\ud83d\ude00"#,
        ] {
            let mut out = String::new();
            unescape_into(s.as_bytes(), &mut out).unwrap();
            let expect: String = serde_json::from_str(&format!("\"{s}\"")).unwrap();
            assert_eq!(out, expect);
        }
        for bad in [r#"\ud83d"#, r#"\ude00"#, r#"\x"#, r#"\u12"#, "\\"] {
            assert_eq!(
                unescape_into(bad.as_bytes(), &mut String::new()),
                None,
                "{bad}"
            );
        }
    }
}

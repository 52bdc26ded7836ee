//! Decoding Ollama `/api/chat` responses: NDJSON lines (streaming) or one object.
//!
//! Calls arrive whole, with `arguments` as an object, in any line including the `done`
//! one. Calls without an `id` (older servers) get a synthesised one: `call_<h>_<n>`, with
//! `<n>` the call's position and `<h>` eight hex digits of a hash of the response's first
//! `created_at` (just `call_<n>` without one), marked `metadata.synthesized_id`. An
//! `{"error": ...}` line ends the stream as an error.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;

use crate::message::{ContentType, MessageStatus, TokenUsage};
use crate::provider::assembly::{Assembler, Emit, malformed, short_hash, wrong_format};
use crate::provider::error::DecodeError;
use crate::provider::event::StopReason;
use crate::provider::format::DecoderConfig;
use crate::provider::format::StreamDecoder;
use crate::provider::framed::{EventHandler, NdjsonDecoder};
use crate::provider::outcome::DecodeOutcome;

use super::NAME as FORMAT;

/// Normalises a `done_reason`; `stop` means tool calls when calls were made.
pub(crate) fn stop_reason(raw: &str, has_calls: bool) -> StopReason {
    match raw {
        "stop" if has_calls => StopReason::ToolCalls,
        "stop" => StopReason::EndTurn,
        "length" => StopReason::MaxTokens,
        _ => StopReason::Other,
    }
}

#[derive(Deserialize)]
struct Function<'a> {
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Deserialize)]
struct Call<'a> {
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    function: Option<Function<'a>>,
}

#[derive(Deserialize)]
struct Msg<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    thinking: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    tool_calls: Option<Vec<Call<'a>>>,
}

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(default, borrow)]
    created_at: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    model: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    message: Option<Msg<'a>>,
    #[serde(default)]
    done: Option<bool>,
    #[serde(default, borrow)]
    done_reason: Option<Cow<'a, str>>,
    #[serde(default)]
    prompt_eval_count: Option<u64>,
    #[serde(default)]
    eval_count: Option<u64>,
    #[serde(default)]
    error: Option<Value>,
}

/// The Ollama line handler.
#[derive(Debug)]
pub(crate) struct Events {
    config: DecoderConfig,
    asm: Assembler,
    id_prefix: Option<String>,
    done: bool,
    seen_created: bool,
}

impl Events {
    /// A fresh handler.
    pub(crate) fn new(config: DecoderConfig) -> Self {
        Events {
            config,
            asm: Assembler::new(config.max_argument_bytes),
            id_prefix: None,
            done: false,
            seen_created: false,
        }
    }

    fn line(&mut self, data: &[u8], emit: Emit<'_>) -> Result<(), DecodeError> {
        if self.done || self.asm.has_error() {
            return Ok(());
        }
        let l: Line<'_> = serde_json::from_slice(data).map_err(|e| {
            if e.is_data() {
                wrong_format(FORMAT, format!("not an /api/chat line: {e}"))
            } else {
                malformed(FORMAT, e.to_string())
            }
        })?;
        if let Some(err) = l.error {
            let message = match &err {
                Value::String(s) => s.clone(),
                Value::Object(o) => o
                    .get("message")
                    .and_then(Value::as_str)
                    .map_or_else(|| err.to_string(), str::to_owned),
                other => other.to_string(),
            };
            self.asm.set_error("error", &message, emit);
            return Ok(());
        }
        if l.message.is_none() && l.done.is_none() {
            return Err(wrong_format(
                FORMAT,
                "a line without message, done or error",
            ));
        }
        if !self.seen_created {
            self.seen_created = true;
            // Ollama names the model on every line but gives a response no id.
            self.asm.set_response(None, l.model.as_deref());
            if let Some(c) = l.created_at.as_deref().filter(|s| !s.is_empty()) {
                self.id_prefix = Some(format!("call_{:08x}_", short_hash(c)));
            }
        }
        if let Some(m) = l.message {
            if let Some(t) = m.thinking.as_deref().filter(|t| !t.is_empty()) {
                let pos = self.asm.part_for(ContentType::Thinking);
                self.asm.push_text(pos, t, emit);
            }
            if let Some(t) = m.content.as_deref().filter(|t| !t.is_empty()) {
                let pos = self.asm.part_for(ContentType::Text);
                self.asm.push_text(pos, t, emit);
            }
            for c in m.tool_calls.unwrap_or_default() {
                let Some(f) = c.function else { continue };
                let name = f.name.as_deref().unwrap_or("");
                let pos = match c.id.as_deref().filter(|s| !s.is_empty()) {
                    Some(id) => self.asm.start_call(Some(id), name, emit),
                    None => {
                        let n = self.asm.call_count();
                        let id = match &self.id_prefix {
                            Some(p) => format!("{p}{n}"),
                            None => format!("call_{n}"),
                        };
                        self.asm.start_synthesized_call(&id, name, emit)
                    }
                };
                match f.arguments {
                    Some(Value::Object(o)) => self.asm.set_arguments_object(pos, o, emit)?,
                    None | Some(Value::Null) => {}
                    // The OpenAI-style string form some builds send.
                    Some(Value::String(s)) => self.asm.push_arguments(pos, &s, emit)?,
                    Some(other) => self.asm.push_arguments(pos, &other.to_string(), emit)?,
                }
                self.asm.finish_call(pos, emit)?;
            }
        }
        if l.done == Some(true) {
            self.done = true;
            let raw = l.done_reason.as_deref().unwrap_or("stop");
            let reason = stop_reason(raw, self.asm.has_finished_calls());
            self.asm.set_stop(reason, raw, emit);
            if l.prompt_eval_count.is_some() || l.eval_count.is_some() {
                self.asm.set_usage(TokenUsage::new(
                    l.prompt_eval_count.unwrap_or(0),
                    l.eval_count.unwrap_or(0),
                ));
            }
        }
        Ok(())
    }
}

impl EventHandler for Events {
    fn on_data(&mut self, data: &[u8], emit: Emit<'_>) -> Result<(), DecodeError> {
        self.line(data, emit)
    }

    fn finish(self, emit: Emit<'_>) -> Result<DecodeOutcome, DecodeError> {
        let status = match self.asm.stop() {
            _ if !self.done => MessageStatus::Cancelled,
            Some(StopReason::MaxTokens) => MessageStatus::Length,
            _ => MessageStatus::Complete,
        };
        Ok(self.asm.into_outcome(status, emit))
    }

    fn decode_whole(&mut self, body: &[u8], emit: Emit<'_>) -> Result<DecodeOutcome, DecodeError> {
        if body.trim_ascii().is_empty() {
            return Err(malformed(FORMAT, "the body is empty"));
        }
        if serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok() {
            let mut ev = Events::new(self.config);
            ev.line(body, emit)?;
            return ev.finish(emit);
        }
        // A captured stream: one object per line.
        let mut d = NdjsonDecoder::new(FORMAT, Events::new(self.config), self.config);
        d.feed(body, emit)?;
        d.finish(emit)
    }
}

/// Decodes a whole (`"stream": false`) response.
pub(crate) fn decode_whole(
    body: &[u8],
    config: DecoderConfig,
    emit: Emit<'_>,
) -> Result<DecodeOutcome, DecodeError> {
    Events::new(config).decode_whole(body, emit)
}

/// A streaming decoder of this format (its codec's [`Codec::stream_decoder`]).
///
/// [`Codec::stream_decoder`]: crate::provider::Codec::stream_decoder
pub(crate) fn stream_decoder(config: DecoderConfig) -> NdjsonDecoder<Events> {
    NdjsonDecoder::new(FORMAT, Events::new(config), config)
}

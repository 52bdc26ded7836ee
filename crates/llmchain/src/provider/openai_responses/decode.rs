//! OpenAI Responses decoders: output items of a whole response, and the streaming
//! events (<https://platform.openai.com/docs/api-reference/responses-streaming>).
//!
//! Calls are keyed by their output item id (`item_id`, `fc_…`); the `call_id`
//! (`call_…`) is the id results must answer and becomes the call's `call_id`; the item
//! id is kept in `metadata.item_id`. Reasoning items become thinking parts carrying
//! `options.item_id` (and `options.encrypted_content` when given) so they can be
//! replayed.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;

use crate::message::{ContentPart, ContentType, MessageStatus, TokenUsage};
use crate::provider::assembly::{Assembler, Emit, End};
use crate::provider::framed::{EventHandler, SseDecoder};
use crate::provider::wire::{
    AnyText, ArgsField, WireUsage, malformed, provider_error, wrong_format,
};
use crate::provider::{
    DecodeError, DecodeOutcome, DecoderConfig, ProviderError, StopReason, StreamEvent,
};

use super::NAME as FORMAT;

#[derive(Debug, Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    item_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    delta: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    arguments: Option<Cow<'a, str>>,
    /// As JSON: read as an [`Item`] when of a kind this decoder reads, kept whole
    /// otherwise (hosted-tool items, kinds added later).
    #[serde(default)]
    item: Option<Value>,
    #[serde(default, borrow)]
    response: Option<Response<'a>>,
    #[serde(default, borrow)]
    message: Option<Cow<'a, str>>,
    #[serde(default)]
    code: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct Item<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    call_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    arguments: Option<ArgsField<'a>>,
    #[serde(default)]
    content: Option<Vec<Value>>,
    #[serde(default)]
    summary: Option<Vec<Value>>,
    #[serde(default, borrow)]
    encrypted_content: Option<Cow<'a, str>>,
}

#[derive(Debug, Deserialize)]
struct Response<'a> {
    #[serde(default, borrow)]
    object: Option<Cow<'a, str>>,
    #[serde(default)]
    id: AnyText,
    #[serde(default)]
    model: AnyText,
    #[serde(default, borrow)]
    status: Option<Cow<'a, str>>,
    /// As JSON, for the same reason as [`Event::item`].
    #[serde(default)]
    output: Option<Vec<Value>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    incomplete_details: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Debug)]
struct State {
    asm: Assembler,
    /// Function-call items by item id → position (the first item of an id wins). A map,
    /// not a list: a turn with 10⁵ calls must not search 10⁵ items per event.
    items: std::collections::HashMap<String, u32>,
    /// Reasoning items already turned into parts: item id → part position.
    reasoning: std::collections::HashMap<String, usize>,
    status: Option<String>,
    incomplete_reason: Option<String>,
    usage: Option<TokenUsage>,
    error: Option<ProviderError>,
    ended: bool,
    /// Whether any Responses event came (a body with none is another format's).
    seen: bool,
}

impl State {
    fn new(config: DecoderConfig) -> Self {
        State {
            asm: Assembler::new(config.max_argument_bytes),
            items: std::collections::HashMap::new(),
            reasoning: std::collections::HashMap::new(),
            status: None,
            incomplete_reason: None,
            usage: None,
            error: None,
            ended: false,
            seen: false,
        }
    }

    fn item_pos(&self, id: &str) -> Option<u32> {
        self.items.get(id).copied()
    }

    fn data(&mut self, data: &[u8], on_event: Emit<'_>) -> Result<(), DecodeError> {
        let data = data.trim_ascii();
        if data == b"[DONE]" {
            return Ok(()); // some proxies add it
        }
        let ev: Event<'_> = match serde_json::from_slice(data) {
            Ok(ev) => ev,
            // An event of a kind this decoder does not read may hold anything (the
            // hosted shell's `delta` is an object): skipped. A kind it reads, with a
            // field of the wrong shape, is an error.
            Err(e) => {
                return match event_type(data) {
                    Some(t) if !READ_EVENTS.contains(&t.as_str()) => {
                        self.seen |= is_responses_type(&t);
                        Ok(())
                    }
                    _ => Err(malformed(FORMAT, &e)),
                };
            }
        };
        let kind = ev.kind.as_deref().unwrap_or("");
        self.seen |= is_responses_type(kind);
        match kind {
            "response.output_text.delta" | "response.refusal.delta" => {
                if let Some(d) = &ev.delta {
                    self.asm.push_content(ContentType::Text, d, on_event);
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                if let Some(d) = &ev.delta {
                    self.reasoning_delta(ev.item_id.as_deref(), d, on_event);
                }
            }
            "response.output_item.added" => {
                if let Some(item) = &ev.item {
                    self.item_value(item, false, on_event)?;
                }
            }
            "response.output_item.done" => {
                if let Some(item) = &ev.item {
                    self.item_value(item, true, on_event)?;
                }
            }
            "response.function_call_arguments.delta" => {
                let pos = self.pos_for(ev.item_id.as_deref(), on_event);
                if let Some(d) = &ev.delta {
                    self.asm.push_arguments(pos, d, on_event)?;
                }
            }
            "response.function_call_arguments.done" => {
                let pos = self.pos_for(ev.item_id.as_deref(), on_event);
                if let Some(a) = &ev.arguments {
                    self.asm.replace_arguments(pos, a)?;
                }
                self.asm.finish_call(pos, on_event)?;
            }
            // The response's id and model, known from the start (`completed` repeats
            // them, but a stream cut short never sends it).
            "response.created" | "response.in_progress" => {
                if let Some(r) = &ev.response {
                    self.asm
                        .set_response(r.id.0.as_deref(), r.model.0.as_deref());
                }
            }
            "response.completed" | "response.incomplete" | "response.failed" | "response.done" => {
                if let Some(r) = ev.response {
                    self.response(r, false, on_event)?;
                }
                if kind == "response.failed" && self.error.is_none() {
                    self.set_error(
                        ProviderError {
                            kind: "response.failed".into(),
                            message: "the response failed".into(),
                        },
                        on_event,
                    );
                }
                self.ended = true;
            }
            "error" => {
                let mut e = match &ev.error {
                    Some(v) if !v.is_null() => provider_error(v),
                    _ => ProviderError {
                        kind: "error".into(),
                        message: String::new(),
                    },
                };
                if let Some(m) = &ev.message {
                    e.message = m.to_string();
                }
                match &ev.code {
                    Some(Value::String(c)) if !c.is_empty() => e.kind = c.clone(),
                    Some(Value::Number(n)) => e.kind = n.to_string(),
                    _ => {}
                }
                self.set_error(e, on_event);
            }
            "" => {
                return Err(wrong_format(
                    FORMAT,
                    "expected a Responses event with a `type`",
                ));
            }
            // Other lifecycle events, and kinds added later: skipped (a body with no
            // Responses event at all is refused at its end).
            _ => {}
        }
        Ok(())
    }

    /// An output item as JSON: one of a kind this decoder reads goes to [`Self::item`];
    /// any other (a hosted tool's call or output, a kind added later) is never a client
    /// call: once done, it is kept whole as an opaque part, replayed to Responses.
    fn item_value(&mut self, v: &Value, done: bool, on_event: Emit<'_>) -> Result<(), DecodeError> {
        match v.get("type").and_then(Value::as_str) {
            Some("function_call" | "reasoning" | "message") => {
                let item = Item::deserialize(v).map_err(|e| malformed(FORMAT, &e))?;
                self.item(item, done, on_event)
            }
            _ => {
                if done {
                    self.asm.push_part(opaque_part(v.clone()));
                }
                Ok(())
            }
        }
    }

    fn set_error(&mut self, e: ProviderError, on_event: Emit<'_>) {
        on_event(StreamEvent::Error {
            kind: Cow::Borrowed(&e.kind),
            message: Cow::Borrowed(&e.message),
        });
        self.error = Some(e);
    }

    /// The call for an item id, created (nameless) when the item was never announced.
    fn pos_for(&mut self, item_id: Option<&str>, on_event: Emit<'_>) -> u32 {
        let id = item_id.unwrap_or("");
        if let Some(p) = self.item_pos(id) {
            return p;
        }
        let p = self.asm.start_call(None, "", on_event);
        if !id.is_empty() {
            self.asm
                .set_call_metadata(p, "item_id", Value::String(id.to_owned()));
        }
        self.items.entry(id.to_owned()).or_insert(p);
        p
    }

    fn reasoning_delta(&mut self, item_id: Option<&str>, text: &str, on_event: Emit<'_>) {
        let id = item_id.unwrap_or("");
        if !self.reasoning.contains_key(id) {
            self.asm.split_content();
            let p = self.asm.part_for(ContentType::Thinking);
            if !id.is_empty() {
                self.asm
                    .set_part_option(p, "item_id", Value::String(id.to_owned()));
            }
            self.reasoning.insert(id.to_owned(), p);
        }
        self.asm.push_content(ContentType::Thinking, text, on_event);
    }

    fn item(&mut self, item: Item<'_>, done: bool, on_event: Emit<'_>) -> Result<(), DecodeError> {
        match item.kind.as_deref() {
            Some("function_call") => {
                let item_id = item.id.as_deref().unwrap_or("");
                // A finished item whose id was never announced, naming a call already
                // streaming (an id garbled in transit, a proxy rewriting ids) finishes
                // that call: it must not become a second call with the same id.
                let known = self.item_pos(item_id).or_else(|| {
                    done.then_some(item.call_id.as_deref())
                        .flatten()
                        .and_then(|c| self.asm.last_call_with_id(c))
                });
                let pos = match known {
                    Some(p) => {
                        self.asm.update_call(p, item.call_id.as_deref(), None);
                        if self.asm.call(p).is_some_and(|c| c.name.is_empty()) {
                            self.asm.update_call(p, None, item.name.as_deref());
                        }
                        p
                    }
                    None => {
                        let p = self.asm.start_call(
                            item.call_id.as_deref(),
                            item.name.as_deref().unwrap_or(""),
                            on_event,
                        );
                        if !item_id.is_empty() {
                            self.asm.set_call_metadata(
                                p,
                                "item_id",
                                Value::String(item_id.to_owned()),
                            );
                        }
                        self.items.entry(item_id.to_owned()).or_insert(p);
                        p
                    }
                };
                match item.arguments {
                    Some(ArgsField::Text(t)) if done => self.asm.replace_arguments(pos, &t)?,
                    Some(ArgsField::Text(t)) => self.asm.push_arguments(pos, &t, on_event)?,
                    Some(ArgsField::Object(o)) => {
                        self.asm.set_arguments_object(pos, o, on_event)?
                    }
                    Some(ArgsField::Other(t)) => self.asm.replace_arguments(pos, &t)?,
                    None => {}
                }
                if done {
                    self.asm.finish_call(pos, on_event)?;
                }
            }
            Some("reasoning") if done => {
                let id = item.id.as_deref().unwrap_or("");
                let known = self.reasoning.get(id).copied();
                let pos = match known {
                    Some(p) => p,
                    None => {
                        // No deltas were streamed: take the summary text from the item.
                        self.reasoning_delta(Some(id), "", on_event);
                        let p = self.reasoning.get(id).copied().unwrap_or(0);
                        for s in item.summary.iter().flatten() {
                            if let Some(t) = s.get("text").and_then(Value::as_str) {
                                self.asm.push_content(ContentType::Thinking, t, on_event);
                            }
                        }
                        p
                    }
                };
                if let Some(enc) = item.encrypted_content.as_deref()
                    && let Some(part) = self.asm.part_mut(pos)
                {
                    part.options
                        .insert("encrypted_content".into(), Value::String(enc.to_owned()));
                }
            }
            // Text normally streams as deltas; take it from the item only if none came.
            Some("message") if done && !self.asm.has_part(ContentType::Text) => {
                for c in item.content.iter().flatten() {
                    if let Some(t) = c.get("text").and_then(Value::as_str) {
                        self.asm.push_content(ContentType::Text, t, on_event);
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn response(
        &mut self,
        r: Response<'_>,
        whole: bool,
        on_event: Emit<'_>,
    ) -> Result<(), DecodeError> {
        self.asm
            .set_response(r.id.0.as_deref(), r.model.0.as_deref());
        if whole {
            for item in r.output.iter().flatten() {
                self.item_value(item, true, on_event)?;
            }
        }
        if let Some(s) = r.status {
            self.status = Some(s.into_owned());
        }
        if let Some(reason) = r
            .incomplete_details
            .as_ref()
            .and_then(|d| d.get("reason"))
            .and_then(Value::as_str)
        {
            self.incomplete_reason = Some(reason.to_owned());
        }
        if let Some(e) = r.error.as_ref().filter(|e| !e.is_null()) {
            self.set_error(provider_error(e), on_event);
        }
        if let Some(u) = r.usage {
            let u = TokenUsage::from(u);
            on_event(StreamEvent::Usage(u));
            self.usage = Some(u);
        }
        let _ = r.object;
        Ok(())
    }

    fn end(mut self, on_event: Emit<'_>) -> Result<DecodeOutcome, DecodeError> {
        if !self.seen {
            return Err(wrong_format(
                FORMAT,
                "no OpenAI Responses event in the body",
            ));
        }
        let has_calls = self.asm.call_count() > 0;
        let (status, reason, raw) = match (self.status.as_deref(), &self.error) {
            (_, Some(_)) | (Some("failed"), _) => (
                MessageStatus::Cancelled,
                Some(StopReason::Error),
                self.status.clone(),
            ),
            (Some("completed"), _) => (
                MessageStatus::Complete,
                Some(if has_calls {
                    StopReason::ToolCalls
                } else {
                    StopReason::EndTurn
                }),
                Some("completed".to_owned()),
            ),
            (Some("incomplete"), _) => {
                let r = self.incomplete_reason.clone();
                match r.as_deref() {
                    Some("content_filter") => {
                        (MessageStatus::Complete, Some(StopReason::ContentFilter), r)
                    }
                    _ => (
                        MessageStatus::Length,
                        Some(StopReason::MaxTokens),
                        r.or(Some("incomplete".into())),
                    ),
                }
            }
            (Some(other), _) if self.ended => (
                MessageStatus::Cancelled,
                Some(StopReason::Other),
                Some(other.to_owned()),
            ),
            _ => (MessageStatus::Cancelled, None, None),
        };
        if let Some(r) = reason {
            on_event(StreamEvent::Stop {
                reason: r,
                raw: Cow::Borrowed(raw.as_deref().unwrap_or("")),
            });
        }
        if status == MessageStatus::Complete {
            self.asm.finish_all(on_event)?;
            self.asm.synthesize_missing_ids();
        }
        Ok(self.asm.into_outcome_as(End {
            status,
            stop_reason: reason,
            raw_stop_reason: raw,
            usage: self.usage,
            error: self.error,
        }))
    }
}

impl EventHandler for State {
    // A Responses stream is SSE only: a plain JSON body is a non-streaming response.
    const WHOLE_BODIES: bool = false;

    fn on_data(&mut self, data: &[u8], emit: Emit<'_>) -> Result<(), DecodeError> {
        self.data(data, emit)
    }

    fn finish(self, emit: Emit<'_>) -> Result<DecodeOutcome, DecodeError> {
        self.end(emit)
    }

    fn decode_whole(
        &mut self,
        _body: &[u8],
        _emit: Emit<'_>,
    ) -> Result<DecodeOutcome, DecodeError> {
        Err(wrong_format(FORMAT, "not an SSE stream"))
    }
}

/// The streaming OpenAI Responses decoder: the shared SSE decoder over the Responses handler.
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

/// Decodes a whole non-streaming Responses body.
pub fn decode_response(body: &[u8], config: DecoderConfig) -> Result<DecodeOutcome, DecodeError> {
    #[derive(Deserialize)]
    struct Whole<'a> {
        #[serde(default, borrow)]
        object: Option<Cow<'a, str>>,
        #[serde(default)]
        error: Option<Value>,
    }
    let head: Whole<'_> = serde_json::from_slice(body).map_err(|e| malformed(FORMAT, &e))?;
    let mut state = State::new(config);
    // A whole body is read whole: its `object` says what it is.
    state.seen = true;
    let mut sink = |_: StreamEvent<'_>| {};
    if head.object.as_deref() != Some("response") {
        if let Some(e) = head.error.as_ref().filter(|e| !e.is_null()) {
            state.set_error(provider_error(e), &mut sink);
            return state.end(&mut sink);
        }
        return Err(wrong_format(
            FORMAT,
            "expected a response object (`\"object\": \"response\"`)",
        ));
    }
    let r: Response<'_> = serde_json::from_slice(body).map_err(|e| malformed(FORMAT, &e))?;
    state.response(r, true, &mut sink)?;
    state.ended = true;
    state.end(&mut sink)
}

/// The event types whose fields this decoder reads.
const READ_EVENTS: [&str; 13] = [
    "response.output_text.delta",
    "response.refusal.delta",
    "response.reasoning_summary_text.delta",
    "response.reasoning_text.delta",
    "response.output_item.added",
    "response.output_item.done",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.completed",
    "response.incomplete",
    "response.failed",
    "response.done",
    "error",
];

/// An opaque part holding a Responses output item this decoder does not read.
pub(crate) fn opaque_part(item: Value) -> ContentPart {
    ContentPart::new(ContentType::Unsupported, "")
        .with_option("provider", FORMAT)
        .with_option("item", item)
}

fn is_responses_type(t: &str) -> bool {
    t.starts_with("response.") || t == "error"
}

/// The `type` member of an event whose full parse failed, if it has one.
fn event_type(data: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct T {
        #[serde(rename = "type")]
        kind: String,
    }
    serde_json::from_slice::<T>(data).ok().map(|t| t.kind)
}

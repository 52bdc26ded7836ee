//! LineChat: a wire format written outside llmchain, with the public API only.
//!
//! A request is one JSON object:
//!
//! ```json
//! {"model": "line-1", "stream": true, "system": "…",
//!  "tools": [{"name": "get_weather", "description": "…", "schema": {…}}],
//!  "turns": [{"role": "user", "text": "…"},
//!            {"role": "assistant", "text": "…", "calls": [{"id": "c1", "name": "f", "args": {…}}]},
//!            {"role": "tool", "id": "c1", "text": "…", "error": false}]}
//! ```
//!
//! A streamed answer is newline-delimited JSON, one event a line:
//! `{"text": "…"}`, `{"call": {"id": "c1", "name": "f"}}`, `{"args": "<fragment>"}`,
//! `{"error": {"kind": "…", "message": "…"}}` and last
//! `{"end": "stop" | "tools" | "length", "id": "…", "model": "…", "usage": {"input": n, "output": n}}`.
//! A whole answer is one object: `{"text": "…", "calls": [{"id", "name", "args": "<text>"}], "end": …}`.
//!
//! [`FORMAT`] describes it, [`register`] makes its name known (`"linechat".parse()`, the
//! CLI's `--format`), and [`PROVIDER`] says how to reach a LineChat server over HTTP.

use std::borrow::Cow;

use llmchain::conversation::Conversation;
use llmchain::http::providers::{Provider, Route, RouteContext};
use llmchain::message::{
    InvalidToolCall, Message, MessageStatus, Role, TokenUsage, ToolCall, ToolCallAttrs,
    ToolCallStatus,
};
use llmchain::model::ModelError;
use llmchain::provider::{
    Codec, DecodeError, DecodeOutcome, DecoderConfig, EncodeError, Format, FormatSpec, FormatTaken,
    Framing, ProviderError, RequestOptions, StopReason, StreamDecoder, StreamEvent,
};
use serde_json::{Map, Value, json};

/// The format's name.
pub const NAME: &str = "linechat";

/// LineChat's descriptor (with its renderer of scripted responses under the feature
/// `test-util`, so `ScriptedModel` speaks it).
pub static FORMAT: FormatSpec = spec();

const fn spec() -> FormatSpec {
    let spec = FormatSpec::new(NAME, "LineChat", &LineChatCodec)
        .aliases(&["lc"])
        .framing(Framing::Ndjson);
    #[cfg(feature = "test-util")]
    let spec = spec.renderer(render_script);
    spec
}

/// A scripted response as LineChat's wire bytes: its text and calls, ended naturally
/// (what `ScriptedModel` replays).
#[cfg(feature = "test-util")]
pub fn render_script(
    s: &llmchain::provider::render::ResponseScript,
) -> Result<Vec<u8>, llmchain::provider::render::RenderError> {
    let calls: Vec<(&str, &str, &str)> = s
        .tool_calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
        .collect();
    Ok(render(
        s.text.as_deref().unwrap_or_default(),
        &calls,
        s.fragment_bytes,
    ))
}

/// A LineChat server over HTTP: `POST {base}/chat`, a bearer key when one is set. Its
/// `Accept` and its reading of a JSON-typed stream follow the format's NDJSON framing
/// (the trait's defaults).
pub struct LineChatServer;

impl Provider for LineChatServer {
    fn name(&self) -> &'static str {
        "linechat"
    }
    fn codec(&self) -> &'static dyn Codec {
        &LineChatCodec
    }
    fn default_model(&self) -> &'static str {
        "line-1"
    }
    fn base_url_template(&self) -> &'static str {
        "http://127.0.0.1:8808"
    }
    fn route(&self, _: &RouteContext<'_>) -> Result<Route, ModelError> {
        Ok(Route::path("/chat"))
    }
    fn summary(&self) -> &'static str {
        "A LineChat server"
    }
    fn base_url_env(&self) -> &'static [&'static str] {
        &["LINECHAT_BASE_URL"]
    }
    fn key_env(&self) -> &'static [&'static str] {
        &["LINECHAT_API_KEY"]
    }
    fn key_required(&self) -> bool {
        false
    }
}

/// The LineChat server provider.
pub static PROVIDER: LineChatServer = LineChatServer;

/// Makes the name `linechat` (and `lc`) known, once; an error when another format has it.
pub fn register() -> Result<Format, FormatTaken> {
    Format::register(&FORMAT)
}

/// The LineChat codec.
#[derive(Debug, Clone, Copy, Default)]
pub struct LineChatCodec;

impl Codec for LineChatCodec {
    fn format(&self) -> Format {
        Format::new(&FORMAT)
    }

    fn encode(&self, conv: &Conversation, opts: &RequestOptions) -> Result<Vec<u8>, EncodeError> {
        let mut turns = Vec::new();
        for m in &conv.messages {
            match m.role {
                Role::User => {
                    turns.push(json!({"role": "user", "text": m.text().unwrap_or_default()}))
                }
                Role::Assistant => {
                    let calls: Vec<Value> = m
                        .tool_calls
                        .iter()
                        .map(|c| {
                            json!({"id": c.call_id, "name": c.name, "args": Value::Object(c.arguments_as_map())})
                        })
                        .collect();
                    turns.push(json!({"role": "assistant", "text": m.text().unwrap_or_default(), "calls": calls}));
                }
                Role::Tool => {
                    for r in &m.tool_results {
                        turns.push(json!({"role": "tool", "id": r.tool_call_id, "text": r.content_text(), "error": r.is_error()}));
                    }
                }
                Role::System => {}
                _ => {
                    return Err(EncodeError::Unsupported {
                        format: NAME,
                        message: format!("a message of role {} cannot be sent", m.role.as_str()),
                    });
                }
            }
        }
        let tools: Vec<Value> = conv
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "schema": t.parameters_schema}))
            .collect();
        let mut body =
            json!({"model": opts.model, "stream": opts.stream, "turns": turns, "tools": tools});
        if let Some(system) = &conv.system {
            body["system"] = json!(system);
        }
        if let Some(n) = opts.max_tokens {
            body["max_tokens"] = json!(n);
        }
        for (k, v) in &opts.extra {
            body[k] = v.clone();
        }
        serde_json::to_vec(&body).map_err(|e| EncodeError::Invalid(e.to_string()))
    }

    fn stream_decoder(&self, config: DecoderConfig) -> Box<dyn StreamDecoder> {
        Box::new(LineDecoder {
            config,
            line: Vec::new(),
            answer: Answer::default(),
            finished: false,
        })
    }

    fn decode_response(
        &self,
        body: &[u8],
        config: DecoderConfig,
    ) -> Result<DecodeOutcome, DecodeError> {
        let v: Value = serde_json::from_slice(body).map_err(|e| malformed(e.to_string()))?;
        let mut answer = Answer::default();
        let mut sink = |_: StreamEvent<'_>| {};
        if let Some(e) = v.get("error") {
            answer.error(e, &mut sink);
            return Ok(answer.outcome(false));
        }
        if let Some(text) = v.get("text").and_then(Value::as_str) {
            answer.text.push_str(text);
        }
        for c in v
            .get("calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let call = Call::of(c);
            if call.args.len() > config.max_argument_bytes {
                return Err(DecodeError::ArgumentsTooLarge {
                    limit: config.max_argument_bytes,
                });
            }
            answer.calls.push(call);
        }
        let ended = answer.end(&v, &mut sink);
        Ok(answer.outcome(ended))
    }
}

fn malformed(message: impl Into<String>) -> DecodeError {
    DecodeError::Malformed {
        format: NAME,
        message: message.into(),
    }
}

/// A call as it streams in.
#[derive(Debug, Default)]
struct Call {
    id: Option<String>,
    name: String,
    args: String,
}

impl Call {
    /// A `call` event's or a whole answer's call: its id, name and (whole answers only)
    /// argument text.
    fn of(c: &Value) -> Call {
        Call {
            id: c.get("id").and_then(Value::as_str).map(str::to_owned),
            name: c
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            args: match c.get("args") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            },
        }
    }
}

/// What the answer holds so far.
#[derive(Debug, Default)]
struct Answer {
    text: String,
    calls: Vec<Call>,
    stop: Option<(StopReason, String)>,
    usage: Option<TokenUsage>,
    error: Option<ProviderError>,
    id: Option<String>,
    model: Option<String>,
}

impl Answer {
    /// Reads an `end` event; whether it was one.
    fn end(&mut self, v: &Value, emit: &mut dyn FnMut(StreamEvent<'_>)) -> bool {
        let Some(end) = v.get("end").and_then(Value::as_str) else {
            return false;
        };
        let reason = match end {
            "tools" => StopReason::ToolCalls,
            "length" => StopReason::MaxTokens,
            _ => StopReason::EndTurn,
        };
        emit(StreamEvent::Stop {
            reason,
            raw: Cow::Borrowed(end),
        });
        self.stop = Some((reason, end.to_owned()));
        if let Some(u) = v.get("usage") {
            let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
            let usage = TokenUsage::new(n("input"), n("output"));
            emit(StreamEvent::Usage(usage));
            self.usage = Some(usage);
        }
        // Bounded: an id or model name is a label, not a document.
        let label = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .map(|s| s.chars().take(256).collect())
        };
        self.id = label("id");
        self.model = label("model");
        true
    }

    fn error(&mut self, e: &Value, emit: &mut dyn FnMut(StreamEvent<'_>)) {
        let kind = e.get("kind").and_then(Value::as_str).unwrap_or("error");
        let message = e.get("message").and_then(Value::as_str).unwrap_or_default();
        emit(StreamEvent::Error {
            kind: Cow::Borrowed(kind),
            message: Cow::Borrowed(message),
        });
        self.error = Some(ProviderError {
            kind: kind.to_owned(),
            message: message.to_owned(),
        });
    }

    /// The outcome. An answer that did not end (`ended` false) is cut off: its message
    /// is `Cancelled` and its calls stay incomplete, so none ever runs.
    fn outcome(self, ended: bool) -> DecodeOutcome {
        let cut = !ended || self.error.is_some();
        let length = matches!(self.stop, Some((StopReason::MaxTokens, _)));
        let mut invalid = Vec::new();
        let mut calls = Vec::new();
        for (i, c) in self.calls.into_iter().enumerate() {
            let raw = ToolCall::new_or_panic(ToolCallAttrs {
                status: ToolCallStatus::Incomplete,
                call_id: c.id.clone(),
                name: Some(c.name.clone()),
                arguments: Some(llmchain::message::Arguments::Raw(c.args.clone())),
                index: u32::try_from(i).ok(),
                ..ToolCallAttrs::default()
            });
            if cut || length {
                calls.push(raw);
                continue;
            }
            match raw.clone().complete() {
                Ok(done) => calls.push(done),
                Err(errors) => {
                    invalid.push(InvalidToolCall {
                        position: calls.len(),
                        errors,
                    });
                    calls.push(raw);
                }
            }
        }
        let mut message = Message::assistant_with_calls(self.text, calls);
        message.status = if length {
            MessageStatus::Length
        } else if cut {
            MessageStatus::Cancelled
        } else {
            MessageStatus::Complete
        };
        DecodeOutcome {
            message,
            invalid_tool_calls: invalid,
            stop_reason: self.stop.as_ref().map(|(r, _)| *r),
            raw_stop_reason: self.stop.map(|(_, raw)| raw),
            usage: self.usage,
            error: self.error,
            response_id: self.id,
            response_model: self.model,
        }
    }
}

/// The streaming decoder: lines of any chunking, each line bounded.
struct LineDecoder {
    config: DecoderConfig,
    line: Vec<u8>,
    answer: Answer,
    finished: bool,
}

impl LineDecoder {
    fn on_line(
        &mut self,
        line: &[u8],
        emit: &mut dyn FnMut(StreamEvent<'_>),
    ) -> Result<(), DecodeError> {
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        let v: Value = serde_json::from_slice(line).map_err(|e| malformed(e.to_string()))?;
        let a = &mut self.answer;
        if let Some(text) = v.get("text").and_then(Value::as_str) {
            emit(StreamEvent::TextDelta {
                index: 0,
                text: Cow::Borrowed(text),
            });
            a.text.push_str(text);
        } else if let Some(c) = v.get("call") {
            let call = Call::of(c);
            let index = u32::try_from(a.calls.len()).unwrap_or(u32::MAX);
            emit(StreamEvent::ToolCallStarted {
                index,
                call_id: call.id.as_deref().map(Cow::Borrowed),
                name: Cow::Borrowed(&call.name),
            });
            a.calls.push(call);
        } else if let Some(fragment) = v.get("args").and_then(Value::as_str) {
            let index = u32::try_from(a.calls.len().saturating_sub(1)).unwrap_or(u32::MAX);
            let Some(call) = a.calls.last_mut() else {
                return Err(malformed("arguments before any call"));
            };
            if call.args.len() + fragment.len() > self.config.max_argument_bytes {
                return Err(DecodeError::ArgumentsTooLarge {
                    limit: self.config.max_argument_bytes,
                });
            }
            call.args.push_str(fragment);
            emit(StreamEvent::ToolCallArguments {
                index,
                fragment: Cow::Borrowed(fragment),
            });
        } else if let Some(e) = v.get("error") {
            a.error(e, emit);
        } else if a.end(&v, emit) {
            self.finished = true;
        }
        Ok(())
    }
}

impl StreamDecoder for LineDecoder {
    fn feed(
        &mut self,
        chunk: &[u8],
        on_event: &mut dyn FnMut(StreamEvent<'_>),
    ) -> Result<(), DecodeError> {
        for piece in chunk.split_inclusive(|b| *b == b'\n') {
            self.line.extend_from_slice(piece);
            if self.line.len() > self.config.max_line_bytes {
                return Err(DecodeError::LineTooLong {
                    limit: self.config.max_line_bytes,
                });
            }
            if piece.ends_with(b"\n") {
                let line = std::mem::take(&mut self.line);
                self.on_line(&line, on_event)?;
            }
        }
        Ok(())
    }

    fn finish(
        &mut self,
        on_event: &mut dyn FnMut(StreamEvent<'_>),
    ) -> Result<DecodeOutcome, DecodeError> {
        let line = std::mem::take(&mut self.line);
        // A last line cut off mid-way is not an event: the answer did not end.
        if !line.is_empty() && serde_json::from_slice::<Value>(&line).is_ok() {
            self.on_line(&line, on_event)?;
        }
        let answer = std::mem::take(&mut self.answer);
        Ok(answer.outcome(self.finished))
    }

    fn interrupt(&mut self) -> Option<Message> {
        let answer = std::mem::take(&mut self.answer);
        let mut message = answer.outcome(false).message;
        message.status = MessageStatus::Cancelled;
        Some(message)
    }
}

/// Writes `text` and `calls` as a LineChat stream, for tests and demos: text in one
/// line, each call's arguments in `fragment`-byte pieces, and an `end` line.
pub fn render(text: &str, calls: &[(&str, &str, &str)], fragment: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut line = |v: Value| {
        out.extend_from_slice(v.to_string().as_bytes());
        out.push(b'\n');
    };
    if !text.is_empty() {
        line(json!({"text": text}));
    }
    for (id, name, args) in calls {
        line(json!({"call": {"id": id, "name": name}}));
        let mut rest = *args;
        while !rest.is_empty() {
            let mut n = fragment.clamp(1, rest.len());
            while !rest.is_char_boundary(n) {
                n += 1;
            }
            line(json!({"args": &rest[..n]}));
            rest = &rest[n..];
        }
    }
    let end = if calls.is_empty() { "stop" } else { "tools" };
    let mut last = Map::new();
    last.insert("end".into(), json!(end));
    last.insert("id".into(), json!("lc-1"));
    last.insert("model".into(), json!("line-1-2026"));
    last.insert("usage".into(), json!({"input": 12, "output": 7}));
    line(Value::Object(last));
    out
}

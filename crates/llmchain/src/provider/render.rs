//! Rendering a scripted assistant response as a provider's *response* stream.
//!
//! The mirror image of the decoders: it writes the bytes a provider would send, so the
//! scripted model, the demo and local test servers speak the real wire format and
//! exercise the real decoders. Fragment boundaries are chosen like real servers do
//! (small, arbitrary substrings of the argument text).

use serde_json::json;

use super::format::Format;
use crate::message::TokenUsage;

/// A tool call in a scripted response.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptedCall {
    /// The wire id.
    pub id: String,
    /// The tool name.
    pub name: String,
    /// The argument text, streamed as is (it may be deliberately invalid JSON).
    pub arguments: String,
}

/// How a scripted response ends.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub enum ScriptStop {
    /// A natural end (`tool_calls`/`tool_use` when there are calls, else end of turn).
    #[default]
    Natural,
    /// Cut off by the token limit in the middle of the last call's arguments.
    MaxTokens,
    /// An error event after part of the response.
    Error {
        /// Provider error type, e.g. `overloaded_error`.
        kind: String,
        /// Message.
        message: String,
    },
    /// The body just ends, mid-response.
    Truncated,
}

/// A scripted assistant response.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponseScript {
    /// Reasoning text, streamed first.
    pub reasoning: Option<String>,
    /// Visible text.
    pub text: Option<String>,
    /// Tool calls, in order.
    pub tool_calls: Vec<ScriptedCall>,
    /// How it ends.
    pub stop: ScriptStop,
    /// Usage to report.
    pub usage: TokenUsage,
    /// Bytes per text/argument fragment (at least 1).
    pub fragment_bytes: usize,
    /// Model name written into the stream.
    pub model: String,
}

impl Default for ResponseScript {
    fn default() -> Self {
        ResponseScript {
            reasoning: None,
            text: None,
            tool_calls: Vec::new(),
            stop: ScriptStop::Natural,
            usage: TokenUsage::new(0, 0),
            fragment_bytes: 12,
            model: "scripted-model".into(),
        }
    }
}

impl ResponseScript {
    /// A text-only response.
    pub fn text(text: impl Into<String>) -> Self {
        ResponseScript {
            text: Some(text.into()),
            ..Default::default()
        }
    }

    /// A response with one tool call (and optional lead-in text).
    pub fn tool_call(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        ResponseScript::default().with_call(id, name, arguments)
    }

    /// Adds a tool call.
    #[must_use]
    pub fn with_call(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        self.tool_calls.push(ScriptedCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        });
        self
    }

    /// Sets the visible text.
    #[must_use]
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }

    /// Sets the reasoning text.
    #[must_use]
    pub fn with_reasoning(mut self, text: impl Into<String>) -> Self {
        self.reasoning = Some(text.into());
        self
    }

    /// Sets how it ends.
    #[must_use]
    pub fn with_stop(mut self, stop: ScriptStop) -> Self {
        self.stop = stop;
        self
    }

    /// Sets the usage.
    #[must_use]
    pub fn with_usage(mut self, input: u64, output: u64) -> Self {
        self.usage = TokenUsage::new(input, output);
        self
    }
}

/// The formats [`render_stream`] can write: every format.
pub const RENDERABLE: &[Format] = Format::ALL;

/// A script that a format's wire cannot carry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RenderError {
    /// Gemini and Ollama send a call's arguments as a JSON object in one piece, so
    /// arguments that are not a JSON object (e.g. deliberately invalid JSON) cannot be
    /// written on those wires.
    #[error(
        "{format} cannot carry tool call '{name}': its arguments are not a JSON object, and {format} sends arguments as whole objects (script invalid arguments with openai_chat, openai_responses or anthropic)"
    )]
    ArgumentsNotAnObject {
        /// The format asked for.
        format: Format,
        /// The call's tool name.
        name: String,
    },
    /// The format's descriptor has no renderer.
    #[error("{0} has no renderer of scripted responses")]
    NoRenderer(Format),
}

/// Renders the script as the streamed body `format` would send.
///
/// OpenAI Chat, Responses and Anthropic stream arguments in fragments of
/// [`ResponseScript::fragment_bytes`]; Gemini and Ollama send each call whole, as real
/// servers do, so there a [`ScriptStop::MaxTokens`] cut drops the unfinished last call
/// and Gemini's ids are the decoder's synthesised ones, not the script's.
///
/// ```
/// use llmchain::provider::render::{ResponseScript, render_stream};
/// use llmchain::provider::{DecoderConfig, Format};
///
/// let script = ResponseScript::tool_call("call_1", "get_weather", r#"{"city": "Paris"}"#);
/// for &format in Format::ALL {
///     let body = render_stream(format, &script).unwrap();
///     let codec = format.codec();
///     let message = codec.decode_body(&body, 7, DecoderConfig::default()).unwrap().message;
///     assert_eq!(message.tool_calls[0].name.as_deref(), Some("get_weather"));
/// }
/// ```
pub fn render_stream(format: Format, script: &ResponseScript) -> Result<Vec<u8>, RenderError> {
    let render = format
        .spec()
        .renderer
        .ok_or(RenderError::NoRenderer(format))?;
    render(script)
}

/// The calls a whole-call wire sends (all but a MaxTokens-cut last one), with their
/// arguments as objects.
fn whole_calls(
    format: Format,
    s: &ResponseScript,
) -> Result<Vec<(&ScriptedCall, serde_json::Value)>, RenderError> {
    let keep = if s.stop == ScriptStop::MaxTokens {
        s.tool_calls.len().saturating_sub(1)
    } else {
        s.tool_calls.len()
    };
    s.tool_calls[..keep]
        .iter()
        .map(|c| {
            let args = if c.arguments.trim().is_empty() {
                json!({})
            } else {
                serde_json::from_str::<serde_json::Value>(&c.arguments)
                    .ok()
                    .filter(serde_json::Value::is_object)
                    .ok_or_else(|| RenderError::ArgumentsNotAnObject {
                        format,
                        name: c.name.clone(),
                    })?
            };
            Ok((c, args))
        })
        .collect()
}

/// Splits text into fragments of about `n` bytes on character boundaries.
fn fragments(s: &str, n: usize) -> Vec<&str> {
    let n = n.max(1);
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let mut j = (i + n).min(s.len());
        while !s.is_char_boundary(j) {
            j += 1;
        }
        out.push(&s[i..j]);
        i = j;
    }
    out
}

/// The arguments actually sent: the whole text, or half of the last call's on MaxTokens.
fn sent_arguments(script: &ResponseScript, i: usize) -> &str {
    let a = &script.tool_calls[i].arguments;
    if script.stop == ScriptStop::MaxTokens && i + 1 == script.tool_calls.len() {
        let mut cut = a.len() / 2;
        while !a.is_char_boundary(cut) {
            cut -= 1;
        }
        &a[..cut]
    } else {
        a
    }
}

fn sse_data(out: &mut Vec<u8>, v: &serde_json::Value) {
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(v.to_string().as_bytes());
    out.extend_from_slice(b"\n\n");
}

fn sse_event(out: &mut Vec<u8>, name: &str, v: &serde_json::Value) {
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(name.as_bytes());
    out.push(b'\n');
    sse_data(out, v);
}

pub(crate) fn openai_chat(s: &ResponseScript) -> Result<Vec<u8>, RenderError> {
    let mut out = Vec::new();
    let chunk = |delta: serde_json::Value, finish: Option<&str>| {
        json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 1_700_000_000,
               "model": s.model, "system_fingerprint": "fp_scripted",
               "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]})
    };
    sse_data(
        &mut out,
        &chunk(json!({"role": "assistant", "content": ""}), None),
    );
    if let Some(r) = &s.reasoning {
        for f in fragments(r, s.fragment_bytes) {
            sse_data(&mut out, &chunk(json!({"reasoning_content": f}), None));
        }
    }
    if let Some(t) = &s.text {
        for f in fragments(t, s.fragment_bytes) {
            sse_data(&mut out, &chunk(json!({"content": f}), None));
        }
    }
    for (i, c) in s.tool_calls.iter().enumerate() {
        sse_data(
            &mut out,
            &chunk(
                json!({"tool_calls": [{"index": i, "id": c.id, "type": "function",
                                      "function": {"name": c.name, "arguments": ""}}]}),
                None,
            ),
        );
        for f in fragments(sent_arguments(s, i), s.fragment_bytes) {
            sse_data(
                &mut out,
                &chunk(
                    json!({"tool_calls": [{"index": i, "function": {"arguments": f}}]}),
                    None,
                ),
            );
        }
    }
    match &s.stop {
        ScriptStop::Truncated => return Ok(out),
        ScriptStop::Error { kind, message } => {
            sse_data(
                &mut out,
                &json!({"error": {"type": kind, "message": message, "code": null}}),
            );
            return Ok(out);
        }
        ScriptStop::MaxTokens => sse_data(&mut out, &chunk(json!({}), Some("length"))),
        ScriptStop::Natural => {
            let reason = if s.tool_calls.is_empty() {
                "stop"
            } else {
                "tool_calls"
            };
            sse_data(&mut out, &chunk(json!({}), Some(reason)));
        }
    }
    sse_data(
        &mut out,
        &json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 1_700_000_000,
                "model": s.model, "choices": [],
                "usage": {"prompt_tokens": s.usage.input_tokens, "completion_tokens": s.usage.output_tokens,
                          "total_tokens": s.usage.total()}}),
    );
    out.extend_from_slice(b"data: [DONE]\n\n");
    Ok(out)
}

pub(crate) fn anthropic(s: &ResponseScript) -> Result<Vec<u8>, RenderError> {
    let mut out = Vec::new();
    sse_event(
        &mut out,
        "message_start",
        &json!({"type": "message_start", "message": {"id": "msg_scripted", "type": "message",
                "role": "assistant", "model": s.model, "content": [], "stop_reason": null,
                "stop_sequence": null, "usage": {"input_tokens": s.usage.input_tokens, "output_tokens": 1}}}),
    );
    let mut index = 0usize;
    if let Some(r) = &s.reasoning {
        sse_event(
            &mut out,
            "content_block_start",
            &json!({"type": "content_block_start", "index": index,
                    "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        );
        for f in fragments(r, s.fragment_bytes) {
            sse_event(
                &mut out,
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index,
                        "delta": {"type": "thinking_delta", "thinking": f}}),
            );
        }
        sse_event(
            &mut out,
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "signature_delta", "signature": "c2lnbmF0dXJl"}}),
        );
        sse_event(
            &mut out,
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        );
        index += 1;
    }
    if let Some(t) = &s.text {
        sse_event(
            &mut out,
            "content_block_start",
            &json!({"type": "content_block_start", "index": index,
                    "content_block": {"type": "text", "text": ""}}),
        );
        out.extend_from_slice(b"event: ping\ndata: {\"type\": \"ping\"}\n\n");
        for f in fragments(t, s.fragment_bytes) {
            sse_event(
                &mut out,
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index,
                        "delta": {"type": "text_delta", "text": f}}),
            );
        }
        sse_event(
            &mut out,
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        );
        index += 1;
    }
    let last = s.tool_calls.len().saturating_sub(1);
    for (i, c) in s.tool_calls.iter().enumerate() {
        sse_event(
            &mut out,
            "content_block_start",
            &json!({"type": "content_block_start", "index": index,
                    "content_block": {"type": "tool_use", "id": c.id, "name": c.name, "input": {}}}),
        );
        for f in fragments(sent_arguments(s, i), s.fragment_bytes) {
            sse_event(
                &mut out,
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": f}}),
            );
        }
        let cut = i == last && s.stop == ScriptStop::MaxTokens;
        if !cut {
            sse_event(
                &mut out,
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": index}),
            );
        }
        index += 1;
    }
    let stop = match &s.stop {
        ScriptStop::Truncated => return Ok(out),
        ScriptStop::Error { kind, message } => {
            sse_event(
                &mut out,
                "error",
                &json!({"type": "error", "error": {"type": kind, "message": message}}),
            );
            return Ok(out);
        }
        ScriptStop::MaxTokens => "max_tokens",
        ScriptStop::Natural if s.tool_calls.is_empty() => "end_turn",
        ScriptStop::Natural => "tool_use",
    };
    sse_event(
        &mut out,
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
                "usage": {"output_tokens": s.usage.output_tokens}}),
    );
    sse_event(&mut out, "message_stop", &json!({"type": "message_stop"}));
    Ok(out)
}

/// One ConverseStream event frame, padded as AWS pads them.
fn bedrock_event(out: &mut Vec<u8>, event: &str, mut payload: serde_json::Value) {
    payload["p"] = json!("abcdefghijklmnopqrstuvwxyzABCDEF"[..(out.len() % 24) + 4]);
    out.extend(crate::provider::framing::encode_frame(
        &[
            (":event-type", event),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ],
        payload.to_string().as_bytes(),
    ));
}

pub(crate) fn bedrock(s: &ResponseScript) -> Result<Vec<u8>, RenderError> {
    let mut out = Vec::new();
    bedrock_event(&mut out, "messageStart", json!({"role": "assistant"}));
    let mut index = 0usize;
    if let Some(r) = &s.reasoning {
        for f in fragments(r, s.fragment_bytes) {
            bedrock_event(
                &mut out,
                "contentBlockDelta",
                json!({"contentBlockIndex": index, "delta": {"reasoningContent": {"text": f}}}),
            );
        }
        bedrock_event(
            &mut out,
            "contentBlockDelta",
            json!({"contentBlockIndex": index,
                   "delta": {"reasoningContent": {"signature": "c2lnbmF0dXJl"}}}),
        );
        bedrock_event(
            &mut out,
            "contentBlockStop",
            json!({"contentBlockIndex": index}),
        );
        index += 1;
    }
    if let Some(t) = &s.text {
        // Text blocks come without a start, as Bedrock sends them.
        for f in fragments(t, s.fragment_bytes) {
            bedrock_event(
                &mut out,
                "contentBlockDelta",
                json!({"contentBlockIndex": index, "delta": {"text": f}}),
            );
        }
        bedrock_event(
            &mut out,
            "contentBlockStop",
            json!({"contentBlockIndex": index}),
        );
        index += 1;
    }
    let last = s.tool_calls.len().saturating_sub(1);
    for (i, c) in s.tool_calls.iter().enumerate() {
        bedrock_event(
            &mut out,
            "contentBlockStart",
            json!({"contentBlockIndex": index,
                   "start": {"toolUse": {"toolUseId": c.id, "name": c.name}}}),
        );
        for f in fragments(sent_arguments(s, i), s.fragment_bytes) {
            bedrock_event(
                &mut out,
                "contentBlockDelta",
                json!({"contentBlockIndex": index, "delta": {"toolUse": {"input": f}}}),
            );
        }
        if !(i == last && s.stop == ScriptStop::MaxTokens) {
            bedrock_event(
                &mut out,
                "contentBlockStop",
                json!({"contentBlockIndex": index}),
            );
        }
        index += 1;
    }
    let stop = match &s.stop {
        ScriptStop::Truncated => return Ok(out),
        ScriptStop::Error { kind, message } => {
            out.extend(crate::provider::framing::encode_frame(
                &[
                    (":exception-type", kind),
                    (":content-type", "application/json"),
                    (":message-type", "exception"),
                ],
                json!({"message": message}).to_string().as_bytes(),
            ));
            return Ok(out);
        }
        ScriptStop::MaxTokens => "max_tokens",
        ScriptStop::Natural if s.tool_calls.is_empty() => "end_turn",
        ScriptStop::Natural => "tool_use",
    };
    bedrock_event(&mut out, "messageStop", json!({"stopReason": stop}));
    // Usage follows the stop, as Bedrock sends it.
    bedrock_event(
        &mut out,
        "metadata",
        json!({"usage": {"inputTokens": s.usage.input_tokens,
                         "outputTokens": s.usage.output_tokens,
                         "totalTokens": s.usage.input_tokens + s.usage.output_tokens},
               "metrics": {"latencyMs": 100}}),
    );
    Ok(out)
}

pub(crate) fn openai_responses(s: &ResponseScript) -> Result<Vec<u8>, RenderError> {
    let mut out = Vec::new();
    let mut seq = 0u64;
    let mut event = |out: &mut Vec<u8>, name: &str, mut v: serde_json::Value| {
        v["type"] = json!(name);
        v["sequence_number"] = json!(seq);
        seq += 1;
        sse_event(out, name, &v);
    };
    let response = |status: &str, usage: serde_json::Value, incomplete: serde_json::Value| {
        json!({"id": "resp_scripted", "object": "response", "created_at": 1_700_000_000,
               "model": s.model, "parallel_tool_calls": true, "tool_choice": "auto", "tools": [],
               "status": status, "output": [], "usage": usage,
               "incomplete_details": incomplete, "error": null})
    };
    event(
        &mut out,
        "response.created",
        json!({"response": response("in_progress", json!(null), json!(null))}),
    );
    let mut output_index = 0usize;
    if let Some(r) = &s.reasoning {
        let id = "rs_scripted";
        event(
            &mut out,
            "response.output_item.added",
            json!({"output_index": output_index, "item": {"id": id, "type": "reasoning", "summary": []}}),
        );
        for f in fragments(r, s.fragment_bytes) {
            event(
                &mut out,
                "response.reasoning_summary_text.delta",
                json!({"item_id": id, "output_index": output_index, "summary_index": 0, "delta": f}),
            );
        }
        event(
            &mut out,
            "response.output_item.done",
            json!({"output_index": output_index, "item": {"id": id, "type": "reasoning",
                   "summary": [{"type": "summary_text", "text": r}]}}),
        );
        output_index += 1;
    }
    if let Some(t) = &s.text {
        let id = "msg_scripted";
        event(
            &mut out,
            "response.output_item.added",
            json!({"output_index": output_index, "item": {"id": id, "type": "message",
                   "status": "in_progress", "content": [], "role": "assistant"}}),
        );
        for f in fragments(t, s.fragment_bytes) {
            event(
                &mut out,
                "response.output_text.delta",
                json!({"item_id": id, "output_index": output_index, "content_index": 0,
                       "delta": f, "logprobs": []}),
            );
        }
        event(
            &mut out,
            "response.output_text.done",
            json!({"item_id": id, "output_index": output_index, "content_index": 0, "text": t}),
        );
        output_index += 1;
    }
    let last = s.tool_calls.len().saturating_sub(1);
    for (i, c) in s.tool_calls.iter().enumerate() {
        let item_id = format!("fc_scripted_{i}");
        event(
            &mut out,
            "response.output_item.added",
            json!({"output_index": output_index, "item": {"id": item_id, "type": "function_call",
                   "status": "in_progress", "arguments": "", "call_id": c.id, "name": c.name}}),
        );
        let sent = sent_arguments(s, i);
        for f in fragments(sent, s.fragment_bytes) {
            event(
                &mut out,
                "response.function_call_arguments.delta",
                json!({"item_id": item_id, "output_index": output_index, "delta": f}),
            );
        }
        if !(i == last && s.stop == ScriptStop::MaxTokens) {
            event(
                &mut out,
                "response.function_call_arguments.done",
                json!({"item_id": item_id, "output_index": output_index, "arguments": sent}),
            );
            event(
                &mut out,
                "response.output_item.done",
                json!({"output_index": output_index, "item": {"id": item_id, "type": "function_call",
                       "status": "completed", "arguments": sent, "call_id": c.id, "name": c.name}}),
            );
        }
        output_index += 1;
    }
    let usage = json!({"input_tokens": s.usage.input_tokens, "output_tokens": s.usage.output_tokens,
                       "total_tokens": s.usage.total()});
    match &s.stop {
        ScriptStop::Truncated => {}
        ScriptStop::Error { kind, message } => event(
            &mut out,
            "error",
            json!({"code": kind, "message": message, "param": null}),
        ),
        ScriptStop::MaxTokens => event(
            &mut out,
            "response.incomplete",
            json!({"response": response("incomplete", usage, json!({"reason": "max_output_tokens"}))}),
        ),
        ScriptStop::Natural => event(
            &mut out,
            "response.completed",
            json!({"response": response("completed", usage, json!(null))}),
        ),
    }
    Ok(out)
}

pub(crate) fn gemini(s: &ResponseScript) -> Result<Vec<u8>, RenderError> {
    let calls = whole_calls(Format::GEMINI, s)?;
    let mut out = Vec::new();
    let chunk = |parts: serde_json::Value, finish: Option<&str>, output: u64| {
        let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
        if let Some(f) = finish {
            candidate["finishReason"] = json!(f);
        }
        json!({"candidates": [candidate],
               "usageMetadata": {"promptTokenCount": s.usage.input_tokens,
                                 "candidatesTokenCount": output,
                                 "totalTokenCount": s.usage.input_tokens + output},
               "modelVersion": s.model, "responseId": "scripted"})
    };
    if let Some(r) = &s.reasoning {
        for f in fragments(r, s.fragment_bytes) {
            sse_data(
                &mut out,
                &chunk(json!([{"text": f, "thought": true}]), None, 0),
            );
        }
    }
    if let Some(t) = &s.text {
        for f in fragments(t, s.fragment_bytes) {
            sse_data(&mut out, &chunk(json!([{"text": f}]), None, 0));
        }
    }
    for (i, (c, args)) in calls.iter().enumerate() {
        let mut part = json!({"functionCall": {"name": c.name, "args": args}});
        // Gemini 3 signs the first call of a step; it must be sent back verbatim.
        if i == 0 {
            part["thoughtSignature"] = json!("c2NyaXB0ZWQtc2lnbmF0dXJl");
        }
        sse_data(&mut out, &chunk(json!([part]), None, 0));
    }
    match &s.stop {
        ScriptStop::Truncated => {}
        ScriptStop::Error { kind, message } => sse_data(
            &mut out,
            &json!({"error": {"code": 503, "message": message, "status": kind}}),
        ),
        ScriptStop::MaxTokens => sse_data(
            &mut out,
            &chunk(
                json!([{"text": ""}]),
                Some("MAX_TOKENS"),
                s.usage.output_tokens,
            ),
        ),
        ScriptStop::Natural => sse_data(
            &mut out,
            &chunk(json!([{"text": ""}]), Some("STOP"), s.usage.output_tokens),
        ),
    }
    Ok(out)
}

pub(crate) fn ollama(s: &ResponseScript) -> Result<Vec<u8>, RenderError> {
    let calls = whole_calls(Format::OLLAMA, s)?;
    let mut out = Vec::new();
    let mut line = |v: serde_json::Value| {
        out.extend_from_slice(v.to_string().as_bytes());
        out.push(b'\n');
    };
    let msg = |message: serde_json::Value| json!({"model": s.model, "created_at": "2025-06-01T10:00:00Z", "message": message, "done": false});
    if let Some(r) = &s.reasoning {
        for f in fragments(r, s.fragment_bytes) {
            line(msg(
                json!({"role": "assistant", "content": "", "thinking": f}),
            ));
        }
    }
    if let Some(t) = &s.text {
        for f in fragments(t, s.fragment_bytes) {
            line(msg(json!({"role": "assistant", "content": f})));
        }
    }
    for (i, (c, args)) in calls.iter().enumerate() {
        line(msg(json!({"role": "assistant", "content": "",
            "tool_calls": [{"id": c.id, "function": {"index": i, "name": c.name, "arguments": args}}]})));
    }
    let done = |reason: &str| {
        json!({"model": s.model, "created_at": "2025-06-01T10:00:01Z",
               "message": {"role": "assistant", "content": ""}, "done_reason": reason, "done": true,
               "prompt_eval_count": s.usage.input_tokens, "eval_count": s.usage.output_tokens})
    };
    match &s.stop {
        ScriptStop::Truncated => {}
        ScriptStop::Error { message, .. } => line(json!({"error": message})),
        ScriptStop::MaxTokens => line(done("length")),
        ScriptStop::Natural => line(done("stop")),
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_respect_char_boundaries() {
        let s = "héllo wörld ✓";
        let parts = fragments(s, 2);
        assert_eq!(parts.concat(), s);
        assert!(parts.iter().all(|p| !p.is_empty()));
    }

    #[test]
    fn renders_both_formats() {
        let script = ResponseScript::tool_call("call_1", "calc", r#"{"expression": "2+2"}"#)
            .with_text("Let me compute.")
            .with_usage(10, 5);
        let chat = String::from_utf8(render_stream(Format::OPENAI_CHAT, &script).unwrap()).unwrap();
        assert!(chat.ends_with("data: [DONE]\n\n"));
        assert!(chat.contains("\"finish_reason\":\"tool_calls\""));
        let ant = String::from_utf8(render_stream(Format::ANTHROPIC, &script).unwrap()).unwrap();
        assert!(ant.contains("\"stop_reason\":\"tool_use\""));
        assert!(ant.contains("input_json_delta"));
        let bad = ResponseScript::tool_call("c", "w", "{not json");
        let err = render_stream(Format::GEMINI, &bad).unwrap_err();
        assert_eq!(
            err.to_string(),
            "gemini cannot carry tool call 'w': its arguments are not a JSON object, and gemini sends arguments as whole objects (script invalid arguments with openai_chat, openai_responses or anthropic)"
        );
        assert!(render_stream(Format::OLLAMA, &bad).is_err());
        assert!(render_stream(Format::OPENAI_RESPONSES, &bad).is_ok());
    }

    #[test]
    fn max_tokens_cuts_the_last_call() {
        let script =
            ResponseScript::tool_call("c", "w", r#"{"path": "a.txt", "content": "xxxxxxxx"}"#)
                .with_stop(ScriptStop::MaxTokens);
        let ant = String::from_utf8(render_stream(Format::ANTHROPIC, &script).unwrap()).unwrap();
        assert!(ant.contains("max_tokens"));
        assert!(!ant.contains("content_block_stop\",\"index\":0"));
    }
}

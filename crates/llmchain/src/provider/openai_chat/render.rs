//! OpenAI Chat's response stream from a scripted response (feature `test-util`):
//! the bytes its servers send, for `ScriptedModel`, the demo and local test servers.

use serde_json::json;

use crate::provider::render::{
    RenderError, ResponseScript, ScriptStop, fragments, sent_arguments, sse_data,
};

pub(crate) fn render(s: &ResponseScript) -> Result<Vec<u8>, RenderError> {
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

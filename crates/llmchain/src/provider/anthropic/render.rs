//! Anthropic Messages's response stream from a scripted response (feature `test-util`):
//! the bytes its servers send, for `ScriptedModel`, the demo and local test servers.

use serde_json::json;

use crate::provider::render::{
    RenderError, ResponseScript, ScriptStop, fragments, sent_arguments, sse_event,
};

pub(crate) fn render(s: &ResponseScript) -> Result<Vec<u8>, RenderError> {
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

//! OpenAI Responses's response stream from a scripted response (feature `test-util`):
//! the bytes its servers send, for `ScriptedModel`, the demo and local test servers.

use serde_json::json;

use crate::provider::render::{
    RenderError, ResponseScript, ScriptStop, fragments, sent_arguments, sse_event,
};

pub(crate) fn render(s: &ResponseScript) -> Result<Vec<u8>, RenderError> {
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

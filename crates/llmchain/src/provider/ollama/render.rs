//! Ollama's response stream from a scripted response (feature `test-util`):
//! the bytes its servers send, for `ScriptedModel`, the demo and local test servers.

use serde_json::json;

use crate::provider::Format;
use crate::provider::render::{RenderError, ResponseScript, ScriptStop, fragments, whole_calls};

pub(crate) fn render(s: &ResponseScript) -> Result<Vec<u8>, RenderError> {
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

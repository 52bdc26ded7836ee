//! Gemini's response stream from a scripted response (feature `test-util`):
//! the bytes its servers send, for `ScriptedModel`, the demo and local test servers.

use serde_json::json;

use crate::provider::Format;
use crate::provider::render::{
    RenderError, ResponseScript, ScriptStop, fragments, sse_data, whole_calls,
};

pub(crate) fn render(s: &ResponseScript) -> Result<Vec<u8>, RenderError> {
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

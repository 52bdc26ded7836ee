//! Bedrock Converse's response stream from a scripted response (feature `test-util`):
//! the bytes its servers send, for `ScriptedModel`, the demo and local test servers.

use serde_json::json;

use crate::provider::render::{RenderError, ResponseScript, ScriptStop, fragments, sent_arguments};

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

pub(crate) fn render(s: &ResponseScript) -> Result<Vec<u8>, RenderError> {
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

//! The AI SDK's UI message stream, as chunks: `data: <json>\n\n` server-sent events
//! (`x-vercel-ai-ui-message-stream: v1`), ending with `data: [DONE]\n\n`.
//!
//! Only the chunk types both current majors of the client accept (`ai` 6.x and 7.x,
//! checked against each one's `uiMessageChunkSchema`): 7.x adds `tool-approval-response`,
//! `reset-step`, `custom`, `reasoning-file` and `steering-message`, which 6.x rejects, so
//! none is sent (the client marks an answered approval itself). Names are the schema's
//! camelCase; optional fields are left out rather than `null` (the schema rejects a
//! `null` where it expects a string), while `input` and `output` are always present.

use serde::Serialize;
use serde_json::Value;

/// One chunk of the UI message stream.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(
    tag = "type",
    rename_all = "kebab-case",
    rename_all_fields = "camelCase"
)]
#[non_exhaustive]
pub enum Chunk {
    /// The response starts; `message_id` names the assistant message (the same id as
    /// the last assistant message continues it).
    Start {
        /// The assistant message's id.
        #[serde(skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
    },
    /// A step (one model call and the tools it asked for) starts.
    StartStep,
    /// A step ends.
    FinishStep,
    /// A text part starts.
    TextStart {
        /// The part's id.
        id: String,
    },
    /// Text of an open text part.
    TextDelta {
        /// The part's id.
        id: String,
        /// The text.
        delta: String,
    },
    /// A text part ends.
    TextEnd {
        /// The part's id.
        id: String,
    },
    /// A reasoning part starts.
    ReasoningStart {
        /// The part's id.
        id: String,
    },
    /// Text of an open reasoning part.
    ReasoningDelta {
        /// The part's id.
        id: String,
        /// The text.
        delta: String,
    },
    /// A reasoning part ends.
    ReasoningEnd {
        /// The part's id.
        id: String,
    },
    /// A tool call starts streaming.
    ToolInputStart {
        /// The call's id.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
    },
    /// Argument text of a streaming call, as it arrives.
    ToolInputDelta {
        /// The call's id.
        tool_call_id: String,
        /// The text.
        input_text_delta: String,
    },
    /// A call's arguments are complete.
    ToolInputAvailable {
        /// The call's id.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// The arguments.
        input: Value,
    },
    /// A call's arguments never completed (cut off, not JSON): it does not run.
    ToolInputError {
        /// The call's id.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// What arrived.
        input: Value,
        /// Why.
        error_text: String,
    },
    /// A call waits for a person: answer with this approval id.
    ToolApprovalRequest {
        /// The review's id.
        approval_id: String,
        /// The call's id.
        tool_call_id: String,
    },
    /// A call's result.
    ToolOutputAvailable {
        /// The call's id.
        tool_call_id: String,
        /// The result.
        output: Value,
    },
    /// A call failed (an error result, a refusal, a rejection).
    ToolOutputError {
        /// The call's id.
        tool_call_id: String,
        /// Why.
        error_text: String,
    },
    /// A call was denied: it did not run.
    ToolOutputDenied {
        /// The call's id.
        tool_call_id: String,
    },
    /// The response ended; `finish_reason`: `stop`, `length`, `content-filter`,
    /// `tool-calls`, `error` or `other`.
    Finish {
        /// Why.
        #[serde(skip_serializing_if = "Option::is_none")]
        finish_reason: Option<&'static str>,
    },
    /// The response failed.
    Error {
        /// A message for the person (no secrets: it went through redaction).
        error_text: String,
    },
    /// llmchain's own data (`data-usage`, `data-run`, …).
    #[serde(untagged)]
    Data(DataChunk),
}

/// A `data-NAME` chunk.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DataChunk {
    /// `data-NAME`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The data part's id (a later chunk with the same id replaces it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The data.
    pub data: Value,
}

impl Chunk {
    /// A `data-NAME` chunk.
    pub fn data(name: &str, id: Option<String>, data: Value) -> Chunk {
        Chunk::Data(DataChunk {
            kind: format!("data-{name}"),
            id,
            data,
        })
    }

    /// The chunk as one server-sent event.
    pub fn to_sse(&self) -> bytes::Bytes {
        let mut out = Vec::with_capacity(96);
        out.extend_from_slice(b"data: ");
        // Serialising our own types cannot fail (no maps with non-string keys).
        let _ = serde_json::to_writer(&mut out, self);
        out.extend_from_slice(b"\n\n");
        out.into()
    }
}

/// The event that ends a stream.
pub const DONE: &[u8] = b"data: [DONE]\n\n";

/// The response headers of a UI message stream.
pub const HEADERS: [(&str, &str); 5] = [
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
    ("connection", "keep-alive"),
    ("x-vercel-ai-ui-message-stream", "v1"),
    ("x-accel-buffering", "no"),
];

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn json_of(c: &Chunk) -> Value {
        serde_json::to_value(c).unwrap()
    }

    /// The names the client's schema takes, and optional fields left out, never null.
    #[test]
    fn chunks_are_named_as_the_client_reads_them() {
        assert_eq!(
            json_of(&Chunk::Start { message_id: None }),
            json!({"type": "start"})
        );
        assert_eq!(
            json_of(&Chunk::Start {
                message_id: Some("m1".into())
            }),
            json!({"type": "start", "messageId": "m1"})
        );
        assert_eq!(json_of(&Chunk::StartStep), json!({"type": "start-step"}));
        assert_eq!(
            json_of(&Chunk::ToolInputDelta {
                tool_call_id: "c".into(),
                input_text_delta: "{\"a".into()
            }),
            json!({"type": "tool-input-delta", "toolCallId": "c", "inputTextDelta": "{\"a"})
        );
        assert_eq!(
            json_of(&Chunk::ToolApprovalRequest {
                approval_id: "r".into(),
                tool_call_id: "c".into()
            }),
            json!({"type": "tool-approval-request", "approvalId": "r", "toolCallId": "c"})
        );
        assert_eq!(
            json_of(&Chunk::ToolOutputAvailable {
                tool_call_id: "c".into(),
                output: Value::Null
            }),
            json!({"type": "tool-output-available", "toolCallId": "c", "output": null})
        );
        assert_eq!(
            json_of(&Chunk::Finish {
                finish_reason: Some("tool-calls")
            }),
            json!({"type": "finish", "finishReason": "tool-calls"})
        );
        assert_eq!(
            json_of(&Chunk::data("usage", None, json!({"inputTokens": 3}))),
            json!({"type": "data-usage", "data": {"inputTokens": 3}})
        );
        assert_eq!(
            &Chunk::Error {
                error_text: "boom".into()
            }
            .to_sse()[..],
            b"data: {\"type\":\"error\",\"errorText\":\"boom\"}\n\n"
        );
    }
}

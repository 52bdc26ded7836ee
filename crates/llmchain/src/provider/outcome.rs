//! [`DecodeOutcome`] and the CLI's [`DecodeReport`].

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::event::StopReason;
use crate::message::{ContentType, InvalidToolCall, Message, TokenUsage, parts_to_string};

/// An error the provider reported in the body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderError {
    /// The provider's error type.
    #[serde(rename = "type")]
    pub kind: String,
    /// The provider's message.
    pub message: String,
}

/// What a decoder made of a whole body.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeOutcome {
    /// The assistant message: `Complete`, or `Length`/`Cancelled` with incomplete calls.
    pub message: Message,
    /// Calls of a complete message whose arguments or ids were invalid.
    pub invalid_tool_calls: Vec<InvalidToolCall>,
    /// Normalised stop reason, when the wire gave one.
    pub stop_reason: Option<StopReason>,
    /// The wire's stop reason.
    pub raw_stop_reason: Option<String>,
    /// Token usage.
    pub usage: Option<TokenUsage>,
    /// An error reported in the body.
    pub error: Option<ProviderError>,
    /// The provider's id for this response (`chatcmpl-…`, `msg_…`, `resp_…`, Gemini's
    /// `responseId`), when the wire carries one: `gen_ai.response.id`.
    pub response_id: Option<String>,
    /// The model that answered, as the provider named it (often a dated snapshot of
    /// the requested one): `gen_ai.response.model`.
    pub response_model: Option<String>,
}

/// A completed call in a [`DecodeReport`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportToolCall {
    /// Position among the completed calls.
    pub index: usize,
    /// The wire id, or null.
    pub call_id: Option<String>,
    /// The tool name.
    pub name: String,
    /// The parsed arguments.
    pub arguments: Map<String, Value>,
}

/// An unfinished call in a [`DecodeReport`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportIncompleteCall {
    /// Position in the message's calls.
    pub index: usize,
    /// The wire id, or null.
    pub call_id: Option<String>,
    /// The tool name, or null.
    pub name: Option<String>,
    /// The raw argument text received.
    pub raw_arguments: String,
}

/// The JSON report `llmchain decode` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecodeReport {
    /// Visible text.
    pub text: String,
    /// Completed calls.
    pub tool_calls: Vec<ReportToolCall>,
    /// Calls that never completed (never executable).
    pub incomplete_tool_calls: Vec<ReportIncompleteCall>,
    /// Normalised stop reason.
    pub stop_reason: Option<StopReason>,
    /// Wire stop reason.
    pub raw_stop_reason: Option<String>,
    /// Usage.
    pub usage: Option<TokenUsage>,
    /// Reasoning text.
    pub reasoning: Option<String>,
    /// An error reported in the body.
    pub error: Option<ProviderError>,
}

impl DecodeOutcome {
    /// The report of this outcome.
    pub fn report(&self) -> DecodeReport {
        let m = &self.message;
        let mut tool_calls = Vec::new();
        let mut incomplete_tool_calls = Vec::new();
        for (pos, c) in m.tool_calls.iter().enumerate() {
            if c.is_complete() && m.status == crate::message::MessageStatus::Complete {
                let synthetic =
                    c.metadata.get(super::assembly::SYNTHETIC_CALL_ID) == Some(&Value::Bool(true));
                tool_calls.push(ReportToolCall {
                    index: tool_calls.len(),
                    // A made-up id is not the wire's: the report shows null.
                    call_id: c.call_id.clone().filter(|_| !synthetic),
                    name: c.name.clone().unwrap_or_default(),
                    arguments: c.arguments_as_map(),
                });
            } else {
                incomplete_tool_calls.push(ReportIncompleteCall {
                    index: pos,
                    call_id: c.call_id.clone(),
                    name: c.name.clone(),
                    raw_arguments: match &c.arguments {
                        None => String::new(),
                        Some(crate::message::Arguments::Raw(s)) => s.clone(),
                        Some(crate::message::Arguments::Object(o)) => {
                            Value::Object(o.clone()).to_string()
                        }
                    },
                });
            }
        }
        DecodeReport {
            text: m
                .content
                .iter()
                .filter(|p| p.r#type == ContentType::Text)
                .map(|p| p.content.as_str())
                .collect(),
            tool_calls,
            incomplete_tool_calls,
            stop_reason: self.stop_reason,
            raw_stop_reason: self.raw_stop_reason.clone(),
            usage: self.usage,
            reasoning: parts_to_string(&m.content, ContentType::Thinking),
            error: self.error.clone(),
        }
    }
}

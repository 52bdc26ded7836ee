//! [`Conversation`]: what a request is made of — system prompt, tool definitions,
//! tool choice and messages. Its serde form is the conversation file of the storage
//! format (`{"version":1,"system":…,"tools":[…],"messages":[…]}`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::message::Message;

mod call_ids;
mod consistency;
mod response_format;
mod unanswered;

pub use call_ids::unique_call_id;
pub use consistency::{Inconsistency, Severity};
pub(crate) use consistency::{answered_ids, replayable, sendable};
pub use response_format::ResponseFormat;
pub use unanswered::unanswered_calls;
#[cfg(feature = "runtime")]
pub(crate) use unanswered::unanswered_in;

/// The storage format version this crate writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// A tool as declared to a model.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// `[a-zA-Z0-9_-]{1,64}`.
    pub name: String,
    /// What the tool does, for the model.
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the arguments object.
    #[serde(default = "empty_object_schema")]
    pub parameters_schema: Value,
    /// Ask the provider for strict schema adherence (OpenAI `strict`, Anthropic `strict`).
    #[serde(default)]
    pub strict: bool,
    /// Provider options, e.g. `{"cache_control": {"type": "ephemeral"}}`.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub options: Map<String, Value>,
}

/// `{"type": "object", "properties": {}}`.
pub fn empty_object_schema() -> Value {
    serde_json::json!({"type": "object", "properties": {}})
}

/// How the model may choose tools.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum ToolChoice {
    /// `"auto"`, `"none"` or `"required"`.
    Mode(ToolChoiceMode),
    /// `{"name": "..."}`: this tool must be called.
    Tool {
        /// The tool's name.
        name: String,
    },
    /// Not set: the provider's default.
    #[default]
    #[serde(skip)]
    Unset,
}

/// The three tool-choice modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolChoiceMode {
    /// The model decides.
    Auto,
    /// No tools.
    None,
    /// At least one tool call.
    Required,
}

impl ToolChoice {
    /// True when not set.
    pub fn is_unset(&self) -> bool {
        matches!(self, ToolChoice::Unset)
    }
}

/// A conversation: the input of every request encoder and the CLI's conversation file.
///
/// ```
/// use llmchain::conversation::Conversation;
/// let conv: Conversation = serde_json::from_str(r#"{"version":1,"system":"Be brief.","messages":[{"role":"user","content":"hi"}]}"#).unwrap();
/// assert_eq!(conv.messages.len(), 1);
/// ```
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Conversation {
    /// The storage format version (1).
    #[serde(default = "current_version", deserialize_with = "check_version")]
    pub version: u32,
    /// The system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// Tools the model may call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolDefinition>,
    /// Tool choice.
    #[serde(default, skip_serializing_if = "ToolChoice::is_unset")]
    pub tool_choice: ToolChoice,
    /// Whether the model may call several tools at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// A typed answer asked for: the JSON Schema the model's answer must match (set by
    /// the chain's [`Extract`](crate::chain::Extract) mode for its run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormat>,
    /// The messages, oldest first.
    #[serde(default)]
    pub messages: Vec<Message>,
}

fn current_version() -> u32 {
    FORMAT_VERSION
}

fn check_version<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let v = u32::deserialize(d)?;
    if v == 0 || v > FORMAT_VERSION {
        return Err(serde::de::Error::custom(format!(
            "unsupported storage format version {v}: this llmchain reads version {FORMAT_VERSION}"
        )));
    }
    Ok(v)
}

impl Conversation {
    /// An empty conversation of the current version.
    pub fn new() -> Self {
        Conversation {
            version: FORMAT_VERSION,
            ..Default::default()
        }
    }

    /// Parses a conversation file; errors name the JSON path of the problem.
    pub fn from_json(
        text: &str,
    ) -> Result<Conversation, crate::storage_format::StorageFormatError> {
        crate::storage_format::from_str(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_choice_forms() {
        for (v, tc) in [
            (json!("auto"), ToolChoice::Mode(ToolChoiceMode::Auto)),
            (json!("none"), ToolChoice::Mode(ToolChoiceMode::None)),
            (
                json!("required"),
                ToolChoice::Mode(ToolChoiceMode::Required),
            ),
            (json!({"name": "x"}), ToolChoice::Tool { name: "x".into() }),
        ] {
            assert_eq!(serde_json::from_value::<ToolChoice>(v.clone()).unwrap(), tc);
            assert_eq!(serde_json::to_value(&tc).unwrap(), v);
        }
    }

    #[test]
    fn version_gate_and_paths() {
        let err = Conversation::from_json(r#"{"version": 2, "messages": []}"#).unwrap_err();
        assert!(
            err.to_string()
                .contains("unsupported storage format version 2"),
            "{err}"
        );
        let err = Conversation::from_json(
            r#"{"version":1,"messages":[{"role":"user","content":"x"},{"role":"robot"}]}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("messages[1].role"), "{err}");
        let c = Conversation::from_json(r#"{"messages":[], "future_field": 1}"#).unwrap();
        assert_eq!(c.version, 1);
    }
}

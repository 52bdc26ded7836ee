//! [`Message`]: one turn of a conversation, with its roles, statuses and validations.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::content_part::{Content, ContentPart, ContentType, parts_to_string};
use super::error::{BLANK, ValidationErrors};
use super::tool_call::ToolCall;
use super::tool_result::ToolResult;
use super::usage::TokenUsage;

/// Who speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Role {
    /// Instructions.
    System,
    /// The user.
    #[default]
    User,
    /// The model.
    Assistant,
    /// Tool results.
    Tool,
}

impl Role {
    /// The role's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// How a message ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum MessageStatus {
    /// Finished normally.
    #[default]
    Complete,
    /// Cut off by a length limit; its calls never run.
    Length,
    /// Stopped by cancellation or a stream error; its calls never run. A status this
    /// version does not know (written by a newer one) reads as this: its calls never run.
    #[serde(other)]
    Cancelled,
}

/// A tool call that failed to complete, reported by its position in `tool_calls`.
#[derive(Debug, Clone, PartialEq)]
pub struct InvalidToolCall {
    /// Position in the message's `tool_calls`.
    pub position: usize,
    /// Why it is invalid (e.g. `arguments: invalid json`).
    pub errors: ValidationErrors,
}

/// The metadata key of the usage record.
pub const USAGE_KEY: &str = "usage";

/// One turn of a conversation.
///
/// ```
/// use llmchain::message::{Message, Role, ToolCall, ToolResult};
/// let ask = Message::user("What's the weather in Paris?");
/// let call = ToolCall::function("call_1", "get_weather", serde_json::json!({"city": "Paris"})).unwrap();
/// let answer = Message::assistant_with_calls("Checking.", vec![call]).validate().unwrap();
/// assert!(answer.is_tool_call());
/// let results = Message::tool(vec![ToolResult::text("call_1", "18C")]);
/// assert_eq!(results.role, Role::Tool);
/// ```
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Message {
    /// Who speaks.
    pub role: Role,
    /// How it ended.
    #[serde(default)]
    pub status: MessageStatus,
    /// Text and other parts.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "super::content_part::parts_or_text::deserialize"
    )]
    pub content: Vec<ContentPart>,
    /// The model's tool calls (assistant only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// Tool results (tool only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_results: Vec<ToolResult>,
    /// An optional participant name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `usage`, provider data, `streaming_error`, ...
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
}

/// The `metadata` key that marks a message the run wrote ([`Message::mark_from_run`]).
const FROM_RUN_KEY: &str = "llmchain.from_run";

impl Message {
    fn with_role(role: Role, content: Content) -> Self {
        Message {
            role,
            content: content.into_parts(),
            ..Default::default()
        }
    }

    /// A system message.
    pub fn system(content: impl Into<Content>) -> Self {
        Self::with_role(Role::System, content.into())
    }

    /// A user message.
    pub fn user(content: impl Into<Content>) -> Self {
        Self::with_role(Role::User, content.into())
    }

    /// A user-role message the run writes itself: a check's feedback to the model (an
    /// answer that did not match its schema, a hook's retry). It is marked as the run's
    /// own ([`Message::is_from_run`]).
    pub fn feedback(content: impl Into<Content>) -> Self {
        let mut m = Self::with_role(Role::User, content.into());
        m.mark_from_run();
        m
    }

    /// Marks a message as written by the run, not by a person (a check's feedback, the
    /// messages a tool's result inserts), in `metadata` (`llmchain.from_run`): a run
    /// resumed after such a message goes on with its counters and budget instead of
    /// starting afresh, as it does at a person's new message.
    pub fn mark_from_run(&mut self) {
        self.metadata.insert(FROM_RUN_KEY.into(), Value::Bool(true));
    }

    /// True for a message the run wrote itself ([`Message::mark_from_run`]).
    pub fn is_from_run(&self) -> bool {
        self.metadata.get(FROM_RUN_KEY) == Some(&Value::Bool(true))
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<Content>) -> Self {
        Self::with_role(Role::Assistant, content.into())
    }

    /// An assistant message with tool calls. They are completed by
    /// [`validate`](Self::validate), or when the message is added to a chain
    /// (`LLMChain::add_message`); until then they are incomplete, as a delta's are.
    pub fn assistant_with_calls(content: impl Into<Content>, tool_calls: Vec<ToolCall>) -> Self {
        Message {
            tool_calls,
            ..Self::assistant(content)
        }
    }

    /// A tool message holding results.
    pub fn tool(tool_results: Vec<ToolResult>) -> Self {
        Message {
            role: Role::Tool,
            tool_results,
            ..Default::default()
        }
    }

    /// Validates the message (reference §5.1) and, when its status is `Complete`,
    /// completes every tool call.
    ///
    /// - `system` and `user` need content and cannot carry tool calls or results;
    /// - `tool` needs tool results and cannot carry content parts or calls;
    /// - only `assistant` carries tool calls; each invalid one is reported by position as
    ///   `tool_calls: arguments: invalid json` and so on.
    ///
    /// A `length` or `cancelled` message never completes its calls, so they never run.
    ///
    /// ```
    /// use llmchain::message::{Message, ToolCall};
    /// let bad = ToolCall { call_id: Some("c".into()), name: Some("n".into()),
    ///     arguments: Some("{oops".into()), ..Default::default() };
    /// let err = Message::assistant_with_calls("", vec![bad]).validate().unwrap_err();
    /// assert_eq!(err.to_string(), "tool_calls: arguments: invalid json");
    /// assert_eq!(err.errors()[0].position, Some(0));
    /// ```
    pub fn validate(mut self) -> Result<Message, ValidationErrors> {
        let mut errors = ValidationErrors::new();
        let has_content = self.content.iter().any(|p| !p.content.is_empty());
        match self.role {
            Role::System | Role::User => {
                if !has_content {
                    errors.add("content", BLANK);
                }
                if !self.tool_results.is_empty() {
                    errors.add(
                        "tool_results",
                        format!("can't be set with role {}", self.role.as_str()),
                    );
                }
            }
            Role::Tool => {
                if self.tool_results.is_empty() {
                    errors.add("tool_results", BLANK);
                }
                if !self.content.is_empty() {
                    errors.add("content", "is invalid for role tool");
                }
            }
            Role::Assistant => {
                if !self.tool_results.is_empty() {
                    errors.add("tool_results", "can't be set with role assistant");
                }
            }
        }
        if self.role != Role::Assistant && !self.tool_calls.is_empty() {
            errors.add(
                "tool_calls",
                format!("can't be set with role {}", self.role.as_str()),
            );
        }
        for (i, r) in self.tool_results.iter().enumerate() {
            if r.tool_call_id.trim().is_empty() {
                errors.add_at("tool_results", i, "tool_call_id: can't be blank");
            }
        }
        if errors.is_empty() {
            for invalid in self.complete_tool_calls() {
                errors.add_at("tool_calls", invalid.position, invalid.errors.to_string());
            }
        }
        errors.into_result(self)
    }

    /// Completes every tool call when the status is `Complete`, leaving invalid ones
    /// incomplete (so they never run) and reporting them by position.
    pub fn complete_tool_calls(&mut self) -> Vec<InvalidToolCall> {
        let mut invalid = Vec::new();
        if self.status != MessageStatus::Complete {
            return invalid;
        }
        for (position, call) in self.tool_calls.iter_mut().enumerate() {
            if let Err(errors) = call.complete_in_place() {
                invalid.push(InvalidToolCall { position, errors });
            }
        }
        invalid
    }

    /// The calls that may run: complete calls of a complete assistant message.
    pub fn executable_tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        let ok = self.role == Role::Assistant && self.status == MessageStatus::Complete;
        self.tool_calls
            .iter()
            .filter(move |c| ok && c.is_complete())
    }

    /// An assistant message that asks for at least one tool to run.
    pub fn is_tool_call(&self) -> bool {
        self.executable_tool_calls().next().is_some()
    }

    /// A message with tool calls or results.
    pub fn is_tool_related(&self) -> bool {
        !self.tool_calls.is_empty() || !self.tool_results.is_empty()
    }

    /// A tool message with at least one failed result.
    pub fn tool_had_errors(&self) -> bool {
        self.role == Role::Tool && self.tool_results.iter().any(ToolResult::is_error)
    }

    /// An assistant message with no content and no tool calls.
    pub fn is_empty(&self) -> bool {
        self.role == Role::Assistant
            && self.tool_calls.is_empty()
            && self.content.iter().all(|p| p.content.is_empty())
    }

    /// The text parts joined with blank lines.
    pub fn text(&self) -> Option<String> {
        parts_to_string(&self.content, ContentType::Text)
    }

    /// Appends a result to a tool message.
    pub fn append_tool_result(&mut self, result: ToolResult) -> Result<(), ValidationErrors> {
        if self.role != Role::Tool {
            let mut e = ValidationErrors::new();
            e.add(
                "tool_results",
                format!("can't be set with role {}", self.role.as_str()),
            );
            return Err(e);
        }
        self.tool_results.push(result);
        Ok(())
    }

    /// Replaces the result for `tool_call_id` in the newest tool message holding it.
    /// Returns false when no such result exists.
    pub fn replace_tool_result(
        messages: &mut [Message],
        tool_call_id: &str,
        result: ToolResult,
    ) -> bool {
        for m in messages.iter_mut().rev().filter(|m| m.role == Role::Tool) {
            if let Some(slot) = m
                .tool_results
                .iter_mut()
                .find(|r| r.tool_call_id == tool_call_id)
            {
                *slot = result;
                return true;
            }
        }
        false
    }

    /// The usage record in `metadata.usage`.
    pub fn usage(&self) -> Option<TokenUsage> {
        self.metadata
            .get(USAGE_KEY)
            .and_then(|v| serde_json::from_value(v.clone()).ok())
    }

    /// Sets `metadata.usage`.
    pub fn set_usage(&mut self, usage: TokenUsage) {
        self.metadata.insert(
            USAGE_KEY.to_owned(),
            // Serialising a struct of integers cannot fail.
            serde_json::to_value(usage).unwrap_or_default(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCallStatus;
    use serde_json::json;

    fn raw_call(id: &str, args: &str) -> ToolCall {
        ToolCall {
            call_id: Some(id.into()),
            name: Some("calc".into()),
            arguments: Some(args.into()),
            ..Default::default()
        }
    }

    #[test]
    fn role_validations() {
        assert_eq!(
            Message::user("").validate().unwrap_err().to_string(),
            "content: can't be blank"
        );
        assert_eq!(
            Message::system(vec![]).validate().unwrap_err().to_string(),
            "content: can't be blank"
        );
        assert_eq!(
            Message::tool(vec![]).validate().unwrap_err().to_string(),
            "tool_results: can't be blank"
        );
        let mut u = Message::user("hi");
        u.tool_results.push(ToolResult::text("c", "x"));
        assert_eq!(
            u.validate().unwrap_err().to_string(),
            "tool_results: can't be set with role user"
        );
        let mut t = Message::tool(vec![ToolResult::text("c", "x")]);
        t.content.push(ContentPart::text("x"));
        assert_eq!(
            t.validate().unwrap_err().to_string(),
            "content: is invalid for role tool"
        );
        let mut u = Message::user("hi");
        u.tool_calls.push(raw_call("c", "{}"));
        assert_eq!(
            u.validate().unwrap_err().to_string(),
            "tool_calls: can't be set with role user"
        );
        assert!(Message::assistant("").validate().is_ok());
    }

    #[test]
    fn complete_message_completes_calls_and_reports_by_position() {
        let m = Message::assistant_with_calls(
            "",
            vec![
                raw_call("a", "{}"),
                raw_call("b", "[true,1,2,3]"),
                raw_call("c", "nope"),
            ],
        );
        let err = m.clone().validate().unwrap_err();
        assert_eq!(
            err.to_string(),
            "tool_calls: arguments: a json object is expected for tool arguments, arguments: invalid json"
        );
        let positions: Vec<_> = err.errors().iter().map(|e| e.position).collect();
        assert_eq!(positions, vec![Some(1), Some(2)]);

        let mut m2 = m;
        let invalid = m2.complete_tool_calls();
        assert_eq!(invalid.len(), 2);
        assert!(m2.tool_calls[0].is_complete());
        assert!(!m2.tool_calls[1].is_complete());
        assert_eq!(m2.executable_tool_calls().count(), 1);
    }

    #[test]
    fn cut_off_messages_never_complete_calls() {
        for status in [MessageStatus::Length, MessageStatus::Cancelled] {
            let mut m = Message::assistant_with_calls("", vec![raw_call("a", "{\"x\": 1")]);
            m.status = status;
            let m = m.validate().unwrap();
            assert_eq!(m.tool_calls[0].status, ToolCallStatus::Incomplete);
            assert_eq!(m.tool_calls[0].raw_arguments(), Some("{\"x\": 1"));
            assert!(!m.is_tool_call());
            assert_eq!(m.executable_tool_calls().count(), 0);
        }
    }

    #[test]
    fn helpers() {
        let mut msgs = vec![
            Message::user("q"),
            Message::tool(vec![
                ToolResult::text("a", "1"),
                ToolResult::error("b", "bad"),
            ]),
        ];
        assert!(msgs[1].tool_had_errors());
        assert!(msgs[1].is_tool_related());
        assert!(Message::replace_tool_result(
            &mut msgs,
            "b",
            ToolResult::text("b", "fixed")
        ));
        assert!(!msgs[1].tool_had_errors());
        assert!(!Message::replace_tool_result(
            &mut msgs,
            "zz",
            ToolResult::text("zz", "")
        ));
        assert!(
            msgs[0]
                .append_tool_result(ToolResult::text("a", "1"))
                .is_err()
        );
        assert!(
            msgs[1]
                .append_tool_result(ToolResult::text("c", "1"))
                .is_ok()
        );
        assert!(Message::assistant("").is_empty());
        assert!(!Message::assistant("x").is_empty());
        let mut m = Message::assistant("x");
        m.set_usage(TokenUsage::new(3, 4));
        assert_eq!(m.usage(), Some(TokenUsage::new(3, 4)));
        assert_eq!(m.text().as_deref(), Some("x"));
    }

    #[test]
    fn storage_example_parses() {
        let line = json!({"role":"assistant","status":"complete","content":[{"type":"text","content":"Checking."}],
         "tool_calls":[{"type":"function","status":"complete","call_id":"call_1","name":"get_weather",
           "arguments":{"city":"Paris"},"index":0,"display_text":"Get weather",
           "metadata":{"execution_status":"completed"}}]});
        let m: Message = serde_json::from_value(line.clone()).unwrap();
        assert_eq!(m.tool_calls[0].execution_status(), "completed");
        assert_eq!(serde_json::to_value(&m).unwrap(), line);
    }
}

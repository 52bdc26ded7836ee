//! [`ToolResult`]: the application's answer to a [`ToolCall`](super::ToolCall).

use std::fmt;

use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

use super::content_part::{Content, ContentPart, ContentType, parts_to_string};
use super::error::{BLANK, ValidationErrors};
use super::expansion::MessageExpansion;
use super::tool_call::ToolType;

/// How a tool call ended. The four flags of the seed are derived from it, so the
/// subset rules hold by construction: a refusal and an exception are always errors,
/// an exception is never a refusal, an interrupt is never an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ResultKind {
    /// The tool answered. Also a call *denied* by a review handler: a decision about
    /// the call, not a fault in it, so it is not an error.
    #[default]
    Success,
    /// Any failure that is not one of the narrower kinds: the tool returned an error,
    /// timed out, or the outcome is unknown after a crash.
    Error,
    /// Turned down before anything changed: resending a corrected call is safe.
    Refusal,
    /// The runtime caught a panic; the tool may have done part of its work.
    Exception,
    /// The tool paused for a human (HITL).
    Interrupt,
}

/// A panic caught while running a tool. Virtual: never sent to a model, never persisted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolException {
    /// The panic payload as text.
    pub message: String,
    /// `file:line:column` of the panic, when known.
    pub location: Option<String>,
    /// A captured backtrace, when enabled (`RUST_BACKTRACE`).
    pub backtrace: Option<String>,
}

impl fmt::Display for ToolException {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(loc) = &self.location {
            write!(f, " (at {loc})")?;
        }
        Ok(())
    }
}

/// The result of running a requested tool, returned to the model.
///
/// Content is text or a list of [`ContentPart`]s (multi-modal results); text is stored
/// as one text part. `processed_content` keeps the tool's native data (as JSON) for the
/// application and is never sent to a model. `options` carries provider features such
/// as `cache_control`.
///
/// The error flags come from constructors, not bare booleans:
///
/// ```
/// use llmchain::message::ToolResult;
///
/// let ok = ToolResult::text("call_1", "18C").with_processed_content(serde_json::json!({"temp_c": 18}));
/// assert!(!ok.is_error());
///
/// let refused = ToolResult::refusal("call_2", "city: can't be blank");
/// assert!(refused.is_error() && refused.is_refusal() && !refused.is_exception());
/// ```
///
/// `exception`, `interrupt_data` and `message_expansion` are virtual: serde skips them,
/// so a restored result has `is_exception() == true` and `exception() == None`, and an
/// expansion can never be applied twice.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolResult {
    /// Always `function`.
    pub r#type: ToolType,
    /// The id of the call this answers. Required.
    pub tool_call_id: String,
    /// The tool name (Gemini needs it).
    pub name: Option<String>,
    /// What the model sees. Required (non-empty).
    pub content: Vec<ContentPart>,
    /// The tool's native data; never sent to a model.
    pub processed_content: Option<Value>,
    /// Text for a UI.
    pub display_text: Option<String>,
    /// Provider-specific options, e.g. `{"cache_control": {"type": "ephemeral"}}`.
    pub options: Map<String, Value>,
    /// Virtual: messages to insert before the next model call, and how to trim this
    /// result's content once they are in.
    pub message_expansion: Option<MessageExpansion>,
    kind: ResultKind,
    exception: Option<ToolException>,
    interrupt_data: Option<Value>,
}

impl ToolResult {
    fn with_kind(tool_call_id: impl Into<String>, content: Content, kind: ResultKind) -> Self {
        ToolResult {
            tool_call_id: tool_call_id.into(),
            content: content.into_parts(),
            kind,
            ..Default::default()
        }
    }

    /// A successful result with text or parts.
    pub fn success(tool_call_id: impl Into<String>, content: impl Into<Content>) -> Self {
        Self::with_kind(tool_call_id, content.into(), ResultKind::Success)
    }

    /// A successful text result.
    pub fn text(tool_call_id: impl Into<String>, text: impl Into<String>) -> Self {
        Self::success(tool_call_id, Content::Text(text.into()))
    }

    /// A failed result (`is_error`).
    pub fn error(tool_call_id: impl Into<String>, content: impl Into<Content>) -> Self {
        Self::with_kind(tool_call_id, content.into(), ResultKind::Error)
    }

    /// The answer to a call that may have run (an earlier process stored it running,
    /// or finished, without its result) of a tool that is not idempotent: a failed
    /// result saying its outcome is unknown. The call is never run again
    /// ([`ToolCall::may_have_run`](crate::message::ToolCall::may_have_run)).
    pub fn outcome_unknown(tool_call_id: impl Into<String>, name: &str) -> Self {
        Self::error(
            tool_call_id,
            format!(
                "The outcome of this call to {name} is unknown: it was already running when \
                 the previous run stopped, and it was not run again because the tool is not \
                 idempotent. Check its effects before calling it again."
            ),
        )
        .with_name(name)
    }

    /// A refusal: an error that changed nothing, so a corrected call is safe to resend.
    /// A tool may return one only when it has written nothing.
    pub fn refusal(tool_call_id: impl Into<String>, content: impl Into<Content>) -> Self {
        Self::with_kind(tool_call_id, content.into(), ResultKind::Refusal)
    }

    /// A caught panic. `content` is what the model sees (a formatted message with the
    /// source location); the exception itself stays local.
    pub fn exception(
        tool_call_id: impl Into<String>,
        content: impl Into<Content>,
        exception: ToolException,
    ) -> Self {
        let mut r = Self::with_kind(tool_call_id, content.into(), ResultKind::Exception);
        r.exception = Some(exception);
        r
    }

    /// This result as a tool body may make it: a tool that builds an
    /// [`exception`](Self::exception) result claims a panic the runtime never rescued,
    /// so it is kept as a plain error (same content, no exception). Only the runtime
    /// marks a result `is_exception`.
    #[cfg(feature = "runtime")]
    pub(crate) fn into_tool_made(mut self) -> Self {
        if self.kind == ResultKind::Exception {
            self.kind = ResultKind::Error;
            self.exception = None;
        }
        self
    }

    /// An interrupt: the tool paused for a human; `data` is for the application only.
    pub fn interrupt(
        tool_call_id: impl Into<String>,
        content: impl Into<Content>,
        data: Value,
    ) -> Self {
        let mut r = Self::with_kind(tool_call_id, content.into(), ResultKind::Interrupt);
        r.interrupt_data = Some(data);
        r
    }

    /// Validates a result: `tool_call_id` and non-empty `content` are required.
    ///
    /// ```
    /// use llmchain::message::ToolResult;
    /// let err = ToolResult::text("", "").validate().unwrap_err();
    /// assert_eq!(err.to_string(), "tool_call_id: can't be blank; content: can't be blank");
    /// ```
    pub fn validate(self) -> Result<Self, ValidationErrors> {
        let mut errors = ValidationErrors::new();
        if self.tool_call_id.trim().is_empty() {
            errors.add("tool_call_id", BLANK);
        }
        if self.content.iter().all(|p| p.content.trim().is_empty()) {
            errors.add("content", BLANK);
        }
        errors.into_result(self)
    }

    /// How the call ended.
    pub fn kind(&self) -> ResultKind {
        self.kind
    }

    /// Any failed result: an error, a refusal or a caught panic.
    pub fn is_error(&self) -> bool {
        matches!(
            self.kind,
            ResultKind::Error | ResultKind::Refusal | ResultKind::Exception
        )
    }

    /// A caught panic (subset of [`is_error`](Self::is_error)).
    pub fn is_exception(&self) -> bool {
        self.kind == ResultKind::Exception
    }

    /// Turned down before it changed anything (subset of [`is_error`](Self::is_error)).
    pub fn is_refusal(&self) -> bool {
        self.kind == ResultKind::Refusal
    }

    /// The tool paused for a human.
    pub fn is_interrupt(&self) -> bool {
        self.kind == ResultKind::Interrupt
    }

    /// The caught panic, during the run only (virtual).
    pub fn exception_info(&self) -> Option<&ToolException> {
        self.exception.as_ref()
    }

    /// The interrupt's data, during the run only (virtual).
    pub fn interrupt_data(&self) -> Option<&Value> {
        self.interrupt_data.as_ref()
    }

    /// Takes the interrupt's data out.
    pub fn take_interrupt_data(&mut self) -> Option<Value> {
        self.interrupt_data.take()
    }

    /// Sets the tool name.
    #[must_use]
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets the native data kept for the application.
    #[must_use]
    pub fn with_processed_content(mut self, data: Value) -> Self {
        self.processed_content = Some(data);
        self
    }

    /// Sets the UI text.
    #[must_use]
    pub fn with_display_text(mut self, text: impl Into<String>) -> Self {
        self.display_text = Some(text.into());
        self
    }

    /// Adds a provider option.
    #[must_use]
    pub fn with_option(mut self, key: impl Into<String>, value: Value) -> Self {
        self.options.insert(key.into(), value);
        self
    }

    /// Attaches a message expansion.
    #[must_use]
    pub fn with_expansion(mut self, expansion: MessageExpansion) -> Self {
        self.message_expansion = Some(expansion);
        self
    }

    /// The text parts joined with blank lines (empty when there are none).
    pub fn content_text(&self) -> String {
        parts_to_string(&self.content, ContentType::Text).unwrap_or_default()
    }
}

/// The stored shape: the four flags instead of the private kind.
#[derive(Serialize)]
struct ResultOut<'a> {
    #[serde(rename = "type")]
    r#type: ToolType,
    tool_call_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    content: &'a [ContentPart],
    #[serde(skip_serializing_if = "Option::is_none")]
    processed_content: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    display_text: Option<&'a str>,
    is_error: bool,
    is_exception: bool,
    is_refusal: bool,
    is_interrupt: bool,
    options: &'a Map<String, Value>,
}

impl Serialize for ToolResult {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ResultOut {
            r#type: self.r#type,
            tool_call_id: &self.tool_call_id,
            name: self.name.as_deref(),
            content: &self.content,
            processed_content: self.processed_content.as_ref(),
            display_text: self.display_text.as_deref(),
            is_error: self.is_error(),
            is_exception: self.is_exception(),
            is_refusal: self.is_refusal(),
            is_interrupt: self.is_interrupt(),
            options: &self.options,
        }
        .serialize(s)
    }
}

#[derive(Deserialize)]
struct ResultIn {
    #[serde(rename = "type", default)]
    r#type: ToolType,
    tool_call_id: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(
        default,
        deserialize_with = "super::content_part::parts_or_text::deserialize"
    )]
    content: Vec<ContentPart>,
    /// Present means `Some`, even `null`: a tool's native data may be `null`.
    #[serde(default, deserialize_with = "present_value")]
    processed_content: Option<Value>,
    #[serde(default)]
    display_text: Option<String>,
    #[serde(default)]
    is_error: bool,
    #[serde(default)]
    is_exception: bool,
    #[serde(default)]
    is_refusal: bool,
    #[serde(default)]
    is_interrupt: bool,
    #[serde(default)]
    options: Map<String, Value>,
}

fn present_value<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl<'de> Deserialize<'de> for ToolResult {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let r = ResultIn::deserialize(d)?;
        let kind = match (r.is_error, r.is_exception, r.is_refusal, r.is_interrupt) {
            (false, false, false, false) => ResultKind::Success,
            (true, false, false, false) => ResultKind::Error,
            (true, false, true, false) => ResultKind::Refusal,
            (true, true, false, false) => ResultKind::Exception,
            (false, false, false, true) => ResultKind::Interrupt,
            (e, x, f, i) => {
                return Err(D::Error::custom(format!(
                    "inconsistent result flags (is_error {e}, is_exception {x}, is_refusal {f}, \
                     is_interrupt {i}): a refusal or exception is always an error, an exception \
                     is never a refusal, an interrupt is never an error"
                )));
            }
        };
        Ok(ToolResult {
            r#type: r.r#type,
            tool_call_id: r.tool_call_id,
            name: r.name,
            content: r.content,
            processed_content: r.processed_content,
            display_text: r.display_text,
            options: r.options,
            message_expansion: None,
            kind,
            exception: None,
            interrupt_data: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;
    use serde_json::json;

    #[test]
    fn subset_rules_by_construction() {
        let cases = [
            (ToolResult::text("c", "ok"), false, false, false, false),
            (ToolResult::error("c", "bad"), true, false, false, false),
            (ToolResult::refusal("c", "no"), true, false, true, false),
            (
                ToolResult::exception(
                    "c",
                    "boom",
                    ToolException {
                        message: "boom".into(),
                        location: Some("src/x.rs:1:2".into()),
                        backtrace: None,
                    },
                ),
                true,
                true,
                false,
                false,
            ),
            (
                ToolResult::interrupt("c", "wait", json!({"ask": "human"})),
                false,
                false,
                false,
                true,
            ),
        ];
        for (r, e, x, f, i) in cases {
            assert_eq!(
                (
                    r.is_error(),
                    r.is_exception(),
                    r.is_refusal(),
                    r.is_interrupt()
                ),
                (e, x, f, i),
                "{r:?}"
            );
        }
    }

    #[test]
    fn virtual_fields_never_persist() {
        let r = ToolResult::exception(
            "c",
            "panicked at src/t.rs:3:5: boom",
            ToolException {
                message: "boom".into(),
                location: Some("src/t.rs:3:5".into()),
                backtrace: Some("bt".into()),
            },
        )
        .with_expansion(MessageExpansion::insert(vec![Message::user("x")]));
        let text = serde_json::to_string(&r).unwrap();
        assert!(
            !text.contains("bt") && !text.contains("expansion"),
            "{text}"
        );
        let back: ToolResult = serde_json::from_str(&text).unwrap();
        assert!(back.is_exception());
        assert_eq!(back.exception_info(), None);
        assert_eq!(back.message_expansion, None);

        let i = ToolResult::interrupt("c", "wait", json!({"secret": 1}));
        let text = serde_json::to_string(&i).unwrap();
        assert!(!text.contains("secret"));
        let back: ToolResult = serde_json::from_str(&text).unwrap();
        assert!(back.is_interrupt());
        assert_eq!(back.interrupt_data(), None);
    }

    #[test]
    fn stored_shape() {
        let r = ToolResult::text("call_1", "18C")
            .with_name("get_weather")
            .with_processed_content(json!({"temp_c": 18}));
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"type":"function","tool_call_id":"call_1","name":"get_weather",
                   "content":[{"type":"text","content":"18C"}],"processed_content":{"temp_c":18},
                   "is_error":false,"is_exception":false,"is_refusal":false,"is_interrupt":false,"options":{}})
        );
    }

    #[test]
    fn inconsistent_flags_are_rejected() {
        for bad in [
            json!({"tool_call_id":"c","content":"x","is_refusal":true}),
            json!({"tool_call_id":"c","content":"x","is_error":true,"is_exception":true,"is_refusal":true}),
            json!({"tool_call_id":"c","content":"x","is_error":true,"is_interrupt":true}),
        ] {
            let err = serde_json::from_value::<ToolResult>(bad).unwrap_err();
            assert!(
                err.to_string().contains("inconsistent result flags"),
                "{err}"
            );
        }
        // A bare string content is accepted on input.
        let r: ToolResult =
            serde_json::from_value(json!({"tool_call_id":"c","content":"hi"})).unwrap();
        assert_eq!(r.content_text(), "hi");
    }

    #[test]
    fn validation() {
        assert!(ToolResult::text("c", "x").validate().is_ok());
        let err = ToolResult::text("c", "  ").validate().unwrap_err();
        assert_eq!(err.to_string(), "content: can't be blank");
        // Image-only content is content.
        assert!(
            ToolResult::success("c", vec![ContentPart::image("abc", "image/png")])
                .validate()
                .is_ok()
        );
    }
}

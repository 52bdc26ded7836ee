//! [`ToolOutput`]: what a tool body returns, and how it becomes a
//! [`crate::message::ToolResult`].

use std::fmt::Display;

use serde_json::Value;

use crate::message::{Content, ContentPart, ToolResult};

/// What a tool body returns. Each variant maps to a [`ToolResult`] as the seed says:
///
/// | variant | result |
/// |---|---|
/// | `Text(s)` | content `s` |
/// | `TextWithData(s, data)` | content `s`, `processed_content` = `data` (never sent to a model; the seed's `{:ok, "String response for LLM", native_data}`) |
/// | `Parts(parts)` | content parts: text, images, files |
/// | `Result(r)` | `r`, with `tool_call_id` overwritten and `name`/`display_text` filled in when unset |
/// | `Error(s)` | `is_error`, content `s` |
/// | `Refusal(s)` | `is_error` + `is_refusal`, content `s` — only when the tool wrote nothing |
/// | `Interrupt { message, data }` | `is_interrupt`, content `message`, `interrupt_data` = `data` |
///
/// Bodies rarely build it by hand: anything `Into<ToolOutput>` works, notably
/// `String`, `&str`, `(String, Value)`, `Vec<ContentPart>`, `ToolResult`, and
/// `Result<T, E>` where `T: Into<ToolOutput>` and `E: Display` (an `Err` becomes
/// `Error(e.to_string())`).
///
/// ```
/// use llmchain::tool::ToolOutput;
/// let ok: ToolOutput = Ok::<_, std::io::Error>("18C").into();
/// assert_eq!(ok, ToolOutput::Text("18C".into()));
/// let err: ToolOutput = Err::<String, _>("no such city").into();
/// assert_eq!(err, ToolOutput::Error("no such city".into()));
/// ```
///
/// Every variant holds `String`s (image and file parts carry base64 text), so a tool
/// cannot hand the model invalid UTF-8: bytes it read from a file or a process go
/// through [`ToolOutput::from_utf8`] (an error result that says what was wrong) or
/// `String::from_utf8_lossy` (U+FFFD in place of each bad sequence).
///
/// Unlike the reference, a bare `ToolResult` is accepted: in Rust the type says what
/// it is, so there is nothing to guess.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ToolOutput {
    /// Text for the model.
    Text(String),
    /// Text for the model plus native data kept for the application.
    TextWithData(String, Value),
    /// Multi-modal content.
    Parts(Vec<ContentPart>),
    /// A result built by the tool.
    Result(Box<ToolResult>),
    /// The tool failed (`is_error`).
    Error(String),
    /// The tool turned the call down before changing anything (`is_error` + `is_refusal`).
    Refusal(String),
    /// The tool paused for a human (`is_interrupt`).
    Interrupt {
        /// What the model (and a UI) sees.
        message: String,
        /// Data for the application only.
        data: Value,
    },
}

impl ToolOutput {
    /// A text output.
    pub fn text(s: impl Into<String>) -> Self {
        ToolOutput::Text(s.into())
    }

    /// Text for the model plus native data for the application.
    pub fn with_data(s: impl Into<String>, data: Value) -> Self {
        ToolOutput::TextWithData(s.into(), data)
    }

    /// Text from bytes the tool read (a file, a process's output): `Text` when they are
    /// UTF-8, otherwise an `Error` saying where the first invalid byte is and how many
    /// bytes there were. Use `String::from_utf8_lossy` instead to send the text with
    /// U+FFFD in place of the bad sequences.
    ///
    /// ```
    /// use llmchain::tool::ToolOutput;
    /// assert_eq!(ToolOutput::from_utf8(b"18C".to_vec()), ToolOutput::Text("18C".into()));
    /// assert_eq!(
    ///     ToolOutput::from_utf8(vec![b'o', b'k', 0xff]),
    ///     ToolOutput::Error(
    ///         "The tool's output is not valid UTF-8 text (3 bytes; invalid utf-8 sequence \
    ///          of 1 bytes from index 2), so it was not sent to the model.".into()
    ///     )
    /// );
    /// ```
    pub fn from_utf8(bytes: Vec<u8>) -> Self {
        match String::from_utf8(bytes) {
            Ok(s) => ToolOutput::Text(s),
            Err(e) => ToolOutput::Error(format!(
                "The tool's output is not valid UTF-8 text ({} bytes; {}), so it was not \
                 sent to the model.",
                e.as_bytes().len(),
                e.utf8_error()
            )),
        }
    }

    /// An error output.
    pub fn error(s: impl Into<String>) -> Self {
        ToolOutput::Error(s.into())
    }

    /// A refusal. Use it only when the tool has written nothing: the caller may
    /// resend a corrected call.
    pub fn refusal(s: impl Into<String>) -> Self {
        ToolOutput::Refusal(s.into())
    }

    /// An interrupt: pause for a human.
    pub fn interrupt(message: impl Into<String>, data: Value) -> Self {
        ToolOutput::Interrupt {
            message: message.into(),
            data,
        }
    }

    /// Maps the output to a result for call `tool_call_id` of tool `name`.
    pub(crate) fn into_result(self, tool_call_id: &str, name: &str, display: &str) -> ToolResult {
        let r = match self {
            ToolOutput::Text(s) => ToolResult::text(tool_call_id, s),
            ToolOutput::TextWithData(s, data) => {
                ToolResult::text(tool_call_id, s).with_processed_content(data)
            }
            ToolOutput::Parts(p) => ToolResult::success(tool_call_id, Content::Parts(p)),
            ToolOutput::Result(r) => {
                let mut r = (*r).into_tool_made();
                tool_call_id.clone_into(&mut r.tool_call_id);
                if r.name.is_none() {
                    r.name = Some(name.to_owned());
                }
                if r.display_text.is_none() {
                    r.display_text = Some(display.to_owned());
                }
                return r;
            }
            ToolOutput::Error(s) => ToolResult::error(tool_call_id, s),
            ToolOutput::Refusal(s) => ToolResult::refusal(tool_call_id, s),
            ToolOutput::Interrupt { message, data } => {
                ToolResult::interrupt(tool_call_id, message, data)
            }
        };
        r.with_name(name).with_display_text(display)
    }
}

impl From<String> for ToolOutput {
    fn from(s: String) -> Self {
        ToolOutput::Text(s)
    }
}

impl From<&str> for ToolOutput {
    fn from(s: &str) -> Self {
        ToolOutput::Text(s.to_owned())
    }
}

impl From<(String, Value)> for ToolOutput {
    fn from((s, v): (String, Value)) -> Self {
        ToolOutput::TextWithData(s, v)
    }
}

impl From<(&str, Value)> for ToolOutput {
    fn from((s, v): (&str, Value)) -> Self {
        ToolOutput::TextWithData(s.to_owned(), v)
    }
}

impl From<Vec<ContentPart>> for ToolOutput {
    fn from(p: Vec<ContentPart>) -> Self {
        ToolOutput::Parts(p)
    }
}

impl From<ContentPart> for ToolOutput {
    fn from(p: ContentPart) -> Self {
        ToolOutput::Parts(vec![p])
    }
}

impl From<ToolResult> for ToolOutput {
    fn from(r: ToolResult) -> Self {
        ToolOutput::Result(Box::new(r))
    }
}

impl<T: Into<ToolOutput>, E: Display> From<Result<T, E>> for ToolOutput {
    fn from(r: Result<T, E>) -> Self {
        match r {
            Ok(t) => t.into(),
            Err(e) => ToolOutput::Error(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn conversions() {
        assert_eq!(
            ToolOutput::from(("hi", json!(1))),
            ToolOutput::TextWithData("hi".into(), json!(1))
        );
        assert_eq!(
            ToolOutput::from(Ok::<_, String>(("hi".to_owned(), json!(1)))),
            ToolOutput::TextWithData("hi".into(), json!(1))
        );
        assert_eq!(
            ToolOutput::from(Ok::<_, String>(ToolOutput::refusal("no"))),
            ToolOutput::Refusal("no".into())
        );
        assert_eq!(
            ToolOutput::from(ContentPart::text("x")),
            ToolOutput::Parts(vec![ContentPart::text("x")])
        );
    }

    #[test]
    fn full_result_keeps_its_own_name_and_flags() {
        let r = ToolOutput::from(ToolResult::error("ignored", "bad").with_name("mine"))
            .into_result("call_1", "tool", "Tool");
        assert_eq!(r.tool_call_id, "call_1");
        assert_eq!(r.name.as_deref(), Some("mine"));
        assert_eq!(r.display_text.as_deref(), Some("Tool"));
        assert!(r.is_error());
    }
}

//! Validation and merge errors of the message model.
//!
//! Errors are values addressed by field, in the spirit of an Ecto changeset: each
//! [`FieldError`] names the field and carries a message, and [`ValidationErrors`]
//! renders them as `field: msg1, msg2; other: msg` — the exact strings of the
//! reference implementation (`arguments: invalid json`, `call_id: can't be blank`).

use std::fmt;

/// One problem with one field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field the problem is about, e.g. `"arguments"` or `"tool_calls"`.
    pub field: &'static str,
    /// The human-readable problem, e.g. `"invalid json"`.
    pub message: String,
    /// For list fields (`tool_calls`, `tool_results`), the position of the offending item.
    pub position: Option<usize>,
}

/// Every field problem found while validating a value.
///
/// ```
/// use llmchain::message::{ToolCall, ToolCallAttrs, ToolCallStatus};
///
/// let err = ToolCall::new(ToolCallAttrs {
///     status: ToolCallStatus::Complete,
///     name: Some("get_weather".into()),
///     arguments: Some("not json".into()),
///     ..Default::default()
/// })
/// .unwrap_err();
/// assert_eq!(err.to_string(), "call_id: can't be blank; arguments: invalid json");
/// assert_eq!(err.messages_for("arguments"), vec!["invalid json"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default, thiserror::Error)]
pub struct ValidationErrors {
    errors: Vec<FieldError>,
}

/// The message for a required field that is missing.
pub(crate) const BLANK: &str = "can't be blank";

impl ValidationErrors {
    /// No errors yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a problem with `field`.
    pub fn add(&mut self, field: &'static str, message: impl Into<String>) {
        self.errors.push(FieldError {
            field,
            message: message.into(),
            position: None,
        });
    }

    /// Adds a problem with the item at `position` of the list field `field`.
    pub fn add_at(&mut self, field: &'static str, position: usize, message: impl Into<String>) {
        self.errors.push(FieldError {
            field,
            message: message.into(),
            position: Some(position),
        });
    }

    /// True when nothing was found.
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    /// The individual problems, in the order they were found.
    pub fn errors(&self) -> &[FieldError] {
        &self.errors
    }

    /// The messages recorded for one field.
    pub fn messages_for(&self, field: &str) -> Vec<&str> {
        self.errors
            .iter()
            .filter(|e| e.field == field)
            .map(|e| e.message.as_str())
            .collect()
    }

    /// `Ok(value)` when no problem was recorded, otherwise `Err(self)`.
    pub fn into_result<T>(self, value: T) -> Result<T, ValidationErrors> {
        if self.errors.is_empty() {
            Ok(value)
        } else {
            Err(self)
        }
    }
}

impl fmt::Display for ValidationErrors {
    /// `field: msg1, msg2; other: msg`, fields in first-seen order.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut fields: Vec<&'static str> = Vec::new();
        for e in &self.errors {
            if !fields.contains(&e.field) {
                fields.push(e.field);
            }
        }
        for (i, field) in fields.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{field}: ")?;
            let mut first = true;
            for e in self.errors.iter().filter(|e| e.field == *field) {
                if !first {
                    f.write_str(", ")?;
                }
                first = false;
                f.write_str(&e.message)?;
            }
        }
        Ok(())
    }
}

/// Why two streamed tool-call fragments could not be merged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MergeError {
    /// The fragment belongs to another parallel call.
    #[error(
        "Can only merge tool calls with the same index (accumulated index {primary:?}, fragment index {part:?})"
    )]
    IndexMismatch {
        /// The index of the call being accumulated.
        primary: Option<u32>,
        /// The index of the fragment.
        part: Option<u32>,
    },
    /// The accumulated arguments would exceed the configured cap.
    #[error("tool call arguments exceed the limit of {limit} bytes")]
    ArgumentsTooLarge {
        /// The cap in bytes.
        limit: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_like_the_reference() {
        let mut e = ValidationErrors::new();
        e.add("tool_call_id", BLANK);
        e.add("content", BLANK);
        assert_eq!(
            e.to_string(),
            "tool_call_id: can't be blank; content: can't be blank"
        );
        let mut e = ValidationErrors::new();
        e.add("content", "a");
        e.add("role", "b");
        e.add("content", "c");
        assert_eq!(e.to_string(), "content: a, c; role: b");
    }

    #[test]
    fn into_result() {
        assert_eq!(ValidationErrors::new().into_result(3), Ok(3));
        let mut e = ValidationErrors::new();
        e.add_at("tool_calls", 2, "arguments: invalid json");
        assert_eq!(e.errors()[0].position, Some(2));
        assert!(e.into_result(3).is_err());
    }
}

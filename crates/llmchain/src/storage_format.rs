//! Loading the storage format (`docs/storage-format.md`) with errors that name the
//! JSON path of the problem.
//!
//! Unknown fields are ignored, so a file written by a newer *minor* revision of
//! version 1 still loads; a file whose `version` is above [`FORMAT_VERSION`] is
//! rejected, because a new version may change meanings.
//!
//! [`FORMAT_VERSION`]: crate::conversation::FORMAT_VERSION

use serde::de::DeserializeOwned;

/// A storage-format document that could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid storage document at {path}: {message}")]
pub struct StorageFormatError {
    /// JSON path of the problem, e.g. `messages[1].tool_calls[0].arguments`
    /// (`.` for the document itself).
    pub path: String,
    /// What is wrong there.
    pub message: String,
}

/// Renders a path as `messages[1].tool_calls[0].arguments`; the document itself is `.`,
/// and a key that is not a plain name is quoted: `metadata["a.b"]`, `[""]`.
fn render_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for seg in path.iter() {
        match seg {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                let plain = !key.is_empty()
                    && key
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                if plain {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(key);
                } else {
                    let quoted = serde_json::to_string(key).unwrap_or_else(|_| "\"?\"".into());
                    out.push_str(&format!("[{quoted}]"));
                }
            }
            Segment::Unknown => out.push_str(if out.is_empty() { "?" } else { ".?" }),
        }
    }
    if out.is_empty() {
        out.push('.');
    }
    out
}

/// Parses a document of the storage format.
///
/// ```
/// use llmchain::message::Message;
/// let err = llmchain::storage_format::from_str::<Message>(r#"{"role":"assistant","tool_calls":[{"arguments":[1]}]}"#).unwrap_err();
/// assert_eq!(err.path, "tool_calls[0].arguments");
/// ```
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, StorageFormatError> {
    from_slice(text.as_bytes())
}

/// [`from_str`] over bytes.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, StorageFormatError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = render_path(e.path());
        let inner = e.into_inner();
        StorageFormatError {
            path,
            message: inner.to_string(),
        }
    })?;
    de.end().map_err(|e| StorageFormatError {
        path: ".".into(),
        message: e.to_string(),
    })?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::Conversation;

    #[test]
    fn paths_are_never_empty() {
        // Found by the storage_load fuzz target: an error inside a `""` key.
        let err = from_str::<Conversation>("{\"\":[\n\n").unwrap_err();
        assert_eq!(err.path, "[\"\"]");
        let err = from_str::<Conversation>(
            "{\"messages\": [{\"role\": \"user\", \"metadata\": {\"a.b\": [}}]}",
        )
        .unwrap_err();
        assert_eq!(err.path, "messages[0].metadata[\"a.b\"][0]");
        let err = from_str::<Conversation>("[").unwrap_err();
        assert_eq!(err.path, ".");
        let err = from_str::<Conversation>("{} x").unwrap_err();
        assert_eq!(err.path, ".");
    }
}

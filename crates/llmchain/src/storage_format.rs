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
        let path = e.path().to_string();
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

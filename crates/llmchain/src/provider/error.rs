//! Codec errors.

/// A response body that could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Bytes that are not valid JSON where JSON is required.
    #[error("malformed {format} body: {message}")]
    Malformed {
        /// The format being decoded.
        format: &'static str,
        /// What is wrong, with a position when known.
        message: String,
    },
    /// Valid JSON of a shape this format never sends (probably another format).
    #[error("not a {format} body: {message}")]
    WrongFormat {
        /// The format being decoded.
        format: &'static str,
        /// What was found instead.
        message: String,
    },
    /// A call's arguments exceeded the configured cap.
    #[error("tool call arguments exceed the limit of {limit} bytes")]
    ArgumentsTooLarge {
        /// The cap.
        limit: usize,
    },
    /// A single line or event exceeded the framing buffer cap.
    #[error("a stream line exceeds the limit of {limit} bytes")]
    LineTooLong {
        /// The cap.
        limit: usize,
    },
}

/// A conversation that could not be encoded for a format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// Something the format cannot express, and no fallback applies.
    #[error("cannot encode for {format}: {message}")]
    Unsupported {
        /// The target format.
        format: &'static str,
        /// What cannot be expressed.
        message: String,
    },
    /// Invalid input (e.g. a tool result with no matching call).
    #[error("invalid conversation: {0}")]
    Invalid(String),
}

//! Codec errors.

/// A response body that could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// Bytes that are not valid JSON where JSON is required.
    #[error("malformed {} body: {message}", title(format))]
    Malformed {
        /// The format being decoded.
        format: &'static str,
        /// What is wrong, with a position when known.
        message: String,
    },
    /// Valid JSON of a shape this format never sends (probably another format).
    #[error("not {} {} body: {message}", article(format), title(format))]
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
    /// A second message started inside an open one (as when a proxy splices two
    /// responses): the stream is refused whole, so no call from it is ever run.
    #[error(
        "the {} stream starts message `{second}` inside message `{first}`: two responses \
         were spliced into one; nothing from it is used",
        title(format)
    )]
    Spliced {
        /// The format being decoded.
        format: &'static str,
        /// The id of the open message.
        first: String,
        /// The id of the message that started inside it.
        second: String,
    },
}

/// A format's name as people write it (its descriptor's title), or the name itself
/// for a name the registry does not know.
fn title(format: &str) -> &str {
    match super::Format::named(format) {
        Some(f) => f.title(),
        None => format,
    }
}

/// "a" or "an" before [`title`].
fn article(format: &str) -> &'static str {
    match title(format).chars().next() {
        Some('A' | 'E' | 'I' | 'O' | 'U' | 'a' | 'e' | 'i' | 'o' | 'u') => "an",
        _ => "a",
    }
}

/// A conversation that could not be encoded for a format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_format_as_people_write_it() {
        let e = DecodeError::WrongFormat {
            format: "openai_chat",
            message: "x".into(),
        };
        assert_eq!(e.to_string(), "not an OpenAI Chat body: x");
        let e = DecodeError::WrongFormat {
            format: "gemini",
            message: "x".into(),
        };
        assert_eq!(e.to_string(), "not a Gemini body: x");
        let e = DecodeError::Malformed {
            format: "anthropic",
            message: "y".into(),
        };
        assert_eq!(e.to_string(), "malformed Anthropic body: y");
    }
}

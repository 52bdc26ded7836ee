//! [`StreamEvent`]: what a streaming decoder reports as bytes arrive.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::message::TokenUsage;

/// Why the model stopped, normalised across providers (the raw value is kept apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model asked for tools.
    ToolCalls,
    /// A natural end of turn.
    EndTurn,
    /// A token limit cut the output.
    MaxTokens,
    /// A stop sequence matched.
    StopSequence,
    /// A safety or content filter stopped the output.
    ContentFilter,
    /// The provider reported an error.
    Error,
    /// Anything else (the raw value tells).
    Other,
}

/// One event of a decoded stream. Strings borrow from the decoder's buffer where they
/// can, so emitting an event does not allocate.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent<'a> {
    /// Visible text at a content position.
    TextDelta {
        /// Content position.
        index: usize,
        /// The text fragment.
        text: Cow<'a, str>,
    },
    /// Reasoning (thinking) text, kept apart from visible text.
    ReasoningDelta {
        /// Content position.
        index: usize,
        /// The reasoning fragment.
        text: Cow<'a, str>,
    },
    /// A signature for reasoning that must be replayed (Anthropic, Gemini).
    ReasoningSignature {
        /// Content position.
        index: usize,
        /// The signature fragment.
        signature: Cow<'a, str>,
    },
    /// A tool call became known.
    ToolCallStarted {
        /// Position of the call in the message's `tool_calls`.
        index: u32,
        /// The wire id, if any (an empty id counts as none).
        call_id: Option<Cow<'a, str>>,
        /// The tool name.
        name: Cow<'a, str>,
    },
    /// A fragment of a call's argument text.
    ToolCallArguments {
        /// Position of the call.
        index: u32,
        /// The fragment.
        fragment: Cow<'a, str>,
    },
    /// A call's arguments are complete on the wire.
    ToolCallFinished {
        /// Position of the call.
        index: u32,
    },
    /// Token usage (may come more than once; later reports add up per provider rules).
    Usage(TokenUsage),
    /// The model stopped.
    Stop {
        /// Normalised reason.
        reason: StopReason,
        /// The wire value.
        raw: Cow<'a, str>,
    },
    /// An error reported inside the stream.
    Error {
        /// The provider's error type, e.g. `overloaded_error`.
        kind: Cow<'a, str>,
        /// The provider's message.
        message: Cow<'a, str>,
    },
}

impl StreamEvent<'_> {
    /// An owned copy (for events that outlive the decoder's buffer).
    pub fn into_owned(self) -> StreamEvent<'static> {
        fn own(c: Cow<'_, str>) -> Cow<'static, str> {
            Cow::Owned(c.into_owned())
        }
        match self {
            StreamEvent::TextDelta { index, text } => StreamEvent::TextDelta {
                index,
                text: own(text),
            },
            StreamEvent::ReasoningDelta { index, text } => StreamEvent::ReasoningDelta {
                index,
                text: own(text),
            },
            StreamEvent::ReasoningSignature { index, signature } => {
                StreamEvent::ReasoningSignature {
                    index,
                    signature: own(signature),
                }
            }
            StreamEvent::ToolCallStarted {
                index,
                call_id,
                name,
            } => StreamEvent::ToolCallStarted {
                index,
                call_id: call_id.map(own),
                name: own(name),
            },
            StreamEvent::ToolCallArguments { index, fragment } => StreamEvent::ToolCallArguments {
                index,
                fragment: own(fragment),
            },
            StreamEvent::ToolCallFinished { index } => StreamEvent::ToolCallFinished { index },
            StreamEvent::Usage(u) => StreamEvent::Usage(u),
            StreamEvent::Stop { reason, raw } => StreamEvent::Stop {
                reason,
                raw: own(raw),
            },
            StreamEvent::Error { kind, message } => StreamEvent::Error {
                kind: own(kind),
                message: own(message),
            },
        }
    }
}

//! [`StreamEvent`]: what a streaming decoder reports as bytes arrive.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::message::TokenUsage;

/// Why the model stopped, normalised across providers (the raw value is kept apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
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
#[non_exhaustive]
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

/// The owned events of one read of a body, with adjacent fragments of the same kind and
/// position joined: a 16 KiB read carrying a hundred 8-byte argument fragments becomes
/// one `ToolCallArguments` event. What a consumer merges is unchanged (fragments are
/// concatenated either way); the number of owned values, queue entries and callback
/// calls per read drops from one per wire event to one per run of them.
#[derive(Debug, Default)]
pub struct EventBatch {
    events: Vec<StreamEvent<'static>>,
}

impl EventBatch {
    /// Adds an event, joining it to the last one when both are fragments of the same
    /// kind at the same position.
    pub fn push(&mut self, e: StreamEvent<'_>) {
        use StreamEvent::{ReasoningDelta, ReasoningSignature, TextDelta, ToolCallArguments};
        let joined = match (self.events.last_mut(), &e) {
            (
                Some(TextDelta { index: a, text }),
                TextDelta {
                    index: b,
                    text: more,
                },
            )
            | (
                Some(ReasoningDelta { index: a, text }),
                ReasoningDelta {
                    index: b,
                    text: more,
                },
            )
            | (
                Some(ReasoningSignature {
                    index: a,
                    signature: text,
                }),
                ReasoningSignature {
                    index: b,
                    signature: more,
                },
            ) if a == b => {
                text.to_mut().push_str(more);
                true
            }
            (
                Some(ToolCallArguments {
                    index: a,
                    fragment: text,
                }),
                ToolCallArguments {
                    index: b,
                    fragment: more,
                },
            ) if a == b => {
                text.to_mut().push_str(more);
                true
            }
            _ => false,
        };
        if !joined {
            self.events.push(e.into_owned());
        }
    }

    /// True when no event was added since the last drain.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Takes the events, in order.
    pub fn drain(&mut self) -> std::vec::Drain<'_, StreamEvent<'static>> {
        self.events.drain(..)
    }
}

#[cfg(test)]
mod batch_tests {
    use super::*;

    fn args(index: u32, s: &str) -> StreamEvent<'_> {
        StreamEvent::ToolCallArguments {
            index,
            fragment: Cow::Borrowed(s),
        }
    }

    #[test]
    fn adjacent_fragments_of_one_kind_and_position_are_joined_in_order() {
        let mut b = EventBatch::default();
        b.push(StreamEvent::TextDelta {
            index: 0,
            text: "Hel".into(),
        });
        b.push(StreamEvent::TextDelta {
            index: 0,
            text: "lo".into(),
        });
        b.push(StreamEvent::ToolCallStarted {
            index: 0,
            call_id: Some("c1".into()),
            name: "f".into(),
        });
        b.push(args(0, "{\"a\""));
        b.push(args(0, ":1}"));
        b.push(args(1, "{}"));
        b.push(args(0, ""));
        b.push(StreamEvent::ToolCallFinished { index: 0 });
        let got: Vec<_> = b.drain().collect();
        assert_eq!(
            got,
            [
                StreamEvent::TextDelta {
                    index: 0,
                    text: "Hello".into()
                },
                StreamEvent::ToolCallStarted {
                    index: 0,
                    call_id: Some("c1".into()),
                    name: "f".into()
                },
                args(0, "{\"a\":1}").into_owned(),
                args(1, "{}").into_owned(),
                args(0, "").into_owned(),
                StreamEvent::ToolCallFinished { index: 0 },
            ]
        );
        assert!(b.is_empty());
    }

    #[test]
    fn text_and_reasoning_at_one_position_stay_apart() {
        let mut b = EventBatch::default();
        b.push(StreamEvent::TextDelta {
            index: 0,
            text: "a".into(),
        });
        b.push(StreamEvent::ReasoningDelta {
            index: 0,
            text: "b".into(),
        });
        b.push(StreamEvent::TextDelta {
            index: 1,
            text: "c".into(),
        });
        assert_eq!(b.drain().count(), 3);
    }
}

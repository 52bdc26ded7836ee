//! [`Assembler`]: the O(fragment) accumulator the decoders share to build the final
//! assistant [`Message`] and [`DecodeOutcome`].
//!
//! Equivalent to folding `MessageDelta`s with `ToolCall::merge` (raw fragments
//! concatenated, an object replaces raw text, later fragments after an object dropped,
//! the last non-empty id wins), but appends straight into each call's buffer so a
//! fragment costs O(fragment) with no intermediate `ToolCall` per event.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::error::DecodeError;
use super::event::{StopReason, StreamEvent};
use super::outcome::{DecodeOutcome, ProviderError};
use crate::message::{
    Arguments, ContentPart, ContentType, Message, MessageStatus, Role, TokenUsage, ToolCall,
    ToolCallStatus, ToolType,
};

/// One call being assembled.
#[derive(Debug, Clone, Default)]
pub struct CallBuf {
    /// The wire id (never empty).
    pub call_id: Option<String>,
    /// The tool name (empty until known).
    pub name: String,
    /// Raw argument text received so far.
    pub args: String,
    /// Arguments given as an object (replaces `args`).
    pub object: Option<Map<String, Value>>,
    /// Provider state to keep on the call (e.g. `item_id`).
    pub metadata: Map<String, Value>,
    /// The wire said the call's arguments are complete.
    pub finished: bool,
}

/// Builds the assistant message of a decoded body.
#[derive(Debug, Clone)]
pub struct Assembler {
    max_argument_bytes: usize,
    /// Content parts in order (text and thinking).
    pub content: Vec<ContentPart>,
    /// Calls in order of appearance.
    pub calls: Vec<CallBuf>,
    /// Start a new content part on the next text, even if the last part has the same type.
    split_next: bool,
}

/// Sends the event to the callback.
pub type OnEvent<'f> = dyn FnMut(StreamEvent<'_>) + 'f;

impl Assembler {
    /// An empty assembler with an argument cap per call.
    pub fn new(max_argument_bytes: usize) -> Self {
        Assembler {
            max_argument_bytes,
            content: Vec::new(),
            calls: Vec::new(),
            split_next: false,
        }
    }

    /// Appends visible text (`Text`) or reasoning (`Thinking`) and emits the delta.
    pub fn push_content(&mut self, kind: ContentType, text: &str, on_event: &mut OnEvent<'_>) {
        if text.is_empty() {
            return;
        }
        let index = self.part_for(kind);
        self.content[index].content.push_str(text);
        let text = Cow::Borrowed(text);
        on_event(match kind {
            ContentType::Thinking => StreamEvent::ReasoningDelta { index, text },
            _ => StreamEvent::TextDelta { index, text },
        });
    }

    /// The position of the part that the next `kind` text goes to, creating it.
    pub fn part_for(&mut self, kind: ContentType) -> usize {
        match self.content.last() {
            Some(p) if p.r#type == kind && !self.split_next => self.content.len() - 1,
            _ => {
                self.split_next = false;
                self.content.push(ContentPart::new(kind, String::new()));
                self.content.len() - 1
            }
        }
    }

    /// Makes the next content start a new part (a new output item).
    pub fn split_content(&mut self) {
        self.split_next = true;
    }

    /// Starts a call and emits [`StreamEvent::ToolCallStarted`]; returns its position.
    pub fn start_call(
        &mut self,
        call_id: Option<&str>,
        name: &str,
        on_event: &mut OnEvent<'_>,
    ) -> usize {
        let call_id = call_id.filter(|s| !s.is_empty());
        self.calls.push(CallBuf {
            call_id: call_id.map(str::to_owned),
            name: name.to_owned(),
            ..CallBuf::default()
        });
        let index = self.calls.len() - 1;
        on_event(StreamEvent::ToolCallStarted {
            index: index as u32,
            call_id: call_id.map(Cow::Borrowed),
            name: Cow::Borrowed(name),
        });
        index
    }

    /// Sets the id (a non-empty id wins) and fills or extends the name of a call.
    pub fn update_call(&mut self, pos: usize, call_id: Option<&str>, name: Option<&str>) {
        let Some(c) = self.calls.get_mut(pos) else {
            return;
        };
        if let Some(id) = call_id.filter(|s| !s.is_empty())
            && c.call_id.as_deref() != Some(id)
        {
            c.call_id = Some(id.to_owned());
        }
        if let Some(n) = name.filter(|s| !s.is_empty())
            && c.name != n
        {
            // As `ToolCall::merge`: a different name is appended (streamed names).
            c.name.push_str(n);
        }
    }

    /// Appends an argument fragment (dropped after an object) and emits it.
    pub fn push_args(
        &mut self,
        pos: usize,
        fragment: &str,
        on_event: &mut OnEvent<'_>,
    ) -> Result<(), DecodeError> {
        let Some(c) = self.calls.get_mut(pos) else {
            return Ok(());
        };
        if fragment.is_empty() || c.object.is_some() {
            return Ok(());
        }
        if c.args.len() + fragment.len() > self.max_argument_bytes {
            return Err(DecodeError::ArgumentsTooLarge {
                limit: self.max_argument_bytes,
            });
        }
        c.args.push_str(fragment);
        on_event(StreamEvent::ToolCallArguments {
            index: pos as u32,
            fragment: Cow::Borrowed(fragment),
        });
        Ok(())
    }

    /// Replaces a call's arguments with the final text the wire gave.
    pub fn replace_args(&mut self, pos: usize, text: &str) -> Result<(), DecodeError> {
        if text.len() > self.max_argument_bytes {
            return Err(DecodeError::ArgumentsTooLarge {
                limit: self.max_argument_bytes,
            });
        }
        if let Some(c) = self.calls.get_mut(pos)
            && c.object.is_none()
            && c.args != text
        {
            c.args.clear();
            c.args.push_str(text);
        }
        Ok(())
    }

    /// Sets the arguments from an object (an object replaces raw text).
    pub fn set_args_object(
        &mut self,
        pos: usize,
        object: Map<String, Value>,
        on_event: &mut OnEvent<'_>,
    ) -> Result<(), DecodeError> {
        let Some(c) = self.calls.get_mut(pos) else {
            return Ok(());
        };
        let text = serde_json::to_string(&object).unwrap_or_default();
        if text.len() > self.max_argument_bytes {
            return Err(DecodeError::ArgumentsTooLarge {
                limit: self.max_argument_bytes,
            });
        }
        c.args.clear();
        c.object = Some(object);
        on_event(StreamEvent::ToolCallArguments {
            index: pos as u32,
            fragment: Cow::Owned(text),
        });
        Ok(())
    }

    /// Marks a call's arguments complete on the wire and emits it (once).
    pub fn finish_call(&mut self, pos: usize, on_event: &mut OnEvent<'_>) {
        if let Some(c) = self.calls.get_mut(pos)
            && !c.finished
        {
            c.finished = true;
            on_event(StreamEvent::ToolCallFinished { index: pos as u32 });
        }
    }

    /// Marks every call finished.
    pub fn finish_all(&mut self, on_event: &mut OnEvent<'_>) {
        for pos in 0..self.calls.len() {
            self.finish_call(pos, on_event);
        }
    }

    /// The outcome: a `Complete` message completes (parses) its calls, reporting the
    /// invalid ones; `Length`/`Cancelled` keep every call incomplete.
    pub fn into_outcome(self, end: End) -> DecodeOutcome {
        let tool_calls = self
            .calls
            .into_iter()
            .enumerate()
            .map(|(i, c)| ToolCall {
                status: ToolCallStatus::Incomplete,
                r#type: ToolType::Function,
                call_id: c.call_id,
                name: (!c.name.is_empty()).then_some(c.name),
                arguments: match c.object {
                    Some(o) => Some(Arguments::Object(o)),
                    None => Some(Arguments::Raw(c.args)),
                },
                index: Some(i as u32),
                display_text: None,
                metadata: c.metadata,
            })
            .collect();
        let mut message = Message {
            role: Role::Assistant,
            status: end.status,
            content: self.content,
            tool_calls,
            tool_results: Vec::new(),
            name: None,
            metadata: Map::new(),
        };
        if let Some(u) = end.usage {
            message.set_usage(u);
        }
        if let Some(e) = &end.error {
            message.metadata.insert(
                "streaming_error".into(),
                Value::String(format!("{}: {}", e.kind, e.message)),
            );
        }
        let invalid_tool_calls = message.complete_tool_calls();
        DecodeOutcome {
            message,
            invalid_tool_calls,
            stop_reason: end.stop_reason,
            raw_stop_reason: end.raw_stop_reason,
            usage: end.usage,
            error: end.error,
        }
    }
}

/// How a body ended.
#[derive(Debug, Clone, PartialEq)]
pub struct End {
    /// The message status.
    pub status: MessageStatus,
    /// Normalised stop reason.
    pub stop_reason: Option<StopReason>,
    /// Wire stop reason.
    pub raw_stop_reason: Option<String>,
    /// Usage.
    pub usage: Option<TokenUsage>,
    /// A provider error from the body.
    pub error: Option<ProviderError>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::MessageDelta;

    /// The assembler ends in the same message as folding `MessageDelta`s with
    /// `ToolCall::merge` over the same fragments.
    #[test]
    fn same_message_as_message_delta_merge() {
        let frags = ["{\"ci", "ty\":\"Pa", "ris\"}"];
        let mut a = Assembler::new(1 << 20);
        let mut sink = |_: StreamEvent<'_>| {};
        let p = a.start_call(Some("call_1"), "get_weather", &mut sink);
        for f in frags {
            a.push_args(p, f, &mut sink).unwrap();
        }
        let ours = a
            .into_outcome(End {
                status: MessageStatus::Complete,
                stop_reason: None,
                raw_stop_reason: None,
                usage: None,
                error: None,
            })
            .message;

        let mut d = MessageDelta::default();
        d.merge(MessageDelta::tool_call_fragment(ToolCall {
            call_id: Some("call_1".into()),
            name: Some("get_weather".into()),
            index: Some(0),
            ..Default::default()
        }))
        .unwrap();
        for f in frags {
            d.merge(MessageDelta::tool_call_fragment(ToolCall {
                arguments: Some(f.into()),
                index: Some(0),
                ..Default::default()
            }))
            .unwrap();
        }
        d.merge(MessageDelta::status_fragment(
            crate::message::DeltaStatus::Complete,
        ))
        .unwrap();
        let theirs = d.to_message().unwrap().message;
        assert_eq!(ours.tool_calls, theirs.tool_calls);
    }

    #[test]
    fn argument_cap() {
        let mut a = Assembler::new(4);
        let mut sink = |_: StreamEvent<'_>| {};
        let p = a.start_call(None, "x", &mut sink);
        a.push_args(p, "{\"a\"", &mut sink).unwrap();
        assert_eq!(
            a.push_args(p, ":", &mut sink),
            Err(DecodeError::ArgumentsTooLarge { limit: 4 })
        );
    }
}

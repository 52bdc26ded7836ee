//! [`MessageDelta`]: the streaming accumulator for an assistant message.

use serde_json::{Map, Value};

use super::chat::{InvalidToolCall, Message, MessageStatus, Role};
use super::content_part::ContentPart;
use super::error::MergeError;
use super::tool_call::{ToolCall, ToolCallStatus};
use super::usage::TokenUsage;

/// Where a streamed message stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum DeltaStatus {
    /// Still streaming.
    #[default]
    Incomplete,
    /// Finished normally.
    Complete,
    /// Cut off by a length limit.
    Length,
    /// Stopped by cancellation or a stream error.
    Cancelled,
}

/// The default cap on one call's accumulated argument bytes (16 MiB).
pub const DEFAULT_MAX_ARGUMENT_BYTES: usize = 16 * 1024 * 1024;

/// Why a delta could not be merged or converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DeltaError {
    /// A tool-call fragment could not be merged.
    #[error(transparent)]
    Merge(#[from] MergeError),
    /// `to_message` on a delta that is still streaming.
    #[error("Cannot convert incomplete message")]
    Incomplete,
}

/// A streamed fragment of an assistant message, and the accumulator of such fragments.
///
/// A fragment carries at most one content part (placed at `index`, `None` meaning 0)
/// and any number of tool-call fragments (merged by their own index with
/// [`ToolCall::merge`]). Merging is O(fragment): the accumulated text is never
/// re-copied or re-parsed.
///
/// ```
/// use llmchain::message::{DeltaStatus, MessageDelta, ToolCall};
///
/// let mut acc = MessageDelta::default();
/// let header = ToolCall { index: Some(0), call_id: Some("call_1".into()), name: Some("calc".into()), ..Default::default() };
/// acc.merge(MessageDelta::tool_call_fragment(header)).unwrap();
/// for part in [r#"{"expr"#, r#"ession": "1+1"}"#] {
///     let frag = ToolCall { index: Some(0), arguments: Some(part.into()), ..Default::default() };
///     acc.merge(MessageDelta::tool_call_fragment(frag)).unwrap();
/// }
/// acc.merge(MessageDelta::status_fragment(DeltaStatus::Complete)).unwrap();
/// let done = acc.to_message().unwrap();
/// assert!(done.invalid_tool_calls.is_empty());
/// assert_eq!(done.message.tool_calls[0].arguments_as_map()["expression"], "1+1");
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MessageDelta {
    /// The fragment's content part (consumed by `merge`).
    pub content: Option<ContentPart>,
    /// The content position of the fragment; the message index on the accumulator.
    pub index: Option<usize>,
    /// Streaming status; only moves forward.
    pub status: DeltaStatus,
    /// Tool-call fragments (on a fragment) or accumulated calls (on the accumulator).
    pub tool_calls: Vec<ToolCall>,
    /// Token usage; accumulated by addition.
    pub usage: Option<TokenUsage>,
    /// Provider metadata; shallow-merged.
    pub metadata: Map<String, Value>,
    /// Accumulated parts with their content index, sorted by index (stable).
    merged_content: Vec<(usize, ContentPart)>,
    max_argument_bytes: Option<usize>,
}

impl MessageDelta {
    /// A fragment holding one content part at `index`.
    pub fn content_fragment(index: usize, part: ContentPart) -> Self {
        MessageDelta {
            content: Some(part),
            index: Some(index),
            ..Default::default()
        }
    }

    /// A fragment holding one tool-call fragment.
    pub fn tool_call_fragment(call: ToolCall) -> Self {
        MessageDelta {
            tool_calls: vec![call],
            ..Default::default()
        }
    }

    /// A fragment holding several tool-call fragments, merged in order (some providers
    /// send several fragments of one call, or of several calls, in one chunk).
    pub fn tool_call_fragments(calls: Vec<ToolCall>) -> Self {
        MessageDelta {
            tool_calls: calls,
            ..Default::default()
        }
    }

    /// A fragment that only moves the status (e.g. a finish reason).
    pub fn status_fragment(status: DeltaStatus) -> Self {
        MessageDelta {
            status,
            ..Default::default()
        }
    }

    /// A fragment that only carries usage.
    pub fn usage_fragment(usage: TokenUsage) -> Self {
        MessageDelta {
            usage: Some(usage),
            ..Default::default()
        }
    }

    /// Caps one call's accumulated raw arguments (default [`DEFAULT_MAX_ARGUMENT_BYTES`]).
    #[must_use]
    pub fn with_max_argument_bytes(mut self, limit: usize) -> Self {
        self.max_argument_bytes = Some(limit);
        self
    }

    /// The accumulated content parts, by position.
    pub fn merged_content(&self) -> impl Iterator<Item = &ContentPart> {
        self.merged_content.iter().map(|(_, p)| p)
    }

    /// Merges a fragment into this accumulator.
    pub fn merge(&mut self, mut delta: MessageDelta) -> Result<(), DeltaError> {
        // Fields are taken out of `delta` rather than moved as a whole: one fragment
        // is merged per streamed chunk, and copying ~300-byte structs around showed up
        // as a tenth of the merge cost.
        if let Some(part) = delta.content.take() {
            self.merge_content(delta.index.unwrap_or(0), part);
        }
        if delta.index.is_some() {
            self.index = delta.index;
        }
        // A fragment may itself be an accumulator (merge of merged deltas).
        if !delta.merged_content.is_empty() {
            for (i, part) in std::mem::take(&mut delta.merged_content) {
                self.merge_content(i, part);
            }
        }
        for call in &mut delta.tool_calls {
            self.merge_tool_call(call)?;
        }
        if self.status == DeltaStatus::Incomplete {
            self.status = delta.status;
        }
        if let Some(u) = delta.usage.take() {
            self.usage.get_or_insert_with(TokenUsage::default).add(u);
        }
        if !delta.metadata.is_empty() {
            for (k, v) in std::mem::take(&mut delta.metadata) {
                self.metadata.insert(k, v);
            }
        }
        Ok(())
    }

    /// Merges a list of fragments in order.
    pub fn merge_all(
        &mut self,
        deltas: impl IntoIterator<Item = MessageDelta>,
    ) -> Result<(), DeltaError> {
        deltas.into_iter().try_for_each(|d| self.merge(d))
    }

    fn merge_content(&mut self, index: usize, part: ContentPart) {
        if part.content.is_empty() && part.options.is_empty() {
            return;
        }
        // Parts are kept sorted by index (several per index when a provider mixes types
        // at one position). Streaming almost always continues the last part, so check it
        // first; otherwise binary-search. No padding: an index from the wire (any `usize`)
        // costs nothing, so a hostile index cannot make us allocate.
        if let Some((last_index, last)) = self.merged_content.last_mut() {
            if *last_index == index && last.r#type == part.r#type {
                last.merge_part(part);
                return;
            }
            if *last_index < index {
                self.merged_content.push((index, part));
                return;
            }
        }
        let start = self.merged_content.partition_point(|(i, _)| *i < index);
        let end = self.merged_content.partition_point(|(i, _)| *i <= index);
        // A provider that mixes part types at one index: keep both rather than drop
        // text; continue the newest part of the same type at that index.
        match self.merged_content[start..end]
            .iter_mut()
            .rev()
            .find(|(_, p)| p.r#type == part.r#type)
        {
            Some((_, existing)) => {
                existing.merge_part(part);
            }
            None => self.merged_content.insert(end, (index, part)),
        }
    }

    fn merge_tool_call(&mut self, call: &mut ToolCall) -> Result<(), MergeError> {
        let limit = self
            .max_argument_bytes
            .unwrap_or(DEFAULT_MAX_ARGUMENT_BYTES);
        // Search from the end: fragments almost always belong to the newest call.
        match self
            .tool_calls
            .iter_mut()
            .rev()
            .find(|c| c.index == call.index)
        {
            Some(acc) => {
                if acc.raw_arguments_len() + call.raw_arguments_len() > limit {
                    return Err(MergeError::ArgumentsTooLarge { limit });
                }
                acc.absorb(call)
            }
            None => {
                if call.raw_arguments_len() > limit {
                    return Err(MergeError::ArgumentsTooLarge { limit });
                }
                self.tool_calls.push(std::mem::take(call));
                Ok(())
            }
        }
    }

    /// Converts a finished delta into an assistant message.
    ///
    /// A `Complete` delta completes its calls; each invalid one stays incomplete in the
    /// message (it never runs, but a result can still answer it) and is reported by
    /// position. A `Length` or `Cancelled` delta never completes its calls.
    pub fn to_message(self) -> Result<CompletedDelta, DeltaError> {
        let status = match self.status {
            DeltaStatus::Incomplete => return Err(DeltaError::Incomplete),
            DeltaStatus::Complete => MessageStatus::Complete,
            DeltaStatus::Length => MessageStatus::Length,
            DeltaStatus::Cancelled => MessageStatus::Cancelled,
        };
        Ok(self.into_message_with(status))
    }

    /// Ends a partial stream as a `Cancelled` message (e.g. the connection dropped).
    /// `error` is kept in `metadata.streaming_error`.
    pub fn cancel(self, error: Option<String>) -> Message {
        let mut done = self.into_message_with(MessageStatus::Cancelled);
        if let Some(e) = error {
            done.message
                .metadata
                .insert("streaming_error".into(), Value::String(e));
        }
        done.message
    }

    fn into_message_with(self, status: MessageStatus) -> CompletedDelta {
        let mut message = Message {
            role: Role::Assistant,
            status,
            content: self.merged_content.into_iter().map(|(_, p)| p).collect(),
            tool_calls: self.tool_calls,
            tool_results: Vec::new(),
            name: None,
            metadata: self.metadata,
        };
        if let Some(u) = self.usage {
            message.set_usage(u);
        }
        let invalid_tool_calls = message.complete_tool_calls();
        CompletedDelta {
            message,
            invalid_tool_calls,
        }
    }

    /// Upserts a call by `call_id` (a call without an id is ignored): given name,
    /// arguments and display text overwrite; the status only moves forward; metadata
    /// is shallow-merged.
    pub fn upsert_tool_call(&mut self, call: ToolCall) {
        let Some(id) = call.call_id.as_deref() else {
            return;
        };
        match self
            .tool_calls
            .iter_mut()
            .find(|c| c.call_id.as_deref() == Some(id))
        {
            None => self.tool_calls.push(call),
            Some(c) => {
                if call.name.is_some() {
                    c.name = call.name;
                }
                if call.arguments.is_some() {
                    c.arguments = call.arguments;
                }
                if call.display_text.is_some() {
                    c.display_text = call.display_text;
                }
                if call.status == ToolCallStatus::Complete {
                    c.status = ToolCallStatus::Complete;
                }
                c.metadata.extend(call.metadata);
            }
        }
    }

    /// Sets the execution status of the call with `call_id`.
    pub fn set_tool_execution_status(&mut self, call_id: &str, status: impl AsRef<str>) {
        if let Some(c) = self
            .tool_calls
            .iter_mut()
            .find(|c| c.call_id.as_deref() == Some(call_id))
        {
            c.set_execution_status(status);
        }
    }

    /// Sets the display text of the call with `call_id` (`None` does nothing).
    pub fn set_tool_display_text(&mut self, call_id: &str, text: Option<String>) {
        if let (Some(text), Some(c)) = (
            text,
            self.tool_calls
                .iter_mut()
                .find(|c| c.call_id.as_deref() == Some(call_id)),
        ) {
            c.display_text = Some(text);
        }
    }

    /// True when there is at least one call and every call is `completed` or `failed`.
    pub fn all_tools_terminal(&self) -> bool {
        !self.tool_calls.is_empty()
            && self
                .tool_calls
                .iter()
                .all(|c| matches!(c.execution_status(), "completed" | "failed"))
    }
}

/// A converted delta: the message and the calls that failed to complete.
#[derive(Debug, Clone, PartialEq)]
pub struct CompletedDelta {
    /// The assistant message.
    pub message: Message,
    /// Calls left incomplete because their arguments or ids were invalid.
    pub invalid_tool_calls: Vec<InvalidToolCall>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{ContentType, ToolCallStatus};
    use serde_json::json;

    fn header(index: u32, id: &str) -> MessageDelta {
        MessageDelta::tool_call_fragment(ToolCall {
            index: Some(index),
            call_id: Some(id.into()),
            name: Some("get_weather".into()),
            arguments: Some("".into()),
            ..Default::default()
        })
    }

    fn args(index: u32, s: &str) -> MessageDelta {
        MessageDelta::tool_call_fragment(ToolCall {
            index: Some(index),
            arguments: Some(s.into()),
            ..Default::default()
        })
    }

    fn done(status: DeltaStatus) -> MessageDelta {
        MessageDelta {
            status,
            ..Default::default()
        }
    }

    // Reference §8.2: three parallel OpenAI calls.
    #[test]
    fn three_parallel_calls() {
        let mut acc = MessageDelta::default();
        let cities = [("Moab", "UT"), ("Portland", "OR"), ("Baltimore", "MD")];
        let ids = ["call_123", "call_234", "call_345"];
        for (i, ((city, state), id)) in cities.iter().zip(ids).enumerate() {
            let i = i as u32;
            acc.merge(header(i, id)).unwrap();
            acc.merge(args(i, "{\"ci")).unwrap();
            acc.merge(args(
                i,
                &format!("ty\": \"{city}\", \"state\": \"{state}\"}}"),
            ))
            .unwrap();
        }
        acc.merge(done(DeltaStatus::Complete)).unwrap();
        assert!(acc.merged_content().next().is_none());
        assert_eq!(acc.tool_calls.len(), 3);
        assert!(acc.tool_calls.iter().all(|c| !c.is_complete()));
        let out = acc.to_message().unwrap();
        assert!(out.invalid_tool_calls.is_empty());
        let got: Vec<_> = out
            .message
            .tool_calls
            .iter()
            .map(|c| (c.call_id.clone().unwrap(), c.arguments_as_map()))
            .collect();
        assert_eq!(got[1].0, "call_234");
        assert_eq!(
            Value::Object(got[1].1.clone()),
            json!({"city": "Portland", "state": "OR"})
        );
    }

    #[test]
    fn several_fragments_in_one_delta() {
        let mut acc = MessageDelta::default();
        let mut d = header(0, "a");
        d.tool_calls.push(args(0, "{\"x\":").tool_calls.remove(0));
        d.tool_calls.push(args(0, "1}").tool_calls.remove(0));
        acc.merge(d).unwrap();
        assert_eq!(acc.tool_calls[0].raw_arguments(), Some("{\"x\":1}"));
    }

    // Reference: calculator fixture.
    #[test]
    fn calculator_to_message() {
        let mut acc = MessageDelta::default();
        acc.merge_all([
            header(0, "call_calc"),
            args(0, "{\n \""),
            args(0, "expression\": \"100 + 300 - 200\"}"),
            done(DeltaStatus::Complete),
        ])
        .unwrap();
        let out = acc.to_message().unwrap();
        assert_eq!(
            out.message.tool_calls[0].arguments_as_map()["expression"],
            "100 + 300 - 200"
        );
        assert_eq!(out.message.tool_calls[0].status, ToolCallStatus::Complete);
    }

    #[test]
    fn content_by_index_and_usage() {
        let mut acc = MessageDelta::default();
        acc.merge(MessageDelta::content_fragment(
            0,
            ContentPart::thinking("hm"),
        ))
        .unwrap();
        acc.merge(MessageDelta::content_fragment(1, ContentPart::text("Hel")))
            .unwrap();
        acc.merge(MessageDelta::content_fragment(
            0,
            ContentPart::thinking(", ok"),
        ))
        .unwrap();
        acc.merge(MessageDelta::content_fragment(1, ContentPart::text("lo")))
            .unwrap();
        acc.merge(MessageDelta::content_fragment(1, ContentPart::text("")))
            .unwrap();
        acc.merge(MessageDelta {
            usage: Some(TokenUsage::new(10, 1)),
            ..Default::default()
        })
        .unwrap();
        acc.merge(MessageDelta {
            usage: Some(TokenUsage::new(0, 5)),
            status: DeltaStatus::Complete,
            ..Default::default()
        })
        .unwrap();
        let m = acc.to_message().unwrap().message;
        assert_eq!(m.content[0].r#type, ContentType::Thinking);
        assert_eq!(m.content[0].content, "hm, ok");
        assert_eq!(m.text().as_deref(), Some("Hello"));
        assert_eq!(m.usage(), Some(TokenUsage::new(10, 6)));
    }

    #[test]
    fn mismatched_types_at_one_index_keep_both() {
        let mut acc = MessageDelta::default();
        acc.merge(MessageDelta::content_fragment(
            0,
            ContentPart::thinking("t"),
        ))
        .unwrap();
        acc.merge(MessageDelta::content_fragment(0, ContentPart::text("a")))
            .unwrap();
        acc.merge(MessageDelta::content_fragment(0, ContentPart::text("b")))
            .unwrap();
        let parts: Vec<_> = acc.merged_content().cloned().collect();
        assert_eq!(
            parts,
            vec![ContentPart::thinking("t"), ContentPart::text("ab")]
        );
    }

    #[test]
    fn incomplete_and_cut_off() {
        let mut acc = MessageDelta::default();
        acc.merge_all([header(0, "a"), args(0, "{\"x\": ")])
            .unwrap();
        assert_eq!(acc.clone().to_message(), Err(DeltaError::Incomplete));
        acc.merge(done(DeltaStatus::Length)).unwrap();
        // Status only moves forward.
        acc.merge(done(DeltaStatus::Complete)).unwrap();
        let out = acc.to_message().unwrap();
        assert_eq!(out.message.status, MessageStatus::Length);
        assert!(!out.message.is_tool_call());
        assert_eq!(out.message.tool_calls[0].raw_arguments(), Some("{\"x\": "));
    }

    #[test]
    fn invalid_calls_are_reported_and_kept_incomplete() {
        let mut acc = MessageDelta::default();
        acc.merge_all([
            header(0, "a"),
            args(0, "{}"),
            header(1, "b"),
            args(1, "{bad"),
            done(DeltaStatus::Complete),
        ])
        .unwrap();
        let out = acc.to_message().unwrap();
        assert_eq!(out.invalid_tool_calls.len(), 1);
        assert_eq!(out.invalid_tool_calls[0].position, 1);
        assert_eq!(
            out.invalid_tool_calls[0].errors.to_string(),
            "arguments: invalid json"
        );
        assert_eq!(out.message.executable_tool_calls().count(), 1);
    }

    #[test]
    fn missing_call_id_is_reported() {
        let mut acc = MessageDelta::default();
        acc.merge_all([
            MessageDelta::tool_call_fragment(ToolCall {
                name: Some("x".into()),
                arguments: Some("{}".into()),
                ..Default::default()
            }),
            done(DeltaStatus::Complete),
        ])
        .unwrap();
        let out = acc.to_message().unwrap();
        assert_eq!(
            out.invalid_tool_calls[0].errors.to_string(),
            "call_id: can't be blank"
        );
    }

    #[test]
    fn argument_cap() {
        let mut acc = MessageDelta::default().with_max_argument_bytes(8);
        acc.merge(header(0, "a")).unwrap();
        acc.merge(args(0, "12345")).unwrap();
        assert_eq!(
            acc.merge(args(0, "6789")),
            Err(DeltaError::Merge(MergeError::ArgumentsTooLarge {
                limit: 8
            }))
        );
        assert_eq!(acc.tool_calls[0].raw_arguments(), Some("12345"));
    }

    #[test]
    fn cancel_keeps_partial_content() {
        let mut acc = MessageDelta::default();
        acc.merge(MessageDelta::content_fragment(0, ContentPart::text("par")))
            .unwrap();
        acc.merge_all([header(0, "a"), args(0, "{")]).unwrap();
        let m = acc.cancel(Some("connection reset".into()));
        assert_eq!(m.status, MessageStatus::Cancelled);
        assert_eq!(m.metadata["streaming_error"], "connection reset");
        assert!(!m.is_tool_call());
    }

    #[test]
    fn host_helpers() {
        let mut acc = MessageDelta::default();
        assert!(!acc.all_tools_terminal());
        acc.upsert_tool_call(ToolCall {
            call_id: Some("a".into()),
            name: Some("n".into()),
            ..Default::default()
        });
        acc.upsert_tool_call(ToolCall::default());
        assert_eq!(acc.tool_calls.len(), 1);
        acc.upsert_tool_call(ToolCall {
            call_id: Some("a".into()),
            arguments: Some("{}".into()),
            ..Default::default()
        });
        assert_eq!(acc.tool_calls[0].name.as_deref(), Some("n"));
        acc.set_tool_display_text("a", Some("N".into()));
        acc.set_tool_display_text("a", None);
        assert_eq!(acc.tool_calls[0].display_text.as_deref(), Some("N"));
        acc.set_tool_execution_status("a", "executing");
        assert!(!acc.all_tools_terminal());
        acc.set_tool_execution_status("a", "failed");
        assert!(acc.all_tools_terminal());
    }
}

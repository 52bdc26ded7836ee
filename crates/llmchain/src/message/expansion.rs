//! [`MessageExpansion`]: a tool result's request to insert messages into the conversation.

use super::chat::Message;
use super::content_part::{ContentPart, ContentType};

/// What a result keeps of its own content once its expansion messages are in.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub enum KeepContent {
    /// Keep everything.
    #[default]
    All,
    /// Keep only the text parts (e.g. the image moved into an inserted user message).
    TextOnly,
    /// Replace the content with these parts (e.g. "see the image below").
    Replace(Vec<ContentPart>),
}

/// A request to insert messages into the conversation before the next model call, and
/// to trim what the result keeps once they are in.
///
/// Applied by `Steps::expand_tool_results` only, so it does nothing under a mode that
/// does not compose that step. Virtual: never sent to a model and never persisted,
/// which is what keeps a restored conversation from inserting the same material twice.
///
/// ```
/// use llmchain::message::{ContentPart, Message, MessageExpansion};
/// // OpenAI Chat cannot take an image inside a tool result: send it as a user message.
/// let exp = MessageExpansion::insert(vec![Message::user(vec![ContentPart::image("iVBOR", "image/png")])])
///     .keep_text_only();
/// let mut content = vec![ContentPart::text("screenshot taken"), ContentPart::image("iVBOR", "image/png")];
/// exp.trim(&mut content);
/// assert_eq!(content, vec![ContentPart::text("screenshot taken")]);
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MessageExpansion {
    /// Inserted after the tool message, in order.
    pub messages: Vec<Message>,
    /// How to trim the result's content.
    pub keep: KeepContent,
}

impl MessageExpansion {
    /// Insert these messages; keep all content.
    pub fn insert(messages: Vec<Message>) -> Self {
        MessageExpansion {
            messages,
            keep: KeepContent::All,
        }
    }

    /// Keep only text parts of the result.
    #[must_use]
    pub fn keep_text_only(mut self) -> Self {
        self.keep = KeepContent::TextOnly;
        self
    }

    /// Replace the result's content.
    #[must_use]
    pub fn replace_content(mut self, parts: Vec<ContentPart>) -> Self {
        self.keep = KeepContent::Replace(parts);
        self
    }

    /// Applies the trim rule to a result's content.
    pub fn trim(&self, content: &mut Vec<ContentPart>) {
        match &self.keep {
            KeepContent::All => {}
            KeepContent::TextOnly => content.retain(|p| p.r#type == ContentType::Text),
            KeepContent::Replace(parts) => *content = parts.clone(),
        }
    }
}

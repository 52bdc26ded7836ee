//! [`ContentPart`]: one piece of multi-modal content (text, image, file, thinking).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What a [`ContentPart`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ContentType {
    /// Plain text.
    #[default]
    Text,
    /// Base64 image data; `options.media` holds the media type (e.g. `image/png`).
    Image,
    /// An image by URL.
    ImageUrl,
    /// Base64 file data; `options.media`, `options.filename`.
    File,
    /// A file by URL.
    FileUrl,
    /// Model reasoning; `options.signature` holds a provider signature to replay.
    Thinking,
    /// Anything a provider sent that has no mapping; kept so it survives a round trip.
    Unsupported,
}

/// One piece of content. Unlike the reference, `options` are persisted.
///
/// ```
/// use llmchain::message::ContentPart;
/// let img = ContentPart::image("iVBORw0KGgo=", "image/png");
/// assert_eq!(img.media(), Some("image/png"));
/// assert_eq!(ContentPart::text("hi").as_text(), Some("hi"));
/// ```
///
/// A stored part is read strictly: a key other than `type`, `content` and `options` is
/// an error naming its path (a part spelled the OpenAI or Anthropic way,
/// `{"type":"text","text":"hi"}`, would otherwise load as an empty part and lose its
/// text). Extra data goes in `options`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContentPart {
    /// What the part holds.
    #[serde(rename = "type", default)]
    pub r#type: ContentType,
    /// Text, base64 data or a URL, kept exactly as given (whitespace too).
    #[serde(default)]
    pub content: String,
    /// `media`, `detail`, `cache_control`, `signature`, `filename`, ... (see the storage
    /// format's list).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub options: Map<String, Value>,
}

impl ContentPart {
    /// A part of the given type.
    pub fn new(r#type: ContentType, content: impl Into<String>) -> Self {
        ContentPart {
            r#type,
            content: content.into(),
            options: Map::new(),
        }
    }

    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Self::new(ContentType::Text, text)
    }

    /// A base64 image with its media type (`image/png`, `image/jpeg`, ...).
    pub fn image(base64: impl Into<String>, media: impl Into<String>) -> Self {
        Self::new(ContentType::Image, base64).with_option("media", media.into())
    }

    /// An image by URL.
    pub fn image_url(url: impl Into<String>) -> Self {
        Self::new(ContentType::ImageUrl, url)
    }

    /// A base64 file with its media type.
    pub fn file(base64: impl Into<String>, media: impl Into<String>) -> Self {
        Self::new(ContentType::File, base64).with_option("media", media.into())
    }

    /// A file by URL.
    pub fn file_url(url: impl Into<String>) -> Self {
        Self::new(ContentType::FileUrl, url)
    }

    /// Reasoning text.
    pub fn thinking(text: impl Into<String>) -> Self {
        Self::new(ContentType::Thinking, text)
    }

    /// Adds an option.
    #[must_use]
    pub fn with_option(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.options.insert(key.into(), value.into());
        self
    }

    /// The text, for text parts.
    pub fn as_text(&self) -> Option<&str> {
        (self.r#type == ContentType::Text).then_some(self.content.as_str())
    }

    /// `options.media`, when present.
    pub fn media(&self) -> Option<&str> {
        self.options.get("media").and_then(Value::as_str)
    }

    /// `options.signature`, when present (Anthropic thinking signatures).
    pub fn signature(&self) -> Option<&str> {
        self.options.get("signature").and_then(Value::as_str)
    }

    /// True for image and image-URL parts.
    pub fn is_image(&self) -> bool {
        matches!(self.r#type, ContentType::Image | ContentType::ImageUrl)
    }

    /// Merges a streamed part into this one, as the reference's `merge_part`.
    ///
    /// Same type: the content is concatenated. Another type: `self` is unchanged and
    /// `false` is returned. Options are merged and string values under the same key are
    /// concatenated (how a thinking `signature` accumulates).
    pub fn merge_part(&mut self, part: ContentPart) -> bool {
        if part.r#type != self.r#type {
            return false;
        }
        self.content.push_str(&part.content);
        for (k, v) in part.options {
            match (self.options.get_mut(&k), v) {
                (Some(Value::String(mine)), Value::String(theirs)) => mine.push_str(&theirs),
                (_, v) => {
                    self.options.insert(k, v);
                }
            }
        }
        true
    }
}

impl From<&str> for ContentPart {
    fn from(s: &str) -> Self {
        ContentPart::text(s)
    }
}

impl From<String> for ContentPart {
    fn from(s: String) -> Self {
        ContentPart::text(s)
    }
}

/// Joins the parts of one type with `"\n\n"`; `None` when nothing is left.
///
/// ```
/// use llmchain::message::{parts_to_string, ContentPart, ContentType};
/// let parts = [ContentPart::text("a"), ContentPart::thinking("t"), ContentPart::text("b")];
/// assert_eq!(parts_to_string(&parts, ContentType::Text).as_deref(), Some("a\n\nb"));
/// assert_eq!(parts_to_string(&[], ContentType::Text), None);
/// ```
pub fn parts_to_string(parts: &[ContentPart], r#type: ContentType) -> Option<String> {
    let mut out = String::new();
    for p in parts
        .iter()
        .filter(|p| p.r#type == r#type && !p.content.is_empty())
    {
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(&p.content);
    }
    (!out.is_empty()).then_some(out)
}

/// Content given as text or as parts; text becomes one text part.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Content {
    /// Text.
    Text(String),
    /// Parts.
    Parts(Vec<ContentPart>),
}

impl Content {
    /// The parts (text becomes one text part; empty text none).
    pub fn into_parts(self) -> Vec<ContentPart> {
        match self {
            Content::Text(t) if t.is_empty() => Vec::new(),
            Content::Text(t) => vec![ContentPart::text(t)],
            Content::Parts(p) => p,
        }
    }
}

impl From<&str> for Content {
    fn from(s: &str) -> Self {
        Content::Text(s.to_owned())
    }
}
impl From<String> for Content {
    fn from(s: String) -> Self {
        Content::Text(s)
    }
}
impl From<Vec<ContentPart>> for Content {
    fn from(p: Vec<ContentPart>) -> Self {
        Content::Parts(p)
    }
}
impl From<ContentPart> for Content {
    fn from(p: ContentPart) -> Self {
        Content::Parts(vec![p])
    }
}

/// Serde helper: content as a list of parts, also accepting a bare string (or `null`)
/// on input. A hand-written visitor rather than an untagged enum, so an error inside a
/// part keeps its path (`content[2].type`).
pub(crate) mod parts_or_text {
    use std::fmt;

    use super::ContentPart;
    use serde::Deserialize;
    use serde::de::{self, Deserializer, SeqAccess, Visitor};

    struct PartsVisitor;

    impl<'de> Visitor<'de> for PartsVisitor {
        type Value = Vec<ContentPart>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("content as a string or a list of content parts")
        }

        fn visit_str<E: de::Error>(self, t: &str) -> Result<Self::Value, E> {
            Ok(if t.is_empty() {
                Vec::new()
            } else {
                vec![ContentPart::text(t)]
            })
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(Vec::new())
        }

        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(Vec::new())
        }

        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(PartsVisitor)
        }

        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
            Vec::<ContentPart>::deserialize(de::value::SeqAccessDeserializer::new(seq))
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<ContentPart>, D::Error> {
        d.deserialize_any(PartsVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn constructors() {
        assert_eq!(ContentPart::text("x").r#type, ContentType::Text);
        assert_eq!(ContentPart::image_url("u").r#type, ContentType::ImageUrl);
        assert_eq!(
            ContentPart::file("d", "application/pdf").media(),
            Some("application/pdf")
        );
        assert_eq!(ContentPart::file_url("u").r#type, ContentType::FileUrl);
        assert_eq!(ContentPart::thinking("t").as_text(), None);
        assert!(ContentPart::image("d", "image/png").is_image());
    }

    #[test]
    fn merge_part_rules() {
        let mut a = ContentPart::text("Hello");
        assert!(a.merge_part(ContentPart::text(" world")));
        assert_eq!(a.content, "Hello world");
        assert!(!a.merge_part(ContentPart::thinking("x")));
        assert_eq!(a.content, "Hello world");
        let mut t = ContentPart::thinking("a").with_option("signature", "ab");
        t.merge_part(ContentPart::thinking("b").with_option("signature", "cd"));
        assert_eq!(t.signature(), Some("abcd"));
        assert_eq!(t.content, "ab");
        // Whitespace is kept.
        let mut w = ContentPart::text(" ");
        w.merge_part(ContentPart::text("  "));
        assert_eq!(w.content, "   ");
    }

    #[test]
    fn serde_persists_options() {
        let p = ContentPart::image("abc", "image/png").with_option("detail", "low");
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(
            v,
            json!({"type": "image", "content": "abc", "options": {"media": "image/png", "detail": "low"}})
        );
        assert_eq!(serde_json::from_value::<ContentPart>(v).unwrap(), p);
        let err = serde_json::from_value::<ContentPart>(json!({"type": "video"})).unwrap_err();
        assert!(err.to_string().contains("unknown variant"), "{err}");
    }

    #[test]
    fn content_into_parts() {
        assert!(Content::from("").into_parts().is_empty());
        assert_eq!(
            Content::from("a").into_parts(),
            vec![ContentPart::text("a")]
        );
        assert_eq!(
            Content::from(ContentPart::image_url("u"))
                .into_parts()
                .len(),
            1
        );
    }
}

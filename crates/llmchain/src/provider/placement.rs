//! Where each kind of content goes on each wire: the classification and the stand-ins
//! every encoder shares (the table is `docs/content-placement.md`).
//!
//! An encoder sends a part as its own block where the API takes it there, moves it to a
//! following user message where the API takes it only there, and otherwise sends text
//! in its place: a text file's contents, or a placeholder that names the kind, the
//! media type and the size. Nothing is dropped without a word, and nothing goes in a
//! form the API rejects.

use std::borrow::Cow;

use base64::Engine as _;
use serde_json::Value;

use crate::message::{ContentPart, ContentType};

/// What a part is, as the wires see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Text,
    /// A base64 image.
    Image,
    /// An image by URL.
    ImageUrl,
    /// A base64 PDF.
    Pdf,
    /// A base64 file of a text media type (`text/*`, JSON, XML, YAML, ...).
    TextFile,
    /// Any other base64 file.
    Binary,
    /// A file by URL.
    FileUrl,
    Thinking,
    /// A provider's block this library does not read ([`ContentType::Unsupported`]).
    Opaque,
}

/// The kind of `p`.
pub(crate) fn kind(p: &ContentPart) -> Kind {
    match p.r#type {
        ContentType::Text => Kind::Text,
        ContentType::Image => Kind::Image,
        ContentType::ImageUrl => Kind::ImageUrl,
        ContentType::File => match media(p) {
            Some("application/pdf") => Kind::Pdf,
            Some(m) if is_text_media(m) => Kind::TextFile,
            _ => Kind::Binary,
        },
        ContentType::FileUrl => Kind::FileUrl,
        ContentType::Thinking => Kind::Thinking,
        ContentType::Unsupported => Kind::Opaque,
    }
}

/// The media type of a base64 part: `options.media`, else its `data:` URL's.
pub(crate) fn media(p: &ContentPart) -> Option<&str> {
    p.media().filter(|m| !m.is_empty()).or_else(|| {
        let rest = p.content.strip_prefix("data:")?;
        let (m, _) = rest.split_once([';', ','])?;
        (!m.is_empty()).then_some(m)
    })
}

/// The base64 payload of a part (its content without a `data:…,` prefix).
pub(crate) fn base64_data(p: &ContentPart) -> &str {
    match p.content.strip_prefix("data:") {
        Some(rest) => rest.split_once(',').map_or("", |(_, d)| d),
        None => &p.content,
    }
}

/// True for media types whose bytes are text.
pub(crate) fn is_text_media(m: &str) -> bool {
    let m = m.split(';').next().unwrap_or(m).trim().to_ascii_lowercase();
    m.starts_with("text/")
        || m.ends_with("+json")
        || m.ends_with("+xml")
        || matches!(
            m.as_str(),
            "application/json"
                | "application/xml"
                | "application/yaml"
                | "application/x-yaml"
                | "application/toml"
                | "application/javascript"
                | "application/x-sh"
                | "application/sql"
                | "application/x-ndjson"
        )
}

/// True when `p` is an image whose media type is one of `accepted`.
pub(crate) fn image_media_in(p: &ContentPart, accepted: &[&str]) -> bool {
    media(p).is_some_and(|m| accepted.contains(&m))
}

/// A text file's text: its base64 decoded, when that is UTF-8.
pub(crate) fn file_text(p: &ContentPart) -> Option<String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(base64_data(p).trim())
        .ok()?;
    String::from_utf8(bytes).ok()
}

/// The size of the bytes a base64 text holds (without decoding it).
fn decoded_size(b64: &str) -> usize {
    let b = b64.trim().trim_end_matches('=');
    b.len() / 4 * 3 + (b.len() % 4).saturating_sub(1)
}

fn size_text(bytes: usize) -> String {
    const KIB: f64 = 1024.0;
    match bytes {
        0..1024 => format!("{bytes} bytes"),
        1024..1_048_576 => format!("{:.1} KiB ({bytes} bytes)", bytes as f64 / KIB),
        _ => format!("{:.1} MiB ({bytes} bytes)", bytes as f64 / KIB / KIB),
    }
}

/// The name a part goes by: its `filename`, else its `uri`.
fn name(p: &ContentPart) -> Option<&str> {
    ["filename", "uri"]
        .iter()
        .find_map(|k| p.options.get(*k).and_then(Value::as_str))
        .filter(|n| !n.is_empty())
}

/// The text sent in the place of a part `wire` does not take: what it was, its media
/// type, its size (or its URL) and its name, so the model (and a person reading the
/// request) knows something was there.
pub(crate) fn placeholder(p: &ContentPart, wire: &str) -> String {
    let named = name(p).map(|n| format!(", {n}")).unwrap_or_default();
    match kind(p) {
        Kind::ImageUrl | Kind::FileUrl => {
            let what = if kind(p) == Kind::ImageUrl {
                "image"
            } else {
                "file"
            };
            let m = media(p).map(|m| format!(" ({m})")).unwrap_or_default();
            format!(
                "[{what} link not sent: {}{m}{named}. {wire} does not take {what}s by URL here.]",
                p.content
            )
        }
        Kind::Opaque => {
            let from = p
                .options
                .get("provider")
                .and_then(Value::as_str)
                .unwrap_or("another provider");
            format!("[content not sent: a block from {from} that {wire} does not read]")
        }
        k => {
            let what = if k == Kind::Image { "image" } else { "file" };
            let m = media(p).unwrap_or("unknown media type");
            format!(
                "[{what} not sent: {m}, {}{named}. {wire} does not take this kind of {what} here.]",
                size_text(decoded_size(base64_data(p)))
            )
        }
    }
}

/// A part as text, for a place that takes only text: a text part's text, a text
/// file's contents, or a [`placeholder`]; `None` for reasoning (never sent as content).
pub(crate) fn as_text<'a>(p: &'a ContentPart, wire: &str) -> Option<Cow<'a, str>> {
    match kind(p) {
        Kind::Text => Some(Cow::Borrowed(&p.content)),
        Kind::Thinking => None,
        // Under its name, when it has one, so the model knows what it reads.
        Kind::TextFile => Some(Cow::Owned(match (file_text(p), name(p)) {
            (Some(text), Some(n)) => format!("{n}:\n{text}"),
            (Some(text), None) => text,
            (None, _) => placeholder(p, wire),
        })),
        _ => Some(Cow::Owned(placeholder(p, wire))),
    }
}

/// Text parts and the text standing in for `unsent` parts, in order, joined by a blank
/// line: what a one-string wire gets.
pub(crate) fn joined_as_text<'a>(
    parts: &'a [ContentPart],
    wire: &str,
    unsent: impl Fn(&ContentPart) -> bool,
) -> Cow<'a, str> {
    let mut texts = parts
        .iter()
        .filter(|p| p.r#type == ContentType::Text || unsent(p))
        .filter_map(|p| as_text(p, wire))
        .filter(|t| !t.is_empty());
    let Some(first) = texts.next() else {
        return Cow::Borrowed("");
    };
    let Some(second) = texts.next() else {
        return first;
    };
    let mut out = format!("{first}\n\n{second}");
    for t in texts {
        out.push_str("\n\n");
        out.push_str(&t);
    }
    Cow::Owned(out)
}

/// What `codec` sends in place of `part` given in a user message, when it does not send
/// it as its own content (nor, for a text file, as its text): the placeholder text, which
/// names the kind, the media type and the size. `None` when it is sent. An encoding error
/// (a part no form of which the wire can carry) is returned as its message.
///
/// For a caller that would rather refuse an attachment than have the model read that it
/// was left out (the CLI's `-a`).
pub fn unsent_in_user_message(
    codec: &dyn crate::provider::Codec,
    part: &ContentPart,
) -> Option<String> {
    let mut conversation = crate::conversation::Conversation::new();
    let mut message = crate::message::Message::user("What is this?");
    message.content.push(part.clone());
    conversation.messages.push(message);
    let opts = crate::provider::RequestOptions {
        model: "m".into(),
        ..Default::default()
    };
    let body = match codec.encode(&conversation, &opts) {
        Ok(b) => b,
        Err(e) => return Some(e.to_string()),
    };
    let value: Value = serde_json::from_slice(&body).ok()?;
    fn find(v: &Value) -> Option<String> {
        match v {
            Value::String(s) if s.contains(" not sent: ") => Some(s.clone()),
            Value::Array(a) => a.iter().find_map(find),
            Value::Object(o) => o.values().find_map(find),
            _ => None,
        }
    }
    find(&value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_media_and_sizes() {
        assert_eq!(
            kind(&ContentPart::file("JVBERi0=", "application/pdf")),
            Kind::Pdf
        );
        assert_eq!(
            kind(&ContentPart::file("aGk=", "text/plain")),
            Kind::TextFile
        );
        assert_eq!(
            kind(&ContentPart::file("aGk=", "application/json")),
            Kind::TextFile
        );
        assert_eq!(
            kind(&ContentPart::file("H4sI", "application/gzip")),
            Kind::Binary
        );
        assert_eq!(kind(&ContentPart::file("H4sI", "")), Kind::Binary);
        let data_url = ContentPart::new(ContentType::File, "data:application/pdf;base64,JVBERi0=");
        assert_eq!(kind(&data_url), Kind::Pdf);
        assert_eq!(base64_data(&data_url), "JVBERi0=");
        assert_eq!(decoded_size("aGk="), 2);
        assert_eq!(decoded_size("aGVsbG8="), 5);
        assert_eq!(decoded_size("aGVsbG8h"), 6);
        assert_eq!(
            file_text(&ContentPart::file("aGVsbG8=", "text/plain")).as_deref(),
            Some("hello")
        );
        assert_eq!(
            file_text(&ContentPart::file("//79", "text/plain")),
            None,
            "not UTF-8"
        );
        assert_eq!(size_text(1234), "1.2 KiB (1234 bytes)");
    }

    #[test]
    fn placeholders_name_the_kind_media_size_and_name() {
        let gz = ContentPart::file("H4sIAAAAAAAA", "application/gzip")
            .with_option("uri", "file:///a.gz");
        assert_eq!(
            placeholder(&gz, "OpenAI Chat"),
            "[file not sent: application/gzip, 9 bytes, file:///a.gz. OpenAI Chat does not take this kind of file here.]"
        );
        let svg = ContentPart::image("PHN2Zz4=", "image/svg+xml");
        assert!(
            placeholder(&svg, "Anthropic").starts_with("[image not sent: image/svg+xml, 5 bytes.")
        );
        let link = ContentPart::file_url("https://x.test/a.zip");
        assert_eq!(
            placeholder(&link, "Gemini"),
            "[file link not sent: https://x.test/a.zip. Gemini does not take files by URL here.]"
        );
        // A text file goes as its text; one that is not UTF-8 as a placeholder.
        assert_eq!(
            as_text(&ContentPart::file("aGk=", "text/plain"), "W").as_deref(),
            Some("hi")
        );
        assert!(
            as_text(&ContentPart::file("//79", "text/plain"), "W")
                .unwrap()
                .starts_with("[file not sent")
        );
        assert_eq!(as_text(&ContentPart::thinking("t"), "W"), None);
    }
}

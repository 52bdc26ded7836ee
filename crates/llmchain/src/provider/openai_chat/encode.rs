//! OpenAI Chat Completions request encoder: tools, assistant calls with string
//! arguments, and one `role: "tool"` message per call id right after the assistant
//! message, none missing (<https://platform.openai.com/docs/api-reference/chat/create>).
//!
//! Serialises borrowed structs straight to bytes (no `Value` tree): a long conversation
//! costs one pass over its strings.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::{Map, Value};

use crate::conversation::{
    Conversation, ToolChoice, ToolChoiceMode, ToolDefinition, answered_ids, sendable,
};
use crate::message::{
    Arguments, ContentPart, ContentType, Message, Role, ToolCall, ToolResult, parts_to_string,
};
use crate::provider::encoding::{body_size_hint, listed_tools, openai_answer, to_body};
use crate::provider::placement::{self, Kind};
use crate::provider::{EncodeError, RequestOptions};

use super::NAME as FORMAT;

/// Encodes a Chat Completions request body.
pub fn encode(conv: &Conversation, opts: &RequestOptions) -> Result<Vec<u8>, EncodeError> {
    let answered = answered_ids(conv);
    let mut messages = Vec::with_capacity(conv.messages.len() + 1);
    if let Some(s) = conv.system.as_deref().filter(|s| !s.is_empty()) {
        messages.push(WireMsg::text("system", Cow::Borrowed(s)));
    }
    for m in &conv.messages {
        push_message(m, &answered, &mut messages);
    }
    let tools: Vec<_> = listed_tools(conv).map(WireTool::new).collect();
    let has_tools = !tools.is_empty();
    let body = Body {
        model: &opts.model,
        messages,
        tool_choice: ChatToolChoice(&conv.tool_choice),
        tools,
        parallel_tool_calls: conv.parallel_tool_calls.filter(|_| has_tools),
        stream: opts.stream.then_some(true),
        stream_options: opts.stream.then_some(StreamOptions {
            include_usage: true,
        }),
        max_tokens: opts.max_tokens,
        temperature: opts.temperature,
        response_format: conv
            .response_format
            .as_ref()
            .map(|f| serde_json::json!({"type": "json_schema", "json_schema": openai_answer(f)})),
    };
    // Extra fields are merged by the one rule every encoder follows: a key given there
    // replaces the typed one.
    to_body(FORMAT, &body, opts, body_size_hint(conv))
}

fn push_message<'a>(m: &'a Message, answered: &'a HashSet<&str>, out: &mut Vec<WireMsg<'a>>) {
    match m.role {
        Role::System => out.push(WireMsg::text("system", joined_text(&m.content))),
        Role::User => out.push(WireMsg {
            content: user_content(&m.content),
            name: m.name.as_deref(),
            ..WireMsg::new("user")
        }),
        Role::Assistant => {
            let calls: Vec<_> = sendable(m, answered).map(WireToolCall).collect();
            let text = joined_text(&m.content);
            if calls.is_empty() && text.is_empty() {
                return;
            }
            // DeepSeek wants its `reasoning_content` back with tool calls; reasoning
            // carrying another provider's state (signatures, item ids) is not sent.
            let reasoning: String = if calls.is_empty() {
                String::new()
            } else {
                m.content
                    .iter()
                    .filter(|p| {
                        p.r#type == ContentType::Thinking
                            && !p.options.contains_key("signature")
                            && !p.options.contains_key("item_id")
                            && !p.options.contains_key("redacted")
                    })
                    .map(|p| p.content.as_str())
                    .collect()
            };
            out.push(WireMsg {
                content: if text.is_empty() {
                    WireContent::Null
                } else {
                    WireContent::Text(text)
                },
                reasoning_content: (!reasoning.is_empty()).then_some(reasoning),
                tool_calls: (!calls.is_empty()).then_some(calls),
                ..WireMsg::new("assistant")
            });
        }
        Role::Tool => {
            // One `tool` message per result (text only: what it cannot take goes as
            // text), then the results' images and PDFs in one user message after all
            // of them.
            let mut moved: Vec<WirePart<'a>> = Vec::new();
            for r in &m.tool_results {
                out.push(WireMsg {
                    content: WireContent::Text(result_text(r, WIRE, |p| !chat_native(p))),
                    tool_call_id: Some(&r.tool_call_id),
                    ..WireMsg::new("tool")
                });
                let native: Vec<&ContentPart> = r
                    .content
                    .iter()
                    .filter(|p| p.r#type != ContentType::Text && chat_native(p))
                    .collect();
                if native.is_empty() {
                    continue;
                }
                let what = if native.iter().all(|p| p.is_image()) {
                    "Image"
                } else {
                    "Content"
                };
                moved.push(WirePart::Text {
                    text: Cow::Owned(format!("{what} returned by tool call {}:", r.tool_call_id)),
                });
                moved.extend(native.into_iter().filter_map(WirePart::from_part));
            }
            if !moved.is_empty() {
                out.push(WireMsg {
                    content: WireContent::Parts(moved),
                    ..WireMsg::new("user")
                });
            }
        }
    }
}

/// The wire's name in placeholders.
const WIRE: &str = "OpenAI Chat";

/// The image media types OpenAI takes.
pub(crate) const OPENAI_IMAGES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// True for a part OpenAI Chat takes as its own part of a user message: an image it
/// reads (by URL or as base64 of a media type it takes), or a base64 PDF.
fn chat_native(p: &ContentPart) -> bool {
    match placement::kind(p) {
        Kind::Text | Kind::ImageUrl | Kind::Pdf => true,
        Kind::Image => placement::image_media_in(p, &OPENAI_IMAGES),
        _ => false,
    }
}

/// A result's text as OpenAI-style wires see it: its text parts, with the text that
/// stands in for the parts `unsent` picks (a text file's contents, a placeholder),
/// and a failure said in words (no error flag exists).
pub(crate) fn result_text<'a>(
    r: &'a ToolResult,
    wire: &str,
    unsent: impl Fn(&ContentPart) -> bool,
) -> Cow<'a, str> {
    let text = placement::joined_as_text(&r.content, wire, unsent);
    if r.is_error() {
        if text.is_empty() {
            Cow::Borrowed("Error: the tool call failed.")
        } else {
            Cow::Owned(format!("Error: {text}"))
        }
    } else {
        text
    }
}

/// Text parts joined by a blank line, as [`parts_to_string`] joins them: several text
/// blocks (an MCP result's, Anthropic's) must not run together on a wire that takes one
/// string.
pub(crate) fn joined_text(parts: &[ContentPart]) -> Cow<'_, str> {
    let mut texts = parts
        .iter()
        .filter(|p| p.r#type == ContentType::Text && !p.content.is_empty());
    match (texts.next(), texts.next()) {
        (None, _) => Cow::Borrowed(""),
        (Some(one), None) => Cow::Borrowed(one.content.as_str()),
        _ => Cow::Owned(parts_to_string(parts, ContentType::Text).unwrap_or_default()),
    }
}

/// A user message's content: text as one string; otherwise each part as its own part
/// where OpenAI Chat takes it, and as text where it does not.
fn user_content(parts: &[ContentPart]) -> WireContent<'_> {
    if parts.iter().all(|p| p.r#type == ContentType::Text) {
        return WireContent::Text(joined_text(parts));
    }
    WireContent::Parts(
        parts
            .iter()
            .filter_map(|p| {
                if chat_native(p) {
                    WirePart::from_part(p)
                } else {
                    placement::as_text(p, WIRE).map(|text| WirePart::Text { text })
                }
            })
            .collect(),
    )
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<WireMsg<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "ChatToolChoice::is_unset")]
    tool_choice: ChatToolChoice<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    /// A typed answer's schema.
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<serde_json::Value>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct WireMsg<'a> {
    role: &'static str,
    content: WireContent<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<Vec<WireToolCall<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
}

impl<'a> WireMsg<'a> {
    fn new(role: &'static str) -> Self {
        WireMsg {
            role,
            content: WireContent::Null,
            name: None,
            reasoning_content: None,
            tool_calls: None,
            tool_call_id: None,
        }
    }
    fn text(role: &'static str, text: Cow<'a, str>) -> Self {
        WireMsg {
            content: WireContent::Text(text),
            ..WireMsg::new(role)
        }
    }
}

enum WireContent<'a> {
    Null,
    Text(Cow<'a, str>),
    Parts(Vec<WirePart<'a>>),
}

impl Serialize for WireContent<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            WireContent::Null => s.serialize_unit(),
            WireContent::Text(t) => s.serialize_str(t),
            WireContent::Parts(p) => p.serialize(s),
        }
    }
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WirePart<'a> {
    Text { text: Cow<'a, str> },
    ImageUrl { image_url: ImageUrl<'a> },
    File { file: WireFile<'a> },
}

#[derive(Serialize)]
struct ImageUrl<'a> {
    url: UrlOrData<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'a str>,
}

#[derive(Serialize)]
struct WireFile<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    filename: Option<&'a str>,
    file_data: UrlOrData<'a>,
}

/// A URL, or base64 data written as a `data:` URL without building the string first.
pub(crate) enum UrlOrData<'a> {
    /// A URL as given.
    Url(&'a str),
    /// `data:{media};base64,{data}`.
    Data {
        /// The media type.
        media: &'a str,
        /// Base64 data.
        data: &'a str,
    },
}

impl Serialize for UrlOrData<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            UrlOrData::Url(u) => s.serialize_str(u),
            UrlOrData::Data { .. } => s.collect_str(self),
        }
    }
}

impl fmt::Display for UrlOrData<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UrlOrData::Url(u) => f.write_str(u),
            UrlOrData::Data { media, data } => write!(f, "data:{media};base64,{data}"),
        }
    }
}

/// The URL (or data URL) of an image or file part; `None` for other parts.
pub(crate) fn part_url(p: &ContentPart) -> Option<UrlOrData<'_>> {
    match p.r#type {
        ContentType::Image | ContentType::File => {
            if p.content.starts_with("data:") {
                return Some(UrlOrData::Url(&p.content));
            }
            let default = if p.r#type == ContentType::Image {
                "image/png"
            } else {
                "application/octet-stream"
            };
            Some(UrlOrData::Data {
                media: p.media().unwrap_or(default),
                data: &p.content,
            })
        }
        ContentType::ImageUrl | ContentType::FileUrl => Some(UrlOrData::Url(&p.content)),
        _ => None,
    }
}

impl<'a> WirePart<'a> {
    fn from_part(p: &'a ContentPart) -> Option<Self> {
        let detail = p.options.get("detail").and_then(Value::as_str);
        match p.r#type {
            ContentType::Text => Some(WirePart::Text {
                text: Cow::Borrowed(&p.content),
            }),
            ContentType::Image | ContentType::ImageUrl => Some(WirePart::ImageUrl {
                image_url: ImageUrl {
                    url: part_url(p)?,
                    detail,
                },
            }),
            // A base64 PDF (the only file OpenAI Chat takes); OpenAI wants a name.
            ContentType::File | ContentType::FileUrl => Some(WirePart::File {
                file: WireFile {
                    filename: Some(
                        p.options
                            .get("filename")
                            .and_then(Value::as_str)
                            .unwrap_or("document.pdf"),
                    ),
                    file_data: part_url(p)?,
                },
            }),
            ContentType::Thinking | ContentType::Unsupported => None,
        }
    }
}

struct WireToolCall<'a>(&'a ToolCall);

impl Serialize for WireToolCall<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let c = self.0;
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("id", c.call_id.as_deref().unwrap_or(""))?;
        m.serialize_entry("type", "function")?;
        m.serialize_entry(
            "function",
            &WireFunction {
                name: c.name.as_deref().unwrap_or(""),
                arguments: ArgumentsText(c),
            },
        )?;
        m.end()
    }
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    arguments: ArgumentsText<'a>,
}

/// A call's arguments as a JSON string holding an object: never `"null"`, never
/// double-encoded. Raw text that is a valid object is sent as it is; anything else
/// becomes `arguments_as_map` (`{}` for invalid text).
pub(crate) struct ArgumentsText<'a>(pub(crate) &'a ToolCall);

impl Serialize for ArgumentsText<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.0.arguments {
            None => s.serialize_str("{}"),
            Some(Arguments::Object(m)) => serialize_object_as_string(m, s),
            Some(Arguments::Raw(t)) => {
                if is_object_text(t) {
                    s.serialize_str(t.trim())
                } else {
                    serialize_object_as_string(&self.0.arguments_as_map(), s)
                }
            }
        }
    }
}

/// Writes `m` as compact JSON into a reused per-thread buffer, then serialises that text
/// as a JSON string (one escaping pass, no per-call allocation).
fn serialize_object_as_string<S: Serializer>(
    m: &Map<String, Value>,
    s: S,
) -> Result<S::Ok, S::Error> {
    thread_local! {
        static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    BUF.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => {
            buf.clear();
            serde_json::to_writer(&mut *buf, m).map_err(serde::ser::Error::custom)?;
            // serde_json writes valid UTF-8.
            let text = std::str::from_utf8(&buf).map_err(serde::ser::Error::custom)?;
            s.serialize_str(text)
        }
        // Re-entered (cannot happen for JSON maps): fall back to a fresh buffer.
        Err(_) => s.collect_str(&JsonText(m)),
    })
}

/// True when `t` is one valid JSON object.
pub(crate) fn is_object_text(t: &str) -> bool {
    t.trim_start().starts_with('{') && serde_json::from_str::<serde::de::IgnoredAny>(t).is_ok()
}

/// Displays a map as compact JSON (written straight into the escaping serializer).
pub(crate) struct JsonText<'a>(pub(crate) &'a Map<String, Value>);

impl fmt::Display for JsonText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct W<'a, 'b>(&'a mut fmt::Formatter<'b>);
        impl std::io::Write for W<'_, '_> {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                // serde_json writes whole UTF-8 sequences per call.
                let s = std::str::from_utf8(buf).map_err(std::io::Error::other)?;
                self.0.write_str(s).map_err(std::io::Error::other)?;
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        serde_json::to_writer(W(f), self.0).map_err(|_| fmt::Error)
    }
}

struct WireTool<'a> {
    def: &'a ToolDefinition,
    parameters: Cow<'a, Value>,
}

impl<'a> WireTool<'a> {
    fn new(def: &'a ToolDefinition) -> Self {
        WireTool {
            def,
            parameters: tool_parameters(def),
        }
    }
}

/// The parameters schema to send: the strict rewrite for strict tools.
pub(crate) fn tool_parameters(def: &ToolDefinition) -> Cow<'_, Value> {
    if def.strict {
        Cow::Owned(strict_schema(&def.parameters_schema))
    } else {
        Cow::Borrowed(&def.parameters_schema)
    }
}

impl Serialize for WireTool<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct F<'a> {
            name: &'a str,
            #[serde(skip_serializing_if = "str::is_empty")]
            description: &'a str,
            parameters: &'a Value,
            #[serde(skip_serializing_if = "std::ops::Not::not")]
            strict: bool,
        }
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("type", "function")?;
        m.serialize_entry(
            "function",
            &F {
                name: &self.def.name,
                description: &self.def.description,
                parameters: &self.parameters,
                strict: self.def.strict,
            },
        )?;
        m.end()
    }
}

/// OpenAI's strict-mode schema rewrite: every object gets `additionalProperties: false`
/// and lists all its properties in `required`; a property that was optional becomes
/// nullable so the model can still leave it out in meaning.
pub fn strict_schema(schema: &Value) -> Value {
    let mut v = schema.clone();
    rewrite_strict(&mut v);
    v
}

fn rewrite_strict(v: &mut Value) {
    match v {
        Value::Object(o) => {
            let is_object = o.get("type").and_then(Value::as_str) == Some("object")
                || o.contains_key("properties");
            if is_object {
                let required: HashSet<String> = o
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|x| x.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
                if let Some(Value::Object(props)) = o.get_mut("properties") {
                    let mut all = Vec::with_capacity(props.len());
                    for (k, p) in props.iter_mut() {
                        all.push(Value::String(k.clone()));
                        if !required.contains(k) {
                            make_nullable(p);
                        }
                    }
                    o.insert("required".into(), Value::Array(all));
                } else {
                    o.entry("properties")
                        .or_insert_with(|| Value::Object(Map::new()));
                    o.insert("required".into(), Value::Array(Vec::new()));
                }
                o.insert("additionalProperties".into(), Value::Bool(false));
            }
            for (_, child) in o.iter_mut() {
                rewrite_strict(child);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(rewrite_strict),
        _ => {}
    }
}

fn make_nullable(p: &mut Value) {
    let Value::Object(o) = p else { return };
    match o.get_mut("type") {
        Some(Value::String(t)) if t != "null" => {
            let t = std::mem::take(t);
            o.insert(
                "type".into(),
                Value::Array(vec![Value::String(t), Value::String("null".into())]),
            );
        }
        Some(Value::Array(a)) if !a.iter().any(|x| x == "null") => {
            a.push(Value::String("null".into()));
        }
        _ => {}
    }
}

struct ChatToolChoice<'a>(&'a ToolChoice);

impl ChatToolChoice<'_> {
    fn is_unset(&self) -> bool {
        self.0.is_unset()
    }
}

impl Serialize for ChatToolChoice<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            ToolChoice::Mode(m) => s.serialize_str(mode_str(*m)),
            ToolChoice::Tool { name } => {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("type", "function")?;
                let mut f = Map::new();
                f.insert("name".into(), Value::String(name.clone()));
                m.serialize_entry("function", &f)?;
                m.end()
            }
            ToolChoice::Unset => s.serialize_str("auto"),
        }
    }
}

/// `auto`, `none` or `required`.
pub(crate) fn mode_str(m: ToolChoiceMode) -> &'static str {
    match m {
        ToolChoiceMode::Auto => "auto",
        ToolChoiceMode::None => "none",
        ToolChoiceMode::Required => "required",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strict_rewrite() {
        let s = json!({"type":"object","properties":{"a":{"type":"string"},"b":{"type":"object","properties":{"c":{"type":"integer"}},"required":["c"]}},"required":["a"]});
        assert_eq!(
            strict_schema(&s),
            json!({"type":"object","properties":{"a":{"type":"string"},"b":{"type":["object","null"],"properties":{"c":{"type":"integer"}},"required":["c"],"additionalProperties":false}},"required":["a","b"],"additionalProperties":false})
        );
    }

    #[test]
    fn arguments_text_never_null_or_double_encoded() {
        let mk = |a: Option<Arguments>| ToolCall {
            arguments: a,
            ..Default::default()
        };
        let enc = |c: &ToolCall| serde_json::to_string(&ArgumentsText(c)).unwrap();
        assert_eq!(enc(&mk(None)), r#""{}""#);
        assert_eq!(enc(&mk(Some("".into()))), r#""{}""#);
        assert_eq!(enc(&mk(Some("not json".into()))), r#""{}""#);
        assert_eq!(enc(&mk(Some("[1]".into()))), r#""{}""#);
        assert_eq!(enc(&mk(Some(r#" {"a":1} "#.into()))), r#""{\"a\":1}""#);
        let obj = json!({"city":"Paris","n":"é\"x"})
            .as_object()
            .unwrap()
            .clone();
        let text = enc(&mk(Some(Arguments::Object(obj.clone()))));
        let inner: String = serde_json::from_str(&text).unwrap();
        assert_eq!(
            serde_json::from_str::<Map<String, Value>>(&inner).unwrap(),
            obj
        );
    }
}

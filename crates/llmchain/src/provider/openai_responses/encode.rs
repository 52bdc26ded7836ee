//! OpenAI Responses request encoder: tools as `function` tools, calls as
//! `function_call` items, results as `function_call_output` items answering their
//! `call_id` (<https://platform.openai.com/docs/api-reference/responses/create>).

use std::borrow::Cow;
use std::collections::HashSet;

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::Value;

use crate::conversation::{Conversation, ToolChoice, ToolDefinition, answered_ids, sendable};
use crate::message::{ContentPart, ContentType, Message, Role, ToolCall, ToolResult};
use crate::provider::encoding::{body_size_hint, listed_tools, openai_answer, to_body};
use crate::provider::openai_chat::{
    ArgumentsText, OPENAI_IMAGES, UrlOrData, joined_text, mode_str, part_url, result_text,
    tool_parameters,
};
use crate::provider::placement::{self, Kind};
use crate::provider::{EncodeError, RequestOptions};

use super::NAME as FORMAT;

/// The wire's name in placeholders.
const WIRE: &str = "OpenAI Responses";

/// True for a part Responses takes as its own input part (in a user message or a
/// function call's output): an image it reads, a PDF, or a file by URL that is a PDF
/// (or says no media type).
fn native(p: &ContentPart) -> bool {
    match placement::kind(p) {
        Kind::Text | Kind::ImageUrl | Kind::Pdf => true,
        Kind::Image => placement::image_media_in(p, &OPENAI_IMAGES),
        Kind::FileUrl => matches!(placement::media(p), None | Some("application/pdf")),
        _ => false,
    }
}

/// A part as an input part: itself where Responses takes it, as text where it does not.
fn input_part(p: &ContentPart) -> Option<InputPart<'_>> {
    if native(p) {
        InputPart::from_part(p)
    } else {
        placement::as_text(p, WIRE).map(InputPart::Text)
    }
}

/// Encodes a Responses request body.
pub fn encode(conv: &Conversation, opts: &RequestOptions) -> Result<Vec<u8>, EncodeError> {
    let answered = answered_ids(conv);
    let mut input = Vec::with_capacity(conv.messages.len() * 2);
    for m in &conv.messages {
        push_items(m, &answered, &mut input);
    }
    let tools: Vec<_> = listed_tools(conv)
        .map(|def| WireTool {
            def,
            parameters: tool_parameters(def),
        })
        .collect();
    let has_tools = !tools.is_empty();
    let body = Body {
        model: &opts.model,
        instructions: conv.system.as_deref().filter(|s| !s.is_empty()),
        input,
        tool_choice: RespToolChoice(&conv.tool_choice),
        tools,
        parallel_tool_calls: conv.parallel_tool_calls.filter(|_| has_tools),
        stream: opts.stream.then_some(true),
        max_output_tokens: opts.max_tokens,
        temperature: opts.temperature,
        text: conv.response_format.as_ref().map(|f| {
            let mut format = openai_answer(f);
            format.insert("type".into(), "json_schema".into());
            serde_json::json!({"format": format})
        }),
    };
    // Extra fields are merged by the one rule every encoder follows: a key given there
    // replaces the typed one.
    to_body(FORMAT, &body, opts, body_size_hint(conv))
}

fn push_items<'a>(m: &'a Message, answered: &'a HashSet<&str>, out: &mut Vec<Item<'a>>) {
    match m.role {
        Role::System => out.push(Item::Message {
            role: "system",
            content: MsgContent::Text(joined_text(&m.content)),
        }),
        Role::User => {
            let content = if m.content.iter().all(|p| p.r#type == ContentType::Text) {
                MsgContent::Text(joined_text(&m.content))
            } else {
                MsgContent::Parts(m.content.iter().filter_map(input_part).collect())
            };
            out.push(Item::Message {
                role: "user",
                content,
            });
        }
        Role::Assistant => {
            // Reasoning items produced by Responses go back first, with their ids.
            for p in &m.content {
                if p.r#type == ContentType::Thinking
                    && let Some(id) = p.options.get("item_id").and_then(Value::as_str)
                {
                    out.push(Item::Reasoning(Reasoning { id, part: p }));
                }
            }
            // Hosted-tool items (web search, shell, ...) go back as they came.
            for p in &m.content {
                if p.r#type == ContentType::Unsupported
                    && p.options.get("provider").and_then(Value::as_str) == Some(FORMAT)
                    && let Some(item) = p.options.get("item").filter(|i| i.is_object())
                {
                    out.push(Item::Opaque(item));
                }
            }
            let text = joined_text(&m.content);
            if !text.is_empty() {
                out.push(Item::Message {
                    role: "assistant",
                    content: MsgContent::Text(text),
                });
            }
            for c in sendable(m, answered) {
                out.push(Item::FunctionCall(c));
            }
        }
        Role::Tool => {
            for r in &m.tool_results {
                out.push(Item::FunctionCallOutput(r));
            }
        }
    }
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    instructions: Option<&'a str>,
    input: Vec<Item<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "RespToolChoice::is_unset")]
    tool_choice: RespToolChoice<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    /// A typed answer's schema (`text.format`).
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<serde_json::Value>,
}

enum Item<'a> {
    Message {
        role: &'static str,
        content: MsgContent<'a>,
    },
    Reasoning(Reasoning<'a>),
    FunctionCall(&'a ToolCall),
    FunctionCallOutput(&'a ToolResult),
    /// An output item this codec does not read, replayed as the decoder kept it.
    Opaque(&'a Value),
}

struct Reasoning<'a> {
    id: &'a str,
    part: &'a ContentPart,
}

impl Serialize for Item<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Item::Opaque(v) => v.serialize(s),
            Item::Message { role, content } => {
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("type", "message")?;
                m.serialize_entry("role", role)?;
                m.serialize_entry("content", content)?;
                m.end()
            }
            Item::Reasoning(r) => {
                let mut m = s.serialize_map(Some(4))?;
                m.serialize_entry("type", "reasoning")?;
                m.serialize_entry("id", r.id)?;
                let summary: Vec<SummaryText<'_>> = if r.part.content.is_empty() {
                    Vec::new()
                } else {
                    vec![SummaryText {
                        r#type: "summary_text",
                        text: &r.part.content,
                    }]
                };
                m.serialize_entry("summary", &summary)?;
                if let Some(enc) = r.part.options.get("encrypted_content") {
                    m.serialize_entry("encrypted_content", enc)?;
                }
                m.end()
            }
            Item::FunctionCall(c) => {
                let item_id = c.metadata.get("item_id").and_then(Value::as_str);
                let mut m = s.serialize_map(Some(5))?;
                m.serialize_entry("type", "function_call")?;
                if let Some(id) = item_id {
                    m.serialize_entry("id", id)?;
                }
                m.serialize_entry("call_id", c.call_id.as_deref().unwrap_or(""))?;
                m.serialize_entry("name", c.name.as_deref().unwrap_or(""))?;
                m.serialize_entry("arguments", &ArgumentsText(c))?;
                m.end()
            }
            Item::FunctionCallOutput(r) => {
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("type", "function_call_output")?;
                m.serialize_entry("call_id", &r.tool_call_id)?;
                // Images and PDFs go inside the output, which is then a list of input
                // parts; anything else is text.
                let inside = |p: &ContentPart| p.r#type != ContentType::Text && native(p);
                if r.content.iter().any(inside) {
                    let mut parts = Vec::with_capacity(r.content.len() + 1);
                    if r.is_error() {
                        parts.push(InputPart::Text(result_text(r, WIRE, |p| !native(p))));
                        parts.extend(
                            r.content
                                .iter()
                                .filter(|p| inside(p))
                                .filter_map(InputPart::from_part),
                        );
                    } else {
                        parts.extend(r.content.iter().filter_map(input_part));
                    }
                    m.serialize_entry("output", &parts)?;
                } else {
                    m.serialize_entry("output", &result_text(r, WIRE, |p| !native(p)))?;
                }
                m.end()
            }
        }
    }
}

#[derive(Serialize)]
struct SummaryText<'a> {
    r#type: &'static str,
    text: &'a str,
}

enum MsgContent<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<InputPart<'a>>),
}

impl Serialize for MsgContent<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            MsgContent::Text(t) => s.serialize_str(t),
            MsgContent::Parts(p) => p.serialize(s),
        }
    }
}

enum InputPart<'a> {
    Text(Cow<'a, str>),
    Image {
        url: UrlOrData<'a>,
        detail: &'a str,
    },
    File {
        data: UrlOrData<'a>,
        filename: Option<&'a str>,
        is_url: bool,
    },
}

impl<'a> InputPart<'a> {
    fn from_part(p: &'a ContentPart) -> Option<Self> {
        match p.r#type {
            ContentType::Text => Some(InputPart::Text(Cow::Borrowed(&p.content))),
            ContentType::Image | ContentType::ImageUrl => Some(InputPart::Image {
                url: part_url(p)?,
                detail: p
                    .options
                    .get("detail")
                    .and_then(Value::as_str)
                    .unwrap_or("auto"),
            }),
            ContentType::File | ContentType::FileUrl => {
                let is_url = p.r#type == ContentType::FileUrl;
                // Responses wants a name beside base64 data.
                let filename = p.options.get("filename").and_then(Value::as_str);
                Some(InputPart::File {
                    data: part_url(p)?,
                    filename: if is_url {
                        filename
                    } else {
                        filename.or(Some("document.pdf"))
                    },
                    is_url,
                })
            }
            ContentType::Thinking | ContentType::Unsupported => None,
        }
    }
}

impl Serialize for InputPart<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        match self {
            InputPart::Text(t) => {
                m.serialize_entry("type", "input_text")?;
                m.serialize_entry("text", t)?;
            }
            InputPart::Image { url, detail } => {
                m.serialize_entry("type", "input_image")?;
                m.serialize_entry("image_url", url)?;
                m.serialize_entry("detail", detail)?;
            }
            InputPart::File {
                data,
                filename,
                is_url,
            } => {
                m.serialize_entry("type", "input_file")?;
                if let Some(f) = filename {
                    m.serialize_entry("filename", f)?;
                }
                m.serialize_entry(if *is_url { "file_url" } else { "file_data" }, data)?;
            }
        }
        m.end()
    }
}

struct WireTool<'a> {
    def: &'a ToolDefinition,
    parameters: Cow<'a, Value>,
}

impl Serialize for WireTool<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(5))?;
        m.serialize_entry("type", "function")?;
        m.serialize_entry("name", &self.def.name)?;
        if !self.def.description.is_empty() {
            m.serialize_entry("description", &self.def.description)?;
        }
        m.serialize_entry("parameters", &self.parameters)?;
        m.serialize_entry("strict", &self.def.strict)?;
        m.end()
    }
}

struct RespToolChoice<'a>(&'a ToolChoice);

impl RespToolChoice<'_> {
    fn is_unset(&self) -> bool {
        self.0.is_unset()
    }
}

impl Serialize for RespToolChoice<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            ToolChoice::Mode(m) => s.serialize_str(mode_str(*m)),
            ToolChoice::Tool { name } => {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("type", "function")?;
                m.serialize_entry("name", name)?;
                m.end()
            }
            ToolChoice::Unset => s.serialize_str("auto"),
        }
    }
}

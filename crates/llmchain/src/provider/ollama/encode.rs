//! Encoding a conversation as an Ollama `/api/chat` request body.
//!
//! - the system prompt is the first `role: "system"` message;
//! - assistant messages carry `content`, `thinking` and `tool_calls` together, each call
//!   with `arguments` as an object (and its `id` unless the decoder synthesised it);
//! - each tool result is one `role: "tool"` message with `tool_name` (and
//!   `tool_call_id` when the call had a wire id); Ollama has no error flag, so a failed
//!   result's text is prefixed with `Error: ` unless it already says so;
//! - images are base64 in `images` (no `data:` prefix); images returned by tools go
//!   in one user message after all the tool messages of the turn, since tool messages
//!   cannot carry them; image URLs cannot be sent and become a text note;
//! - `stream` is always written (Ollama streams by default); `think` and other fields
//!   come from `RequestOptions::extra`; `max_tokens`/`temperature` go in `options`.

use std::borrow::Cow;
use std::collections::HashSet;

use serde::Serialize;
use serde_json::Value;

use crate::conversation::{Conversation, answered_ids, replayable};
use crate::message::{ContentPart, ContentType, Message, Role, ToolCall, ToolResult};
use crate::provider::encoding::{
    ArgsObject, body_size_hint, join_text, listed_tools, synthesized_id, to_body,
};
use crate::provider::error::EncodeError;
use crate::provider::format::RequestOptions;
use crate::provider::placement::{self, Kind};

use super::NAME as FORMAT;

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<OMsg<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<OTool<'a>>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    options: Option<Options>,
    /// A typed answer's schema (structured outputs: `format`).
    #[serde(skip_serializing_if = "Option::is_none")]
    format: Option<serde_json::Value>,
}

#[derive(Serialize)]
struct Options {
    #[serde(skip_serializing_if = "Option::is_none")]
    num_predict: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
}

#[derive(Serialize)]
struct OMsg<'a> {
    role: &'static str,
    content: Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    images: Vec<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<OCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
}

impl<'a> OMsg<'a> {
    fn new(role: &'static str, content: Cow<'a, str>) -> Self {
        OMsg {
            role,
            content,
            thinking: None,
            images: Vec::new(),
            tool_calls: Vec::new(),
            tool_name: None,
            tool_call_id: None,
        }
    }
}

#[derive(Serialize)]
struct OCall<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    function: OFunction<'a>,
}

#[derive(Serialize)]
struct OFunction<'a> {
    name: &'a str,
    arguments: ArgsObject<'a>,
}

#[derive(Serialize)]
struct OTool<'a> {
    #[serde(rename = "type")]
    ty: &'static str,
    function: OToolFunction<'a>,
}

#[derive(Serialize)]
struct OToolFunction<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    description: &'a str,
    parameters: &'a Value,
}

/// The text parts of `parts` of `ty`, joined (borrowed when there is one).
fn joined(parts: &[ContentPart], ty: ContentType) -> Cow<'_, str> {
    let mut it = parts
        .iter()
        .filter(|p| p.r#type == ty && !p.content.is_empty());
    match (it.next(), it.next()) {
        (None, _) => Cow::Borrowed(""),
        (Some(one), None) => Cow::Borrowed(&one.content),
        (Some(a), Some(b)) => {
            let mut s = String::new();
            join_text(&mut s, &a.content);
            join_text(&mut s, &b.content);
            for p in it {
                join_text(&mut s, &p.content);
            }
            Cow::Owned(s)
        }
    }
}

/// The wire's name in placeholders.
const WIRE: &str = "Ollama";

/// The image media types Ollama's vision models read.
const IMAGES: [&str; 3] = ["image/png", "image/jpeg", "image/webp"];

/// True for a base64 image Ollama takes in `images`.
fn ollama_image(p: &ContentPart) -> bool {
    placement::kind(p) == Kind::Image && placement::image_media_in(p, &IMAGES)
}

/// The base64 of the images among `parts` (no `data:` prefix).
fn images(parts: &[ContentPart]) -> Vec<&str> {
    parts
        .iter()
        .filter(|p| ollama_image(p))
        .map(placement::base64_data)
        .collect()
}

/// A user-side message: its text, with text standing in for what Ollama cannot take
/// (an image by URL, a file), and base64 images in `images`.
fn user_msg(parts: &[ContentPart]) -> OMsg<'_> {
    let content = placement::joined_as_text(parts, WIRE, |p| !ollama_image(p));
    let mut m = OMsg::new("user", content);
    m.images = images(parts);
    m
}

fn assistant_msg<'a>(
    m: &'a Message,
    answered: &'a HashSet<&'a str>,
) -> Result<OMsg<'a>, EncodeError> {
    let mut out = OMsg::new("assistant", joined(&m.content, ContentType::Text));
    let thinking = joined(&m.content, ContentType::Thinking);
    out.thinking = (!thinking.is_empty()).then_some(thinking);
    out.images = images(&m.content);
    for (i, c) in replayable(m, answered).enumerate() {
        let Some(name) = c.name.as_deref() else {
            return Err(EncodeError::Invalid(format!(
                "tool call {i} of an assistant message has no name; Ollama needs it"
            )));
        };
        out.tool_calls.push(OCall {
            id: c.call_id.as_deref().filter(|_| !synthesized_id(c)),
            function: OFunction {
                name,
                arguments: ArgsObject::of(c),
            },
        });
    }
    Ok(out)
}

fn result_msg<'a>(r: &'a ToolResult, call: Option<&'a ToolCall>) -> Result<OMsg<'a>, EncodeError> {
    let name = r
        .name
        .as_deref()
        .or_else(|| call.and_then(|c| c.name.as_deref()))
        .ok_or_else(|| {
            EncodeError::Invalid(format!(
                "tool result for {} has no name and answers no known call; Ollama needs tool_name",
                r.tool_call_id
            ))
        })?;
    // Base64 images follow the turn's tool messages; the rest is text here.
    let mut content = placement::joined_as_text(&r.content, WIRE, |p| !ollama_image(p));
    if r.is_error()
        && !content
            .trim_start()
            .to_ascii_lowercase()
            .starts_with("error")
    {
        content = Cow::Owned(format!("Error: {content}"));
    }
    let mut m = OMsg::new("tool", content);
    m.tool_name = Some(name);
    m.tool_call_id = match call {
        Some(c) if !synthesized_id(c) => c.call_id.as_deref(),
        Some(_) => None,
        None => Some(&r.tool_call_id),
    };
    Ok(m)
}

/// Encodes `conv` as an `/api/chat` request body.
pub(crate) fn encode(conv: &Conversation, opts: &RequestOptions) -> Result<Vec<u8>, EncodeError> {
    // Calls of a cut-off message that nothing answers are not sent (see `replayable`).
    let answered = answered_ids(conv);
    let mut messages: Vec<OMsg<'_>> = Vec::with_capacity(conv.messages.len() + 1);
    let mut system = String::new();
    if let Some(s) = conv.system.as_deref() {
        join_text(&mut system, s);
    }
    for m in conv.messages.iter().filter(|m| m.role == Role::System) {
        join_text(&mut system, &joined(&m.content, ContentType::Text));
    }
    if !system.is_empty() {
        messages.push(OMsg::new("system", Cow::Owned(system)));
    }
    let mut last_calls: std::collections::HashMap<&str, &ToolCall> =
        std::collections::HashMap::new();
    // Images returned by tools of the current turn, sent after its tool messages.
    let mut tool_images: Vec<&ContentPart> = Vec::new();
    fn flush_images<'a>(images: &mut Vec<&'a ContentPart>, messages: &mut Vec<OMsg<'a>>) {
        if images.is_empty() {
            return;
        }
        let mut m = user_msg(&[]);
        m.content = Cow::Borrowed("The tool results above returned these images.");
        m.images = images.drain(..).map(placement::base64_data).collect();
        messages.push(m);
    }
    for m in &conv.messages {
        if m.role != Role::Tool {
            flush_images(&mut tool_images, &mut messages);
        }
        match m.role {
            Role::System => {}
            Role::User => messages.push(user_msg(&m.content)),
            Role::Assistant => {
                // The calls by id (the first of an id wins), once per message: a
                // search per result made 10⁵ call/result pairs quadratic.
                last_calls.clear();
                for c in &m.tool_calls {
                    if let Some(id) = c.call_id.as_deref() {
                        last_calls.entry(id).or_insert(c);
                    }
                }
                messages.push(assistant_msg(m, &answered)?);
            }
            Role::Tool => {
                for r in &m.tool_results {
                    let call = last_calls.get(r.tool_call_id.as_str()).copied();
                    messages.push(result_msg(r, call)?);
                    tool_images.extend(r.content.iter().filter(|p| ollama_image(p)));
                }
            }
        }
    }
    flush_images(&mut tool_images, &mut messages);

    let tools = listed_tools(conv)
        .map(|t| OTool {
            ty: "function",
            function: OToolFunction {
                name: &t.name,
                description: &t.description,
                parameters: &t.parameters_schema,
            },
        })
        .collect();
    let options = (opts.max_tokens.is_some() || opts.temperature.is_some()).then_some(Options {
        num_predict: opts.max_tokens,
        temperature: opts.temperature,
    });
    let body = Body {
        model: &opts.model,
        messages,
        tools,
        stream: opts.stream,
        options,
        format: conv.response_format.as_ref().map(|f| f.schema.clone()),
    };
    to_body(FORMAT, &body, opts, body_size_hint(conv))
}

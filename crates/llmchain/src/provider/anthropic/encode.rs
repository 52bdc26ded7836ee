//! Encoding a conversation as an Anthropic Messages request body.
//!
//! - the system prompt (and any system messages) goes top-level in `system`;
//! - each tool message becomes `tool_result` blocks, ALL first in ONE user message
//!   (consecutive tool messages and a following user message are merged into it), each
//!   with its `is_error`, images and documents inside the result, `cache_control` from
//!   the result's options;
//! - assistant `tool_use` blocks always carry `input` as an object;
//! - thinking parts are replayed with their signature (parts without one came from
//!   another provider and are dropped: Anthropic rejects unsigned thinking);
//! - virtual fields (`processed_content`, `display_text`, exceptions, expansions) are
//!   never sent.

use std::borrow::Cow;
use std::collections::HashSet;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::conversation::{Conversation, ToolChoice, ToolChoiceMode, answered_ids, replayable};
use crate::message::{ContentPart, ContentType, Message, Role, ToolResult};
use crate::provider::encoding::{
    ArgsObject, body_size_hint, closed_schema, join_text, listed_tools, to_body,
};
use crate::provider::error::EncodeError;
use crate::provider::format::RequestOptions;
use crate::provider::placement::{self, Kind};

use super::NAME as FORMAT;

/// The `max_tokens` sent when the options set none (the API requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<System<'a>>,
    messages: Vec<Msg<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Choice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    /// A typed answer's schema (structured outputs: `output_config.format`).
    #[serde(skip_serializing_if = "Option::is_none")]
    output_config: Option<serde_json::Value>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum System<'a> {
    Text(String),
    Blocks(Vec<Block<'a>>),
}

#[derive(Serialize)]
struct Msg<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Source<'a> {
    Base64 {
        media_type: &'a str,
        data: &'a str,
    },
    Url {
        url: &'a str,
    },
    /// A plain-text document.
    Text {
        media_type: &'static str,
        data: String,
    },
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: Cow<'a, str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<Cache<'a>>,
    },
    Image {
        source: Source<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<Cache<'a>>,
    },
    Document {
        source: Source<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<Cache<'a>>,
    },
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    RedactedThinking {
        data: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: ArgsObject<'a>,
    },
    ToolResult {
        tool_use_id: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        content: Option<ResultContent<'a>>,
        is_error: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<Cache<'a>>,
    },
    /// A block this codec does not read (`server_tool_use`, `web_search_tool_result`,
    /// ...), replayed as the decoder kept it.
    #[serde(untagged)]
    Opaque(&'a Value),
}

#[derive(Serialize)]
#[serde(untagged)]
enum ResultContent<'a> {
    Text(&'a str),
    Blocks(Vec<Block<'a>>),
}

#[derive(Serialize)]
struct Tool<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    description: &'a str,
    input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<Cache<'a>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    strict: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    eager_input_streaming: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    input_examples: Option<&'a Value>,
}

#[derive(Serialize)]
struct Choice<'a> {
    #[serde(rename = "type")]
    ty: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    disable_parallel_tool_use: bool,
}

/// `cache_control` as Anthropic takes it.
#[derive(Clone, Copy)]
enum Cache<'a> {
    /// `{"type": "ephemeral"}`.
    Ephemeral,
    /// An object, as given (`{"type": "ephemeral", "ttl": "1h"}`).
    Given(&'a Value),
}

impl Serialize for Cache<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Cache::Ephemeral => serde_json::json!({"type": "ephemeral"}).serialize(s),
            Cache::Given(v) => v.serialize(s),
        }
    }
}

/// The `cache_control` option of a part, result or tool: an object goes as given;
/// `false` and `null` are none; the shorthand `true` (or any other value, such as
/// `"ephemeral"`) is `{"type": "ephemeral"}`, the only other form Anthropic takes.
fn cache_control(options: &Map<String, Value>) -> Option<Cache<'_>> {
    match options.get("cache_control")? {
        Value::Bool(false) | Value::Null => None,
        v @ Value::Object(_) => Some(Cache::Given(v)),
        _ => Some(Cache::Ephemeral),
    }
}

/// The wire's name in placeholders.
const WIRE: &str = "Anthropic";

/// The image media types Anthropic takes.
const IMAGES: [&str; 4] = ["image/jpeg", "image/png", "image/gif", "image/webp"];

/// The content block of a user-side part (in a user message or a tool result):
/// the part as Anthropic's own block where it takes one (text; a JPEG, PNG, GIF or WebP
/// image; an image by URL; a PDF as a base64 document; a text file as a plain-text
/// document; a file by URL that is a PDF or says no media type), and as a text block
/// standing in for it otherwise; `None` for empty text and reasoning.
fn part_block(p: &ContentPart) -> Option<Block<'_>> {
    let cache_control = cache_control(&p.options);
    let block = match placement::kind(p) {
        Kind::Text => {
            if p.content.is_empty() {
                return None;
            }
            Block::Text {
                text: Cow::Borrowed(&p.content),
                cache_control,
            }
        }
        Kind::Image if placement::image_media_in(p, &IMAGES) => Block::Image {
            source: Source::Base64 {
                media_type: placement::media(p).unwrap_or("image/png"),
                data: placement::base64_data(p),
            },
            cache_control,
        },
        Kind::ImageUrl => Block::Image {
            source: Source::Url { url: &p.content },
            cache_control,
        },
        Kind::Pdf => Block::Document {
            source: Source::Base64 {
                media_type: "application/pdf",
                data: placement::base64_data(p),
            },
            cache_control,
        },
        // (Not UTF-8: the placeholder below.)
        Kind::TextFile if placement::file_text(p).is_some() => Block::Document {
            source: Source::Text {
                media_type: "text/plain",
                data: placement::file_text(p).unwrap_or_default(),
            },
            cache_control,
        },
        Kind::FileUrl if matches!(placement::media(p), None | Some("application/pdf")) => {
            Block::Document {
                source: Source::Url { url: &p.content },
                cache_control,
            }
        }
        Kind::Thinking => return thinking_block(p),
        _ => Block::Text {
            text: placement::as_text(p, WIRE)?,
            cache_control,
        },
    };
    Some(block)
}

/// The Anthropic block an opaque part holds, when it came from Anthropic (another
/// provider's blocks mean nothing here).
fn opaque_block(p: &ContentPart) -> Option<&Value> {
    (p.options.get("provider").and_then(Value::as_str) == Some(FORMAT))
        .then(|| p.options.get("block"))
        .flatten()
        .filter(|b| b.is_object())
}

fn thinking_block(p: &ContentPart) -> Option<Block<'_>> {
    if let Some(data) = p.options.get("redacted").and_then(Value::as_str) {
        return Some(Block::RedactedThinking { data });
    }
    let signature = p.signature().filter(|s| !s.is_empty())?;
    Some(Block::Thinking {
        thinking: &p.content,
        signature,
    })
}

fn result_block(r: &ToolResult) -> Block<'_> {
    let content = match r.content.as_slice() {
        [] => None,
        [only] if only.r#type == ContentType::Text => Some(ResultContent::Text(&only.content)),
        parts => {
            let blocks: Vec<Block<'_>> = parts
                .iter()
                .filter(|p| p.r#type != ContentType::Thinking)
                .filter_map(part_block)
                .collect();
            (!blocks.is_empty()).then_some(ResultContent::Blocks(blocks))
        }
    };
    Block::ToolResult {
        tool_use_id: &r.tool_call_id,
        content,
        is_error: r.is_error(),
        cache_control: cache_control(&r.options),
    }
}

fn assistant_blocks<'a>(
    m: &'a Message,
    answered: &'a HashSet<&'a str>,
) -> Result<Vec<Block<'a>>, EncodeError> {
    let mut out = Vec::with_capacity(m.content.len() + m.tool_calls.len());
    for p in &m.content {
        match p.r#type {
            ContentType::Text | ContentType::Thinking => out.extend(part_block(p)),
            ContentType::Unsupported => out.extend(opaque_block(p).map(Block::Opaque)),
            _ => {}
        }
    }
    for (i, c) in replayable(m, answered).enumerate() {
        let (Some(id), Some(name)) = (c.call_id.as_deref(), c.name.as_deref()) else {
            return Err(EncodeError::Invalid(format!(
                "tool call {i} of an assistant message has no call_id or name; Anthropic needs both"
            )));
        };
        out.push(Block::ToolUse {
            id,
            name,
            input: ArgsObject::of(c),
        });
    }
    Ok(out)
}

/// Encodes `conv` as a Messages request body.
pub(crate) fn encode(conv: &Conversation, opts: &RequestOptions) -> Result<Vec<u8>, EncodeError> {
    // Calls of a cut-off message that nothing answers are not sent (see `replayable`).
    let answered = answered_ids(conv);
    let mut system_text = String::new();
    let mut system_blocks: Vec<Block<'_>> = Vec::new();
    let mut system_cached = false;
    if let Some(s) = conv.system.as_deref() {
        join_text(&mut system_text, s);
        if !s.is_empty() {
            system_blocks.push(Block::Text {
                text: Cow::Borrowed(s),
                cache_control: None,
            });
        }
    }

    let mut messages: Vec<Msg<'_>> = Vec::with_capacity(conv.messages.len());
    // Index of an open user message whose tool_result blocks come first, and how many.
    let mut open_user: Option<(usize, usize)> = None;
    for m in &conv.messages {
        match m.role {
            Role::System => {
                for p in m.content.iter().filter(|p| p.r#type == ContentType::Text) {
                    join_text(&mut system_text, &p.content);
                    if let Some(b) = part_block(p) {
                        system_cached |= cache_control(&p.options).is_some();
                        system_blocks.push(b);
                    }
                }
            }
            Role::Tool => {
                let (at, n_results) = match open_user {
                    Some(o) => o,
                    None => {
                        messages.push(Msg {
                            role: "user",
                            content: Vec::with_capacity(m.tool_results.len()),
                        });
                        (messages.len() - 1, 0)
                    }
                };
                let content = &mut messages[at].content;
                let mut n = n_results;
                for r in &m.tool_results {
                    // Results always go before any text of the same user message.
                    content.insert(n, result_block(r));
                    n += 1;
                }
                open_user = Some((at, n));
            }
            Role::User => {
                let blocks = m.content.iter().filter_map(part_block);
                match open_user {
                    Some((at, _)) => messages[at].content.extend(blocks),
                    None => {
                        messages.push(Msg {
                            role: "user",
                            content: blocks.collect(),
                        });
                        open_user = Some((messages.len() - 1, 0));
                    }
                }
            }
            Role::Assistant => {
                let content = assistant_blocks(m, &answered)?;
                if content.is_empty() {
                    continue;
                }
                open_user = None;
                messages.push(Msg {
                    role: "assistant",
                    content,
                });
            }
        }
    }

    let system = if system_cached {
        Some(System::Blocks(system_blocks))
    } else {
        (!system_text.is_empty()).then_some(System::Text(system_text))
    };

    let tools = listed_tools(conv)
        .map(|t| Tool {
            name: &t.name,
            description: &t.description,
            input_schema: &t.parameters_schema,
            cache_control: cache_control(&t.options),
            strict: t.strict,
            eager_input_streaming: t.options.get("eager_input_streaming"),
            input_examples: t.options.get("input_examples"),
        })
        .collect();

    let no_parallel = conv.parallel_tool_calls == Some(false);
    let tool_choice = match &conv.tool_choice {
        ToolChoice::Unset if no_parallel => Some(("auto", None)),
        ToolChoice::Unset => None,
        ToolChoice::Mode(ToolChoiceMode::Auto) => Some(("auto", None)),
        ToolChoice::Mode(ToolChoiceMode::Required) => Some(("any", None)),
        ToolChoice::Mode(ToolChoiceMode::None) => Some(("none", None)),
        ToolChoice::Tool { name } => Some(("tool", Some(name.as_str()))),
    }
    .map(|(ty, name)| Choice {
        ty,
        name,
        disable_parallel_tool_use: no_parallel && ty != "none",
    });

    let body = Body {
        model: &opts.model,
        max_tokens: opts.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        system,
        messages,
        tools,
        tool_choice,
        temperature: opts.temperature,
        stream: opts.stream,
        output_config: conv.response_format.as_ref().map(
            |f| serde_json::json!({"format": {"type": "json_schema", "schema": closed_schema(&f.schema)}}),
        ),
    };
    to_body(FORMAT, &body, opts, body_size_hint(conv))
}

//! Encoding a conversation as a Bedrock Converse request body (the same for Converse
//! and ConverseStream; the model goes in the URL).
//!
//! - the system prompt goes in `system` as text blocks;
//! - tool results become `toolResult` blocks first in one user message (with a
//!   following user message merged into it), `status: "error"` for error results;
//! - images (PNG, JPEG, GIF, WebP, base64) and PDFs are `image` and `document` blocks;
//!   what Converse cannot take inline (an image by URL, other files) is a text stand-in
//!   ([`placement`]);
//! - reasoning is replayed with its signature (unsigned reasoning from another
//!   provider is dropped: Converse refuses it);
//! - a `cache_control` option on a part, a result or a tool adds a `cachePoint` after
//!   it;
//! - `toolUseId`s must match `[a-zA-Z0-9_-]{1,64}`: another provider's id that does not
//!   is sent mapped (the same way for the call and its result);
//! - `inferenceConfig` holds `maxTokens` and `temperature`; extra body fields are merged
//!   at the top level, replacing typed ones (`additionalModelRequestFields` goes
//!   there).

use std::borrow::Cow;
use std::collections::HashSet;

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::conversation::{Conversation, ToolChoice, ToolChoiceMode, answered_ids, replayable};
use crate::message::{ContentPart, ContentType, Message, Role, ToolResult};
use crate::provider::encoding::{ArgsObject, body_size_hint, to_body};
use crate::provider::error::EncodeError;
use crate::provider::format::RequestOptions;
use crate::provider::placement::{self, Kind};

use super::NAME as FORMAT;

/// The wire's name in placeholders.
const WIRE: &str = "Bedrock";

#[derive(Serialize)]
struct Body<'a> {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<Value>,
    messages: Vec<Msg<'a>>,
    #[serde(rename = "inferenceConfig", skip_serializing_if = "Map::is_empty")]
    inference_config: Map<String, Value>,
    #[serde(rename = "toolConfig", skip_serializing_if = "Option::is_none")]
    tool_config: Option<Value>,
}

#[derive(Serialize)]
struct Msg<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

#[derive(Serialize)]
enum Block<'a> {
    #[serde(rename = "text")]
    Text(Cow<'a, str>),
    #[serde(rename = "image")]
    Image(Value),
    #[serde(rename = "document")]
    Document(Value),
    #[serde(rename = "reasoningContent")]
    Reasoning(Value),
    #[serde(rename = "toolUse")]
    ToolUse {
        #[serde(rename = "toolUseId")]
        id: Cow<'a, str>,
        name: &'a str,
        input: ArgsObject<'a>,
    },
    #[serde(rename = "toolResult")]
    ToolResult {
        #[serde(rename = "toolUseId")]
        id: Cow<'a, str>,
        content: Vec<Block<'a>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        status: Option<&'static str>,
    },
    #[serde(rename = "cachePoint")]
    CachePoint(Value),
}

fn cache_point() -> Block<'static> {
    Block::CachePoint(json!({"type": "default"}))
}

/// Whether an option map asks for a cache point.
fn cached(options: &Map<String, Value>) -> bool {
    !matches!(
        options.get("cache_control"),
        None | Some(Value::Bool(false)) | Some(Value::Null)
    )
}

/// A `toolUseId` Converse takes: `[a-zA-Z0-9_-]{1,64}`. Another id is mapped, the same
/// way every time (its call and its result agree): other characters become `_`, and a
/// long id keeps its start and a hash of the whole.
pub(crate) fn tool_use_id(id: &str) -> Cow<'_, str> {
    let ok = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
    if !id.is_empty() && id.len() <= 64 && id.bytes().all(ok) {
        return Cow::Borrowed(id);
    }
    // Mapped ids carry a hash of the original, so two that map alike stay apart.
    let keep: String = id
        .bytes()
        .take(55)
        .map(|b| if ok(b) { b as char } else { '_' })
        .collect();
    let keep = if keep.is_empty() { "call" } else { &keep };
    Cow::Owned(format!("{keep}_{:08x}", hash(id)))
}

/// FNV-1a: stable across versions and platforms, unlike `DefaultHasher`.
fn hash(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ b as u32).wrapping_mul(0x0100_0193)
    })
}

/// The image formats Converse takes, by media type.
fn image_format(media: &str) -> Option<&'static str> {
    Some(match media {
        "image/png" => "png",
        "image/jpeg" | "image/jpg" => "jpeg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        _ => return None,
    })
}

/// A document name Converse takes (letters, digits, single spaces, `-()[]`), from
/// the part's `filename` option or its position.
fn document_name(p: &ContentPart, n: usize) -> String {
    let given = p
        .options
        .get("filename")
        .and_then(Value::as_str)
        .unwrap_or("");
    let stem = given.rsplit_once('.').map_or(given, |(s, _)| s);
    let mut name = String::new();
    for c in stem.chars() {
        let c = if c.is_ascii_alphanumeric() || matches!(c, '-' | '(' | ')' | '[' | ']') {
            c
        } else {
            ' '
        };
        if !(c == ' ' && (name.is_empty() || name.ends_with(' '))) {
            name.push(c);
        }
    }
    let name = name.trim_end().chars().take(64).collect::<String>();
    if name.is_empty() {
        format!("document {n}")
    } else {
        name
    }
}

/// The blocks of a user-side part (in a user message or a tool result), with a cache
/// point after it when it asks for one.
fn part_blocks<'a>(p: &'a ContentPart, docs: &mut usize, out: &mut Vec<Block<'a>>) {
    let block = match placement::kind(p) {
        Kind::Text => {
            if p.content.is_empty() {
                return;
            }
            Block::Text(Cow::Borrowed(&p.content))
        }
        Kind::Image => match placement::media(p).and_then(image_format) {
            Some(format) => Block::Image(json!({
                "format": format,
                "source": {"bytes": placement::base64_data(p)},
            })),
            None => match placement::as_text(p, WIRE) {
                Some(t) => Block::Text(t),
                None => return,
            },
        },
        Kind::Pdf => {
            *docs += 1;
            Block::Document(json!({
                "format": "pdf",
                "name": document_name(p, *docs),
                "source": {"bytes": placement::base64_data(p)},
            }))
        }
        Kind::Thinking | Kind::Opaque => return,
        _ => match placement::as_text(p, WIRE) {
            Some(t) => Block::Text(t),
            None => return,
        },
    };
    out.push(block);
    if cached(&p.options) {
        out.push(cache_point());
    }
}

fn reasoning_block(p: &ContentPart) -> Option<Block<'_>> {
    if let Some(data) = p.options.get("redacted").and_then(Value::as_str) {
        return Some(Block::Reasoning(json!({"redactedContent": data})));
    }
    let signature = p.signature().filter(|s| !s.is_empty())?;
    Some(Block::Reasoning(json!({
        "reasoningText": {"text": p.content, "signature": signature},
    })))
}

fn result_block<'a>(r: &'a ToolResult, docs: &mut usize) -> Vec<Block<'a>> {
    let mut content = Vec::new();
    for p in r
        .content
        .iter()
        .filter(|p| p.r#type != ContentType::Thinking)
    {
        part_blocks(p, docs, &mut content);
    }
    // A result block needs content; cache points are not content.
    content.retain(|b| !matches!(b, Block::CachePoint(_)));
    if content.is_empty() {
        content.push(Block::Text(Cow::Borrowed("")));
    }
    let mut out = vec![Block::ToolResult {
        id: tool_use_id(&r.tool_call_id),
        content,
        status: r.is_error().then_some("error"),
    }];
    if cached(&r.options) {
        out.push(cache_point());
    }
    out
}

fn assistant_blocks<'a>(
    m: &'a Message,
    answered: &'a HashSet<&'a str>,
) -> Result<Vec<Block<'a>>, EncodeError> {
    let mut out = Vec::with_capacity(m.content.len() + m.tool_calls.len());
    for p in &m.content {
        match p.r#type {
            ContentType::Text if !p.content.is_empty() => {
                out.push(Block::Text(Cow::Borrowed(&p.content)));
            }
            ContentType::Thinking => out.extend(reasoning_block(p)),
            _ => {}
        }
    }
    for (i, c) in replayable(m, answered).enumerate() {
        let (Some(id), Some(name)) = (c.call_id.as_deref(), c.name.as_deref()) else {
            return Err(EncodeError::Invalid(format!(
                "tool call {i} of an assistant message has no call_id or name; Bedrock needs both"
            )));
        };
        out.push(Block::ToolUse {
            id: tool_use_id(id),
            name,
            input: ArgsObject::of(c),
        });
    }
    Ok(out)
}

/// Encodes `conv` as a Converse request body.
pub(crate) fn encode(conv: &Conversation, opts: &RequestOptions) -> Result<Vec<u8>, EncodeError> {
    // Calls of a cut-off message that nothing answers are not sent (see `replayable`).
    let answered = answered_ids(conv);
    let mut system = Vec::new();
    if let Some(s) = conv.system.as_deref().filter(|s| !s.is_empty()) {
        system.push(json!({"text": s}));
    }
    let mut docs = 0usize;
    let mut messages: Vec<Msg<'_>> = Vec::with_capacity(conv.messages.len());
    // An open user message whose toolResult blocks come first, and how many.
    let mut open_user: Option<(usize, usize)> = None;
    for m in &conv.messages {
        match m.role {
            Role::System => {
                for p in m.content.iter().filter(|p| p.r#type == ContentType::Text) {
                    if !p.content.is_empty() {
                        system.push(json!({"text": p.content}));
                        if cached(&p.options) {
                            system.push(json!({"cachePoint": {"type": "default"}}));
                        }
                    }
                }
            }
            Role::Tool => {
                let (at, mut n) = match open_user {
                    Some(o) => o,
                    None => {
                        messages.push(Msg {
                            role: "user",
                            content: Vec::new(),
                        });
                        (messages.len() - 1, 0)
                    }
                };
                for r in &m.tool_results {
                    for b in result_block(r, &mut docs) {
                        messages[at].content.insert(n, b);
                        n += 1;
                    }
                }
                open_user = Some((at, n));
            }
            Role::User => {
                let mut blocks = Vec::new();
                for p in &m.content {
                    part_blocks(p, &mut docs, &mut blocks);
                }
                match open_user {
                    Some((at, _)) => messages[at].content.extend(blocks),
                    None => {
                        messages.push(Msg {
                            role: "user",
                            content: blocks,
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

    let mut inference_config = Map::new();
    if let Some(n) = opts.max_tokens {
        inference_config.insert("maxTokens".into(), n.into());
    }
    if let Some(t) = opts.temperature {
        inference_config.insert("temperature".into(), json!(t));
    }

    // A typed answer comes through its tool (Converse has no native mechanism): listed
    // when the conversation does not list it already, and the model must call a tool.
    let answer = conv.response_format.as_ref();
    let answer_listed = answer.is_some_and(|f| conv.tools.iter().any(|t| t.name == f.name));
    let tool_config = (!conv.tools.is_empty() || answer.is_some()).then(|| {
        let mut tools = Vec::with_capacity(conv.tools.len() + 1);
        if let Some(f) = answer.filter(|_| !answer_listed) {
            let mut spec = Map::new();
            spec.insert("name".into(), Value::String(f.name.clone()));
            if let Some(d) = &f.description {
                spec.insert("description".into(), Value::String(d.clone()));
            }
            spec.insert("inputSchema".into(), json!({"json": f.schema}));
            tools.push(json!({"toolSpec": spec}));
        }
        for t in &conv.tools {
            let mut spec = Map::new();
            spec.insert("name".into(), Value::String(t.name.clone()));
            if !t.description.is_empty() {
                spec.insert("description".into(), Value::String(t.description.clone()));
            }
            spec.insert("inputSchema".into(), json!({"json": t.parameters_schema}));
            tools.push(json!({"toolSpec": spec}));
            if cached(&t.options) {
                tools.push(json!({"cachePoint": {"type": "default"}}));
            }
        }
        let others = conv
            .tools
            .iter()
            .any(|t| answer.is_none_or(|f| t.name != f.name));
        let choice = match &conv.tool_choice {
            // The answer alone: that tool; beside others: any tool, the answer at last.
            _ if answer.is_some() && !others => answer.map(|f| json!({"tool": {"name": f.name}})),
            _ if answer.is_some() => Some(json!({"any": {}})),
            ToolChoice::Mode(ToolChoiceMode::Auto) => Some(json!({"auto": {}})),
            ToolChoice::Mode(ToolChoiceMode::Required) => Some(json!({"any": {}})),
            ToolChoice::Tool { name } => Some(json!({"tool": {"name": name}})),
            // Converse has no "none": the model is left to choose.
            _ => None,
        };
        let mut config = json!({"tools": tools});
        if let Some(c) = choice {
            config["toolChoice"] = c;
        }
        config
    });

    let body = Body {
        system,
        messages,
        inference_config,
        tool_config,
    };
    to_body(FORMAT, &body, opts, body_size_hint(conv))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_use_ids_are_kept_or_mapped_stably() {
        assert_eq!(tool_use_id("tooluse_abc-1"), "tooluse_abc-1");
        let a = tool_use_id("call.1");
        assert_eq!(a, tool_use_id("call.1"));
        assert_ne!(a, tool_use_id("call:1"));
        assert!(a.starts_with("call_1_"), "{a}");
        let long = "x".repeat(100);
        let m = tool_use_id(&long);
        assert!(m.len() <= 64, "{m}");
        let ok = |s: &str| {
            !s.is_empty()
                && s.len() <= 64
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        };
        for id in ["", "é", "a b", &long, "call_1"] {
            assert!(ok(&tool_use_id(id)), "{id:?} -> {}", tool_use_id(id));
        }
    }

    #[test]
    fn document_names_follow_the_rules() {
        let mut p = ContentPart::text("x");
        p.options
            .insert("filename".into(), json!("my  report_v2 (final).pdf"));
        assert_eq!(document_name(&p, 1), "my report v2 (final)");
        assert_eq!(document_name(&ContentPart::text("x"), 3), "document 3");
    }
}

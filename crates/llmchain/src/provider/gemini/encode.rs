//! Encoding a conversation as a Gemini `generateContent` request body.
//!
//! - the system prompt goes in `systemInstruction`;
//! - tools become `functionDeclarations` whose `parameters` are rewritten by
//!   [`super::schema::gemini_schema`] (omitted for tools without parameters); a schema
//!   with a `$ref` goes as it is in `parametersJsonSchema` instead (inlining references
//!   can grow exponentially); a typed answer's schema likewise goes in `responseSchema`
//!   or, with a `$ref`, `responseJsonSchema`;
//! - assistant turns are `role: "model"` with `functionCall` parts (`args` always an
//!   object) and their `thoughtSignature`s sent back verbatim; thought text is replayed
//!   only when it carries a signature;
//! - tool results become `functionResponse` parts, in the order of the calls they
//!   answer, in one `role: "user"` content (a following user message is merged after
//!   them); `response` is `{"output": text}` or `{"error": text}`; the call's `id` is
//!   echoed only when the wire gave one (never a synthesised id);
//! - images in results go into `functionResponse.parts` for Gemini 3 models (`model`
//!   containing `gemini-3`), and into `inlineData`/`fileData` parts right after the
//!   responses for older models, which do not accept them inside the result.
//!
//! The model and `stream` are not body fields on this API (they are in the URL).

use std::borrow::Cow;
use std::collections::HashSet;

use serde::Serialize;
use serde_json::Value;

use super::schema::{gemini_schema, has_refs};
use crate::conversation::{
    Conversation, ToolChoice, ToolChoiceMode, ToolDefinition, answered_ids, replayable,
};
use crate::message::{ContentPart, ContentType, Message, Role, ToolCall, ToolResult};
use crate::provider::assembly::THOUGHT_SIGNATURE_KEY;
use crate::provider::encoding::{
    ArgsObject, body_size_hint, join_text, listed_tools, synthesized_id, to_body,
};
use crate::provider::error::EncodeError;
use crate::provider::format::RequestOptions;
use crate::provider::placement::{self, Kind};

use super::NAME as FORMAT;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Body<'a> {
    contents: Vec<GContent<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system_instruction: Option<SystemInstruction>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<ToolsEntry<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_config: Option<ToolConfig<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    generation_config: Option<GenerationConfig>,
}

#[derive(Serialize)]
struct SystemInstruction {
    parts: [TextOnly; 1],
}

#[derive(Serialize)]
struct TextOnly {
    text: String,
}

#[derive(Serialize)]
struct GContent<'a> {
    role: &'static str,
    parts: Vec<GPart<'a>>,
}

#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct GPart<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    thought: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    inline_data: Option<Blob<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    file_data: Option<FileData<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    function_call: Option<FunctionCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    function_response: Option<FunctionResponse<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thought_signature: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Blob<'a> {
    mime_type: &'a str,
    data: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FileData<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    mime_type: Option<&'a str>,
    file_uri: &'a str,
}

#[derive(Serialize)]
struct FunctionCall<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    name: &'a str,
    args: ArgsObject<'a>,
}

#[derive(Serialize)]
struct FunctionResponse<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    name: &'a str,
    response: ResponseBody<'a>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    parts: Vec<ResponsePart<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResponsePart<'a> {
    inline_data: Blob<'a>,
}

#[derive(Serialize)]
enum ResponseBody<'a> {
    #[serde(rename = "output")]
    Output(Cow<'a, str>),
    #[serde(rename = "error")]
    Error(Cow<'a, str>),
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolsEntry<'a> {
    function_declarations: Vec<Declaration<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Declaration<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    description: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters: Option<Value>,
    /// A schema with `$ref`s, as JSON Schema (never inlined).
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters_json_schema: Option<Value>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolConfig<'a> {
    function_calling_config: CallingConfig<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CallingConfig<'a> {
    mode: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    allowed_function_names: Option<[&'a str; 1]>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerationConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    /// `application/json` for a typed answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    response_mime_type: Option<&'static str>,
    /// A typed answer's schema, rewritten as Gemini's schema dialect wants.
    #[serde(skip_serializing_if = "Option::is_none")]
    response_schema: Option<Value>,
    /// A typed answer's schema with `$ref`s, as JSON Schema (never inlined).
    #[serde(skip_serializing_if = "Option::is_none")]
    response_json_schema: Option<Value>,
}

/// A schema with references as Gemini's `*JsonSchema` fields take it: as it is, but for
/// the `$schema` dialect marker, which says nothing to the model.
fn as_json_schema(schema: &Value) -> Value {
    let mut schema = schema.clone();
    if let Value::Object(o) = &mut schema {
        o.remove("$schema");
    }
    schema
}

/// A user-side part; `None` for parts this wire cannot carry here.
/// The wire's name in placeholders.
const WIRE: &str = "Gemini";

/// The image media types Gemini takes inline.
const IMAGES: [&str; 5] = [
    "image/png",
    "image/jpeg",
    "image/webp",
    "image/heic",
    "image/heif",
];

/// True for a base64 part Gemini takes as `inlineData`: an image of a media type it
/// reads, a PDF, audio or video.
fn inline(p: &ContentPart) -> bool {
    match placement::kind(p) {
        Kind::Image => placement::image_media_in(p, &IMAGES),
        Kind::Pdf => true,
        Kind::Binary => {
            placement::media(p).is_some_and(|m| m.starts_with("audio/") || m.starts_with("video/"))
        }
        _ => false,
    }
}

/// The blob of an [`inline`] part.
fn blob(p: &ContentPart) -> Blob<'_> {
    Blob {
        mime_type: placement::media(p).unwrap_or("application/octet-stream"),
        data: placement::base64_data(p),
    }
}

/// A user-side part: itself where Gemini takes it (text, [`inline`] data, a URL as
/// `fileData`), as text where it does not (a text file's contents, a placeholder);
/// `None` for empty text and reasoning.
fn user_part(p: &ContentPart) -> Option<GPart<'_>> {
    Some(match placement::kind(p) {
        Kind::Text if !p.content.is_empty() => GPart {
            text: Some(Cow::Borrowed(&p.content)),
            ..Default::default()
        },
        Kind::Text | Kind::Thinking => return None,
        _ if inline(p) => GPart {
            inline_data: Some(blob(p)),
            ..Default::default()
        },
        Kind::ImageUrl | Kind::FileUrl => GPart {
            file_data: Some(FileData {
                mime_type: p.media().or_else(|| mime_from_url(&p.content)),
                file_uri: &p.content,
            }),
            ..Default::default()
        },
        _ => GPart {
            text: Some(placement::as_text(p, WIRE)?),
            ..Default::default()
        },
    })
}

/// The media type of a URL by its extension (Gemini wants one on `fileData`).
fn mime_from_url(url: &str) -> Option<&'static str> {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    let ext = path.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "webp" => "image/webp",
        "gif" => "image/gif",
        "heic" => "image/heic",
        "pdf" => "application/pdf",
        _ => return None,
    })
}

fn model_parts<'a>(
    m: &'a Message,
    answered: &'a HashSet<&'a str>,
) -> Result<Vec<GPart<'a>>, EncodeError> {
    let mut parts = Vec::with_capacity(m.content.len() + m.tool_calls.len());
    let mut trailing = Vec::new();
    for p in &m.content {
        match p.r#type {
            ContentType::Thinking => {
                if let Some(sig) = p.signature().filter(|s| !s.is_empty()) {
                    parts.push(GPart {
                        text: Some(Cow::Borrowed(&p.content)),
                        thought: true,
                        thought_signature: Some(sig),
                        ..Default::default()
                    });
                }
            }
            ContentType::Text => {
                let sig = p
                    .options
                    .get(THOUGHT_SIGNATURE_KEY)
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty());
                if p.content.is_empty() && sig.is_some() {
                    // Gemini 3 ends a turn with an empty signed text part, after the
                    // calls: keep it there.
                    trailing.push(GPart {
                        text: Some(Cow::Borrowed(&p.content)),
                        thought_signature: sig,
                        ..Default::default()
                    });
                } else if !p.content.is_empty() {
                    parts.push(GPart {
                        text: Some(Cow::Borrowed(&p.content)),
                        thought_signature: sig,
                        ..Default::default()
                    });
                }
            }
            // Another provider's block: nothing Gemini can read.
            ContentType::Unsupported => {}
            _ => parts.extend(user_part(p)),
        }
    }
    for (i, c) in replayable(m, answered).enumerate() {
        let Some(name) = c.name.as_deref() else {
            return Err(EncodeError::Invalid(format!(
                "tool call {i} of an assistant message has no name; Gemini needs it"
            )));
        };
        parts.push(GPart {
            function_call: Some(FunctionCall {
                id: c.call_id.as_deref().filter(|_| !synthesized_id(c)),
                name,
                args: ArgsObject::of(c),
            }),
            thought_signature: c
                .metadata
                .get(THOUGHT_SIGNATURE_KEY)
                .and_then(Value::as_str),
            ..Default::default()
        });
    }
    parts.extend(trailing);
    Ok(parts)
}

/// Builds the user content that answers `calls` with `results`.
fn response_parts<'a>(
    results: &[&'a ToolResult],
    calls: &'a [ToolCall],
    gemini3: bool,
) -> Result<Vec<GPart<'a>>, EncodeError> {
    // Call ids → first position, built once: looking each result's call up in the list
    // made 10⁵ call/result pairs quadratic.
    let mut by_id: std::collections::HashMap<&str, usize> =
        std::collections::HashMap::with_capacity(calls.len());
    for (i, c) in calls.iter().enumerate() {
        if let Some(id) = c.call_id.as_deref() {
            by_id.entry(id).or_insert(i);
        }
    }
    let position = |r: &ToolResult| by_id.get(r.tool_call_id.as_str()).copied();
    let mut ordered: Vec<(Option<usize>, &'a ToolResult)> =
        results.iter().map(|r| (position(r), *r)).collect();
    // Call order; results answering no known call keep their order at the end.
    ordered.sort_by_key(|(p, _)| p.unwrap_or(usize::MAX));
    let mut parts = Vec::with_capacity(ordered.len());
    let mut trailing = Vec::new();
    for (pos, r) in ordered {
        let call = pos.map(|p| &calls[p]);
        let Some(name) = r
            .name
            .as_deref()
            .or_else(|| call.and_then(|c| c.name.as_deref()))
        else {
            return Err(EncodeError::Invalid(format!(
                "tool result for {} has no name and answers no known call; Gemini needs the function name",
                r.tool_call_id
            )));
        };
        // Inline data goes inside the response on Gemini 3, after the responses
        // otherwise, and so do URLs; the rest is text.
        let elsewhere = |p: &ContentPart| {
            inline(p) || matches!(placement::kind(p), Kind::ImageUrl | Kind::FileUrl)
        };
        let text = placement::joined_as_text(&r.content, WIRE, |p| !elsewhere(p));
        let mut inline_parts = Vec::new();
        for p in r.content.iter().filter(|p| elsewhere(p)) {
            if gemini3 && inline(p) {
                inline_parts.push(ResponsePart {
                    inline_data: blob(p),
                });
            } else {
                trailing.extend(user_part(p));
            }
        }
        parts.push(GPart {
            function_response: Some(FunctionResponse {
                id: call
                    .filter(|c| !synthesized_id(c))
                    .and_then(|c| c.call_id.as_deref()),
                name,
                response: if r.is_error() {
                    ResponseBody::Error(text)
                } else {
                    ResponseBody::Output(text)
                },
                parts: inline_parts,
            }),
            ..Default::default()
        });
    }
    parts.extend(trailing);
    Ok(parts)
}

/// Encodes `conv` as a `generateContent` request body.
pub(crate) fn encode(conv: &Conversation, opts: &RequestOptions) -> Result<Vec<u8>, EncodeError> {
    // Calls of a cut-off message that nothing answers are not sent (see `replayable`).
    let answered = answered_ids(conv);
    let gemini3 = opts.model.contains("gemini-3");
    let mut system = String::new();
    if let Some(s) = conv.system.as_deref() {
        join_text(&mut system, s);
    }
    let mut contents: Vec<GContent<'_>> = Vec::with_capacity(conv.messages.len());
    let mut last_calls: &[ToolCall] = &[];
    let mut pending: Vec<&ToolResult> = Vec::new();
    // Set when the newest content is a user content a user message may join.
    let mut open_user = false;

    for m in &conv.messages {
        if m.role != Role::Tool && !pending.is_empty() {
            let parts = response_parts(&pending, last_calls, gemini3)?;
            pending.clear();
            contents.push(GContent {
                role: "user",
                parts,
            });
            open_user = true;
        }
        match m.role {
            Role::System => {
                for p in m.content.iter().filter(|p| p.r#type == ContentType::Text) {
                    join_text(&mut system, &p.content);
                }
            }
            Role::Tool => pending.extend(m.tool_results.iter()),
            Role::User => {
                let parts = m.content.iter().filter_map(user_part);
                match contents.last_mut() {
                    Some(c) if open_user => c.parts.extend(parts),
                    _ => {
                        contents.push(GContent {
                            role: "user",
                            parts: parts.collect(),
                        });
                        open_user = true;
                    }
                }
            }
            Role::Assistant => {
                let parts = model_parts(m, &answered)?;
                last_calls = &m.tool_calls;
                if parts.is_empty() {
                    continue;
                }
                open_user = false;
                contents.push(GContent {
                    role: "model",
                    parts,
                });
            }
        }
    }
    if !pending.is_empty() {
        let parts = response_parts(&pending, last_calls, gemini3)?;
        contents.push(GContent {
            role: "user",
            parts,
        });
    }

    // A typed answer beside other tools goes through the answer tool (older models
    // refuse a JSON response type together with functions); alone, it is native.
    let native_answer = conv
        .response_format
        .as_ref()
        .filter(|_| listed_tools(conv).next().is_none());
    let declared: Vec<&ToolDefinition> = if native_answer.is_some() {
        Vec::new()
    } else {
        conv.tools.iter().collect()
    };
    let mut declarations: Vec<Declaration<'_>> = Vec::with_capacity(declared.len());
    for t in declared {
        let schema = &t.parameters_schema;
        let has_params = schema
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| !p.is_empty())
            || schema.get("$ref").is_some()
            || schema.get("anyOf").is_some();
        let (parameters, parameters_json_schema) = if !has_params {
            (None, None)
        } else if has_refs(schema) {
            (None, Some(as_json_schema(schema)))
        } else {
            let rewritten = gemini_schema(schema).map_err(|e| EncodeError::Unsupported {
                format: FORMAT,
                message: format!("tool `{}`: {e}", t.name),
            })?;
            (Some(rewritten), None)
        };
        declarations.push(Declaration {
            name: &t.name,
            description: &t.description,
            parameters,
            parameters_json_schema,
        });
    }
    let tools = if declarations.is_empty() {
        Vec::new()
    } else {
        vec![ToolsEntry {
            function_declarations: declarations,
        }]
    };

    let tool_config = match &conv.tool_choice {
        // The answer through its tool: some tool must be called, the answer at last.
        _ if conv.response_format.is_some() && native_answer.is_none() => Some(("ANY", None)),
        ToolChoice::Unset => None,
        ToolChoice::Mode(ToolChoiceMode::Auto) => Some(("AUTO", None)),
        ToolChoice::Mode(ToolChoiceMode::None) => Some(("NONE", None)),
        ToolChoice::Mode(ToolChoiceMode::Required) => Some(("ANY", None)),
        ToolChoice::Tool { name } => Some(("ANY", Some([name.as_str()]))),
    }
    .map(|(mode, allowed)| ToolConfig {
        function_calling_config: CallingConfig {
            mode,
            allowed_function_names: allowed,
        },
    });

    let (response_schema, response_json_schema) = match native_answer {
        None => (None, None),
        Some(f) if has_refs(&f.schema) => (None, Some(as_json_schema(&f.schema))),
        Some(f) => {
            let rewritten = gemini_schema(&f.schema).map_err(|e| EncodeError::Unsupported {
                format: FORMAT,
                message: format!("the answer schema `{}`: {e}", f.name),
            })?;
            (Some(rewritten), None)
        }
    };
    let generation_config =
        (opts.max_tokens.is_some() || opts.temperature.is_some() || native_answer.is_some())
            .then_some(GenerationConfig {
                max_output_tokens: opts.max_tokens,
                temperature: opts.temperature,
                response_mime_type: native_answer.map(|_| "application/json"),
                response_schema,
                response_json_schema,
            });

    let body = Body {
        contents,
        system_instruction: (!system.is_empty()).then_some(SystemInstruction {
            parts: [TextOnly { text: system }],
        }),
        tools,
        tool_config,
        generation_config,
    };
    to_body(FORMAT, &body, opts, body_size_hint(conv))
}

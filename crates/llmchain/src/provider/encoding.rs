//! Pieces shared by the request encoders.

use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

use super::assembly::SYNTHESIZED_ID_KEY;
use super::error::EncodeError;
use super::format::RequestOptions;
use crate::conversation::{Conversation, ResponseFormat, ToolDefinition};
use crate::message::{Arguments, ContentPart, ToolCall};

/// A call's arguments as a JSON object, borrowed when already parsed: what the
/// object-argument wires (Anthropic `input`, Gemini `args`, Ollama `arguments`) get.
/// Raw text that is not an object becomes `{}` (as `arguments_as_map`).
pub(crate) enum ArgsObject<'a> {
    /// Parsed arguments.
    Borrowed(&'a Map<String, Value>),
    /// Parsed from raw text.
    Owned(Map<String, Value>),
}

impl<'a> ArgsObject<'a> {
    /// The object of `call`.
    pub(crate) fn of(call: &'a ToolCall) -> Self {
        match &call.arguments {
            Some(Arguments::Object(m)) => ArgsObject::Borrowed(m),
            _ => ArgsObject::Owned(call.arguments_as_map()),
        }
    }
}

impl Serialize for ArgsObject<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ArgsObject::Borrowed(m) => m.serialize(s),
            ArgsObject::Owned(m) => m.serialize(s),
        }
    }
}

/// True when the decoder made up the call's id (never echo it to a provider).
pub(crate) fn synthesized_id(call: &ToolCall) -> bool {
    call.metadata
        .get(SYNTHESIZED_ID_KEY)
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// A guess at the size of a request body for `conv`: its text, arguments and results
/// plus an allowance per message, call and tool. The body buffer starts at this size
/// instead of doubling from a few KiB, which for a long conversation cost as much as
/// the serialisation (copies, and fresh pages faulted in at each doubling). A guess that
/// is short only means one more growth.
pub(crate) fn body_size_hint(conv: &Conversation) -> usize {
    let parts = |p: &[ContentPart]| p.iter().map(|c| c.content.len() + 32).sum::<usize>();
    let arguments = |c: &ToolCall| match &c.arguments {
        Some(Arguments::Object(m)) => m
            .iter()
            .map(|(k, v)| k.len() + v.as_str().map_or(16, str::len) + 8)
            .sum(),
        _ => c.raw_arguments_len(),
    };
    let messages: usize = conv
        .messages
        .iter()
        .map(|m| {
            64 + parts(&m.content)
                + m.tool_calls
                    .iter()
                    .map(|c| 96 + c.name.as_deref().map_or(0, str::len) + arguments(c))
                    .sum::<usize>()
                + m.tool_results
                    .iter()
                    .map(|r| 96 + parts(&r.content))
                    .sum::<usize>()
        })
        .sum();
    let tools: usize = conv.tools.iter().map(|t| 256 + t.description.len()).sum();
    (1024 + conv.system.as_ref().map_or(0, String::len) + messages + tools).min(64 << 20)
}

/// Serializes `body` and merges `opts.extra` last (top-level keys replace).
pub(crate) fn to_body<T: Serialize>(
    format: &'static str,
    body: &T,
    opts: &RequestOptions,
    size_hint: usize,
) -> Result<Vec<u8>, EncodeError> {
    let err = |e: serde_json::Error| EncodeError::Unsupported {
        format,
        message: e.to_string(),
    };
    if opts.extra.is_empty() {
        let mut out = Vec::with_capacity(size_hint);
        serde_json::to_writer(&mut out, body).map_err(err)?;
        return Ok(out);
    }
    let mut v = serde_json::to_value(body).map_err(err)?;
    if let Value::Object(m) = &mut v {
        for (k, val) in &opts.extra {
            m.insert(k.clone(), val.clone());
        }
    }
    serde_json::to_vec(&v).map_err(err)
}

/// Appends `text` to `acc`, separated by a blank line.
pub(crate) fn join_text(acc: &mut String, text: &str) {
    if text.is_empty() {
        return;
    }
    if !acc.is_empty() {
        acc.push_str("\n\n");
    }
    acc.push_str(text);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Message, ToolResult};
    use crate::provider::Format;

    #[test]
    fn the_size_hint_is_near_every_format_body() {
        let mut conv = Conversation::new();
        conv.system = Some("You are terse.".into());
        for i in 0..200 {
            conv.messages.push(Message::user(
                format!("Round {i}: read the files. ").repeat(4),
            ));
            let calls = (0..2)
                .map(|k| {
                    let args = serde_json::json!({"path": format!("src/{i}_{k}.rs"), "lines": 40});
                    ToolCall::function(format!("call_{i}_{k}"), "read_file", args).unwrap()
                })
                .collect();
            conv.messages.push(Message::assistant_with_calls("", calls));
            let results = (0..2)
                .map(|k| ToolResult::text(format!("call_{i}_{k}"), "fn main() {}\n".repeat(20)))
                .collect();
            conv.messages.push(Message::tool(results));
        }
        let hint = body_size_hint(&conv);
        for &format in Format::ALL {
            let body = format
                .codec()
                .encode(&conv, &RequestOptions::default())
                .unwrap();
            // Within a factor of two either way: one growth at most, no large waste.
            assert!(
                hint >= body.len() / 2 && hint <= body.len() * 2,
                "{format:?}: hint {hint}, body {}",
                body.len()
            );
        }
    }
}

#[cfg(test)]
mod extra_fields {
    use serde_json::{Map, Value, json};

    use crate::conversation::{Conversation, ToolDefinition};
    use crate::message::Message;
    use crate::provider::{Format, RequestOptions};

    /// Every encoder merges extra fields one way: a top-level key given there replaces
    /// the typed one, once (a body with a key twice is read differently by servers).
    #[test]
    fn an_extra_key_replaces_the_typed_one_in_every_format() {
        let mut conv = Conversation::new();
        conv.system = Some("be brief".into());
        conv.tools.push(
            serde_json::from_value::<ToolDefinition>(json!({
                "name": "t",
                "description": "a tool",
                "parameters_schema": {"type": "object", "properties": {}},
            }))
            .unwrap(),
        );
        conv.messages.push(Message::user("hi"));
        for &format in Format::ALL {
            let opts = RequestOptions {
                model: "m".into(),
                stream: true,
                max_tokens: Some(100),
                temperature: Some(0.7),
                extra: Map::new(),
            };
            let plain = format.codec().encode(&conv, &opts).unwrap();
            let typed: Map<String, Value> = serde_json::from_slice(&plain).unwrap();
            for key in typed.keys() {
                let mut with = opts.clone();
                with.extra.insert(key.clone(), json!("from extra"));
                let body = format.codec().encode(&conv, &with).unwrap();
                let parsed: Map<String, Value> = serde_json::from_slice(&body).unwrap();
                assert_eq!(parsed[key], "from extra", "{format}: {key}");
                // Parsing keeps the last of a repeated key: a body with no repeats
                // serializes back to as many bytes.
                assert_eq!(
                    serde_json::to_vec(&parsed).unwrap().len(),
                    body.len(),
                    "{format}: {key} written twice: {}",
                    String::from_utf8_lossy(&body)
                );
            }
        }
    }
}

/// The tools a request lists when the provider has a native mechanism for typed answers:
/// all but the answer tool of the conversation's [`ResponseFormat`], which such a provider
/// never sees (it answers in text).
pub(crate) fn listed_tools(conv: &Conversation) -> impl Iterator<Item = &ToolDefinition> {
    let answer = conv.response_format.as_ref().map(|f| f.name.as_str());
    conv.tools
        .iter()
        .filter(move |t| Some(t.name.as_str()) != answer)
}

/// A typed answer's schema as OpenAI's strict mode wants it when the answer is strict
/// (every object closed, every property listed, the optional ones nullable).
pub(crate) fn answer_schema(format: &ResponseFormat) -> serde_json::Value {
    if format.strict {
        crate::provider::openai_chat::strict_schema(&format.schema)
    } else {
        format.schema.clone()
    }
}

/// A typed answer's schema as Anthropic's structured outputs want it: every object
/// closed (`additionalProperties: false`), what is required left as it is.
pub(crate) fn closed_schema(schema: &serde_json::Value) -> serde_json::Value {
    fn close(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(o) => {
                let object = o.get("type").and_then(serde_json::Value::as_str) == Some("object")
                    || o.contains_key("properties");
                if object {
                    o.entry("additionalProperties")
                        .or_insert(serde_json::Value::Bool(false));
                }
                for (_, child) in o.iter_mut() {
                    close(child);
                }
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(close),
            _ => {}
        }
    }
    let mut v = schema.clone();
    close(&mut v);
    v
}

/// The JSON-schema answer object OpenAI's APIs take (`response_format.json_schema` of
/// Chat, `text.format` of Responses, which adds `"type"` beside them).
pub(crate) fn openai_answer(format: &ResponseFormat) -> serde_json::Map<String, serde_json::Value> {
    let mut m = serde_json::Map::new();
    m.insert("name".into(), format.name.clone().into());
    if let Some(d) = &format.description {
        m.insert("description".into(), d.clone().into());
    }
    m.insert("schema".into(), answer_schema(format));
    m.insert("strict".into(), format.strict.into());
    m
}

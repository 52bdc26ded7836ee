//! Wire-value helpers shared by the JSON decoders: borrowed strings that may also be
//! objects, string-or-parts content, usage and error shapes, and stop-reason mapping.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::error::DecodeError;
use super::event::StopReason;
use super::outcome::ProviderError;
use crate::message::TokenUsage;

/// A member read for telemetry only (a response id, a model name): its text when the
/// wire sent a string, nothing for any other value, which never rejects the event.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct AnyText(pub(crate) Option<String>);

impl<'de> Deserialize<'de> for AnyText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(AnyText(match Value::deserialize(d)? {
            Value::String(s) => Some(s),
            _ => None,
        }))
    }
}

/// Arguments as the wire gave them: JSON text (borrowed when unescaped) or an object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ArgsField<'a> {
    /// JSON text (a string on the wire).
    Text(Cow<'a, str>),
    /// An object (llama.cpp builds, Ollama, gateways).
    Object(Map<String, Value>),
    /// Any other JSON value: kept as its text, which fails validation later.
    Other(String),
}

impl<'de: 'a, 'a> Deserialize<'de> for ArgsField<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = ArgsField<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("arguments as a string or an object")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(ArgsField::Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(ArgsField::Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(ArgsField::Text(Cow::Owned(v)))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let m = Map::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(ArgsField::Object(m))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                let v = Vec::<Value>::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
                Ok(ArgsField::Other(Value::Array(v).to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
                Ok(ArgsField::Other(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(ArgsField::Other(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(ArgsField::Other(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                Ok(ArgsField::Other(v.to_string()))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// Message content: a string, or an array of typed parts (Mistral, compatible servers).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ContentField<'a> {
    /// Plain text.
    Text(Cow<'a, str>),
    /// Typed parts, kept as JSON.
    Parts(Vec<Value>),
}

impl<'de: 'a, 'a> Deserialize<'de> for ContentField<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = ContentField<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("content as a string or an array of parts")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(ContentField::Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(ContentField::Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(ContentField::Text(Cow::Owned(v)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                let v = Vec::<Value>::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
                Ok(ContentField::Parts(v))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

impl ContentField<'_> {
    /// Visits (is_reasoning, text) pieces: Mistral `text` and `thinking` chunks.
    pub(crate) fn for_each(&self, mut f: impl FnMut(bool, &str)) {
        match self {
            ContentField::Text(t) => f(false, t),
            ContentField::Parts(parts) => {
                for p in parts {
                    match p.get("type").and_then(Value::as_str) {
                        Some("text") | Some("output_text") => {
                            if let Some(t) = p.get("text").and_then(Value::as_str) {
                                f(false, t);
                            }
                        }
                        Some("thinking") | Some("reasoning") => match p.get("thinking") {
                            Some(Value::Array(inner)) => {
                                for i in inner {
                                    if let Some(t) = i.get("text").and_then(Value::as_str) {
                                        f(true, t);
                                    }
                                }
                            }
                            Some(Value::String(t)) => f(true, t),
                            _ => {
                                if let Some(t) = p.get("text").and_then(Value::as_str) {
                                    f(true, t);
                                }
                            }
                        },
                        _ => {}
                    }
                }
            }
        }
    }
}

/// Token usage in the OpenAI shapes (`prompt_tokens`/`completion_tokens` or
/// `input_tokens`/`output_tokens`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub struct WireUsage {
    /// Input tokens.
    #[serde(default, alias = "input_tokens")]
    pub prompt_tokens: Option<u64>,
    /// Output tokens.
    #[serde(default, alias = "output_tokens")]
    pub completion_tokens: Option<u64>,
    /// `cached_tokens` (Chat `prompt_tokens_details`, Responses `input_tokens_details`).
    #[serde(default, alias = "input_tokens_details")]
    pub prompt_tokens_details: Option<TokenDetails>,
    /// `reasoning_tokens` (Chat `completion_tokens_details`, Responses
    /// `output_tokens_details`).
    #[serde(default, alias = "output_tokens_details")]
    pub completion_tokens_details: Option<TokenDetails>,
}

/// The token details OpenAI reports beside a count.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
pub struct TokenDetails {
    /// Input tokens read from the prompt cache.
    #[serde(default)]
    pub cached_tokens: Option<u64>,
    /// Output tokens spent on reasoning.
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
}

impl From<WireUsage> for TokenUsage {
    fn from(u: WireUsage) -> Self {
        TokenUsage::new(
            u.prompt_tokens.unwrap_or(0),
            u.completion_tokens.unwrap_or(0),
        )
        .with_cache(u.prompt_tokens_details.and_then(|d| d.cached_tokens), None)
        .with_reasoning(u.completion_tokens_details.and_then(|d| d.reasoning_tokens))
    }
}

/// A provider error from a JSON value: `{"message","type"|"code"}` or a bare string.
pub(crate) fn provider_error(v: &Value) -> ProviderError {
    match v {
        Value::String(s) => ProviderError {
            kind: "error".into(),
            message: s.clone(),
        },
        Value::Object(o) => {
            let kind = ["type", "code", "status"]
                .iter()
                .find_map(|k| match o.get(*k) {
                    Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
                    Some(Value::Number(n)) => Some(n.to_string()),
                    _ => None,
                })
                .unwrap_or_else(|| "error".into());
            let message = match o.get("message") {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => v.to_string(),
            };
            ProviderError { kind, message }
        }
        other => ProviderError {
            kind: "error".into(),
            message: other.to_string(),
        },
    }
}

/// Normalises an OpenAI-style `finish_reason`.
pub(crate) fn chat_stop_reason(raw: &str) -> StopReason {
    match raw {
        "tool_calls" | "function_call" | "tool_use" => StopReason::ToolCalls,
        "stop" | "end_turn" | "eos" => StopReason::EndTurn,
        "length" | "max_tokens" | "model_length" => StopReason::MaxTokens,
        "content_filter" => StopReason::ContentFilter,
        "stop_sequence" => StopReason::StopSequence,
        "error" => StopReason::Error,
        _ => StopReason::Other,
    }
}

/// A serde_json error as a `Malformed` decode error.
pub(crate) fn malformed(format: &'static str, e: &serde_json::Error) -> DecodeError {
    DecodeError::Malformed {
        format,
        message: e.to_string(),
    }
}

/// A `WrongFormat` decode error.
pub(crate) fn wrong_format(format: &'static str, message: impl Into<String>) -> DecodeError {
    DecodeError::WrongFormat {
        format,
        message: message.into(),
    }
}

/// Whether a body looks like a stream (SSE or NDJSON) rather than one JSON document:
/// true unless the first non-blank byte opens a JSON object or array. A BOM is skipped.
pub(crate) fn looks_like_sse(body: &[u8]) -> bool {
    let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        None => true,
        Some(b) => *b != b'{' && *b != b'[',
    }
}

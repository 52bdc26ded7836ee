//! Pieces shared by the Anthropic, Gemini and Ollama request encoders.

use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

use super::assembly::SYNTHESIZED_ID_KEY;
use super::error::EncodeError;
use super::format::RequestOptions;
use crate::message::{Arguments, ToolCall};

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

/// Serializes `body` and merges `opts.extra` last (top-level keys replace).
pub(crate) fn to_body<T: Serialize>(
    format: &'static str,
    body: &T,
    opts: &RequestOptions,
) -> Result<Vec<u8>, EncodeError> {
    let err = |e: serde_json::Error| EncodeError::Unsupported {
        format,
        message: e.to_string(),
    };
    if opts.extra.is_empty() {
        let mut out = Vec::with_capacity(4096);
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

//! Rendering a scripted assistant response as a provider's *response* stream.
//!
//! The mirror image of the decoders: it writes the bytes a provider would send, so the
//! scripted model, the demo and local test servers speak the real wire format and
//! exercise the real decoders. Fragment boundaries are chosen like real servers do
//! (small, arbitrary substrings of the argument text).

use serde_json::json;

use super::format::Format;
use crate::message::TokenUsage;

/// A tool call in a scripted response.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptedCall {
    /// The wire id.
    pub id: String,
    /// The tool name.
    pub name: String,
    /// The argument text, streamed as is (it may be deliberately invalid JSON).
    pub arguments: String,
}

/// How a scripted response ends.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub enum ScriptStop {
    /// A natural end (`tool_calls`/`tool_use` when there are calls, else end of turn).
    #[default]
    Natural,
    /// Cut off by the token limit in the middle of the last call's arguments.
    MaxTokens,
    /// An error event after part of the response.
    Error {
        /// Provider error type, e.g. `overloaded_error`.
        kind: String,
        /// Message.
        message: String,
    },
    /// The body just ends, mid-response.
    Truncated,
}

/// A scripted assistant response.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponseScript {
    /// Reasoning text, streamed first.
    pub reasoning: Option<String>,
    /// Visible text.
    pub text: Option<String>,
    /// Tool calls, in order.
    pub tool_calls: Vec<ScriptedCall>,
    /// How it ends.
    pub stop: ScriptStop,
    /// Usage to report.
    pub usage: TokenUsage,
    /// Bytes per text/argument fragment (at least 1).
    pub fragment_bytes: usize,
    /// Model name written into the stream.
    pub model: String,
}

impl Default for ResponseScript {
    fn default() -> Self {
        ResponseScript {
            reasoning: None,
            text: None,
            tool_calls: Vec::new(),
            stop: ScriptStop::Natural,
            usage: TokenUsage::new(0, 0),
            fragment_bytes: 12,
            model: "scripted-model".into(),
        }
    }
}

impl ResponseScript {
    /// A text-only response.
    pub fn text(text: impl Into<String>) -> Self {
        ResponseScript {
            text: Some(text.into()),
            ..Default::default()
        }
    }

    /// A response with one tool call (and optional lead-in text).
    pub fn tool_call(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        ResponseScript::default().with_call(id, name, arguments)
    }

    /// Adds a tool call.
    #[must_use]
    pub fn with_call(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        self.tool_calls.push(ScriptedCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        });
        self
    }

    /// Sets the visible text.
    #[must_use]
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }

    /// Sets the reasoning text.
    #[must_use]
    pub fn with_reasoning(mut self, text: impl Into<String>) -> Self {
        self.reasoning = Some(text.into());
        self
    }

    /// Sets how it ends.
    #[must_use]
    pub fn with_stop(mut self, stop: ScriptStop) -> Self {
        self.stop = stop;
        self
    }

    /// Sets the usage.
    #[must_use]
    pub fn with_usage(mut self, input: u64, output: u64) -> Self {
        self.usage = TokenUsage::new(input, output);
        self
    }
}

/// The formats [`render_stream`] can write: every format.
pub const RENDERABLE: &[Format] = Format::ALL;

/// A script that a format's wire cannot carry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RenderError {
    /// Gemini and Ollama send a call's arguments as a JSON object in one piece, so
    /// arguments that are not a JSON object (e.g. deliberately invalid JSON) cannot be
    /// written on those wires.
    #[error(
        "{format} cannot carry tool call '{name}': its arguments are not a JSON object, and {format} sends arguments as whole objects (script invalid arguments with openai_chat, openai_responses or anthropic)"
    )]
    ArgumentsNotAnObject {
        /// The format asked for.
        format: Format,
        /// The call's tool name.
        name: String,
    },
    /// The format's descriptor has no renderer.
    #[error("{0} has no renderer of scripted responses")]
    NoRenderer(Format),
}

/// Renders the script as the streamed body `format` would send.
///
/// OpenAI Chat, Responses and Anthropic stream arguments in fragments of
/// [`ResponseScript::fragment_bytes`]; Gemini and Ollama send each call whole, as real
/// servers do, so there a [`ScriptStop::MaxTokens`] cut drops the unfinished last call
/// and Gemini's ids are the decoder's synthesised ones, not the script's.
///
/// ```
/// use llmchain::provider::render::{ResponseScript, render_stream};
/// use llmchain::provider::{DecoderConfig, Format};
///
/// let script = ResponseScript::tool_call("call_1", "get_weather", r#"{"city": "Paris"}"#);
/// for &format in Format::ALL {
///     let body = render_stream(format, &script).unwrap();
///     let codec = format.codec();
///     let message = codec.decode_body(&body, 7, DecoderConfig::default()).unwrap().message;
///     assert_eq!(message.tool_calls[0].name.as_deref(), Some("get_weather"));
/// }
/// ```
pub fn render_stream(format: Format, script: &ResponseScript) -> Result<Vec<u8>, RenderError> {
    let render = format
        .spec()
        .renderer
        .ok_or(RenderError::NoRenderer(format))?;
    render(script)
}

/// The calls a whole-call wire sends (all but a MaxTokens-cut last one), with their
/// arguments as objects.
pub(crate) fn whole_calls(
    format: Format,
    s: &ResponseScript,
) -> Result<Vec<(&ScriptedCall, serde_json::Value)>, RenderError> {
    let keep = if s.stop == ScriptStop::MaxTokens {
        s.tool_calls.len().saturating_sub(1)
    } else {
        s.tool_calls.len()
    };
    s.tool_calls[..keep]
        .iter()
        .map(|c| {
            let args = if c.arguments.trim().is_empty() {
                json!({})
            } else {
                serde_json::from_str::<serde_json::Value>(&c.arguments)
                    .ok()
                    .filter(serde_json::Value::is_object)
                    .ok_or_else(|| RenderError::ArgumentsNotAnObject {
                        format,
                        name: c.name.clone(),
                    })?
            };
            Ok((c, args))
        })
        .collect()
}

/// Splits text into fragments of about `n` bytes on character boundaries.
pub(crate) fn fragments(s: &str, n: usize) -> Vec<&str> {
    let n = n.max(1);
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let mut j = (i + n).min(s.len());
        while !s.is_char_boundary(j) {
            j += 1;
        }
        out.push(&s[i..j]);
        i = j;
    }
    out
}

/// The arguments actually sent: the whole text, or half of the last call's on MaxTokens.
pub(crate) fn sent_arguments(script: &ResponseScript, i: usize) -> &str {
    let a = &script.tool_calls[i].arguments;
    if script.stop == ScriptStop::MaxTokens && i + 1 == script.tool_calls.len() {
        let mut cut = a.len() / 2;
        while !a.is_char_boundary(cut) {
            cut -= 1;
        }
        &a[..cut]
    } else {
        a
    }
}

pub(crate) fn sse_data(out: &mut Vec<u8>, v: &serde_json::Value) {
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(v.to_string().as_bytes());
    out.extend_from_slice(b"\n\n");
}

pub(crate) fn sse_event(out: &mut Vec<u8>, name: &str, v: &serde_json::Value) {
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(name.as_bytes());
    out.push(b'\n');
    sse_data(out, v);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_respect_char_boundaries() {
        let s = "héllo wörld ✓";
        let parts = fragments(s, 2);
        assert_eq!(parts.concat(), s);
        assert!(parts.iter().all(|p| !p.is_empty()));
    }

    #[test]
    fn renders_both_formats() {
        let script = ResponseScript::tool_call("call_1", "calc", r#"{"expression": "2+2"}"#)
            .with_text("Let me compute.")
            .with_usage(10, 5);
        let chat = String::from_utf8(render_stream(Format::OPENAI_CHAT, &script).unwrap()).unwrap();
        assert!(chat.ends_with("data: [DONE]\n\n"));
        assert!(chat.contains("\"finish_reason\":\"tool_calls\""));
        let ant = String::from_utf8(render_stream(Format::ANTHROPIC, &script).unwrap()).unwrap();
        assert!(ant.contains("\"stop_reason\":\"tool_use\""));
        assert!(ant.contains("input_json_delta"));
        let bad = ResponseScript::tool_call("c", "w", "{not json");
        let err = render_stream(Format::GEMINI, &bad).unwrap_err();
        assert_eq!(
            err.to_string(),
            "gemini cannot carry tool call 'w': its arguments are not a JSON object, and gemini sends arguments as whole objects (script invalid arguments with openai_chat, openai_responses or anthropic)"
        );
        assert!(render_stream(Format::OLLAMA, &bad).is_err());
        assert!(render_stream(Format::OPENAI_RESPONSES, &bad).is_ok());
    }

    #[test]
    fn max_tokens_cuts_the_last_call() {
        let script =
            ResponseScript::tool_call("c", "w", r#"{"path": "a.txt", "content": "xxxxxxxx"}"#)
                .with_stop(ScriptStop::MaxTokens);
        let ant = String::from_utf8(render_stream(Format::ANTHROPIC, &script).unwrap()).unwrap();
        assert!(ant.contains("max_tokens"));
        assert!(!ant.contains("content_block_stop\",\"index\":0"));
    }
}

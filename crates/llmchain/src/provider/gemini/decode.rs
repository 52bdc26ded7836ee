//! Decoding Gemini `generateContent` / `streamGenerateContent?alt=sse` responses.
//!
//! Every SSE event is a whole `GenerateContentResponse`; a non-streaming body is one such
//! object (or, for `streamGenerateContent` without `alt=sse`, a JSON array of them).
//! Function calls arrive whole. Only the first candidate is read.
//!
//! **Synthesised ids.** Gemini calls usually have no `id`. The decoder then makes one up:
//! `call_<h>_<n>`, where `<n>` is the call's position in the message and `<h>` eight hex
//! digits of a hash of the response's `responseId` (just `call_<n>` when the response
//! has none). Ids are thus unique among the calls of one response, unique across
//! responses in practice, and the same for every chunking of a body. Such calls carry
//! `metadata.synthesized_id = true`; encoders never send these ids back.
//!
//! **Thought signatures** are kept verbatim: on a call in `metadata.thought_signature`,
//! on a thought part in `options.signature`, on a text part in
//! `options.thought_signature`.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;

use crate::message::{ContentType, MessageStatus, TokenUsage};
use crate::provider::assembly::{
    Assembler, Emit, THOUGHT_SIGNATURE_KEY, malformed, short_hash, wrong_format,
};
use crate::provider::error::DecodeError;
use crate::provider::event::StopReason;
use crate::provider::format::DecoderConfig;
use crate::provider::framed::EventHandler;
use crate::provider::outcome::DecodeOutcome;

use super::NAME as FORMAT;

/// Normalises a Gemini `finishReason`; `STOP` means tool calls when calls were made.
pub(crate) fn stop_reason(raw: &str, has_calls: bool) -> StopReason {
    match raw {
        "STOP" if has_calls => StopReason::ToolCalls,
        "STOP" => StopReason::EndTurn,
        "MAX_TOKENS" => StopReason::MaxTokens,
        "SAFETY"
        | "RECITATION"
        | "BLOCKLIST"
        | "PROHIBITED_CONTENT"
        | "SPII"
        | "IMAGE_SAFETY"
        | "IMAGE_PROHIBITED_CONTENT"
        | "IMAGE_RECITATION" => StopReason::ContentFilter,
        "MALFORMED_FUNCTION_CALL" | "UNEXPECTED_TOOL_CALL" | "TOO_MANY_TOOL_CALLS" => {
            StopReason::Error
        }
        _ => StopReason::Other,
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FunctionCall<'a> {
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default)]
    args: Option<Value>,
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default)]
    thought: Option<bool>,
    #[serde(default, borrow)]
    thought_signature: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    function_call: Option<FunctionCall<'a>>,
}

#[derive(Deserialize)]
struct Content<'a> {
    #[serde(default, borrow)]
    parts: Option<Vec<Part<'a>>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate<'a> {
    #[serde(default, borrow)]
    content: Option<Content<'a>>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
    #[serde(default)]
    index: Option<u64>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    #[serde(default)]
    prompt_token_count: Option<u64>,
    #[serde(default)]
    candidates_token_count: Option<u64>,
    #[serde(default)]
    thoughts_token_count: Option<u64>,
    #[serde(default)]
    tool_use_prompt_token_count: Option<u64>,
    #[serde(default)]
    cached_content_token_count: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback<'a> {
    #[serde(default, borrow)]
    block_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct ErrorBody<'a> {
    #[serde(default)]
    code: Option<i64>,
    #[serde(default, borrow)]
    message: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    status: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Response<'a> {
    #[serde(default, borrow)]
    candidates: Option<Vec<Candidate<'a>>>,
    #[serde(default)]
    usage_metadata: Option<UsageMetadata>,
    #[serde(default, borrow)]
    prompt_feedback: Option<PromptFeedback<'a>>,
    #[serde(default, borrow)]
    response_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    model_version: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    error: Option<ErrorBody<'a>>,
}

impl Response<'_> {
    fn is_gemini(&self) -> bool {
        self.candidates.is_some()
            || self.usage_metadata.is_some()
            || self.prompt_feedback.is_some()
            || self.response_id.is_some()
            || self.model_version.is_some()
            || self.error.is_some()
    }
}

/// The Gemini event handler.
#[derive(Debug)]
pub(crate) struct Events {
    config: DecoderConfig,
    asm: Assembler,
    id_prefix: Option<String>,
    finished: bool,
}

impl Events {
    /// A fresh handler.
    pub(crate) fn new(config: DecoderConfig) -> Self {
        Events {
            config,
            asm: Assembler::new(config.max_argument_bytes),
            id_prefix: None,
            finished: false,
        }
    }

    fn parse(data: &[u8]) -> Result<Response<'_>, DecodeError> {
        let r: Response<'_> = serde_json::from_slice(data).map_err(|e| {
            if e.is_data() {
                wrong_format(FORMAT, format!("not a GenerateContentResponse: {e}"))
            } else {
                malformed(FORMAT, e.to_string())
            }
        })?;
        if !r.is_gemini() {
            return Err(wrong_format(
                FORMAT,
                "an object without candidates, usageMetadata, promptFeedback or error",
            ));
        }
        Ok(r)
    }

    fn handle(&mut self, r: Response<'_>, emit: Emit<'_>) -> Result<(), DecodeError> {
        if self.asm.has_error() {
            return Ok(());
        }
        if let Some(e) = r.error {
            let kind = match (&e.status, e.code) {
                (Some(s), _) => s.to_string(),
                (None, Some(c)) => c.to_string(),
                (None, None) => "error".to_owned(),
            };
            self.asm
                .set_error(&kind, e.message.as_deref().unwrap_or(""), emit);
            return Ok(());
        }
        self.asm
            .set_response(r.response_id.as_deref(), r.model_version.as_deref());
        if self.id_prefix.is_none()
            && let Some(id) = r.response_id.as_deref().filter(|s| !s.is_empty())
        {
            self.id_prefix = Some(format!("call_{:08x}_", short_hash(id)));
        }
        let candidate = r
            .candidates
            .into_iter()
            .flatten()
            .find(|c| c.index.unwrap_or(0) == 0);
        if let Some(c) = candidate {
            for p in c.content.and_then(|c| c.parts).unwrap_or_default() {
                self.part(p, emit)?;
            }
            if let Some(raw) = c.finish_reason.as_deref() {
                let reason = stop_reason(raw, self.asm.has_finished_calls());
                self.asm.set_stop(reason, raw, emit);
                self.finished = true;
            }
        } else if let Some(block) = r.prompt_feedback.and_then(|f| f.block_reason) {
            self.asm.set_stop(StopReason::ContentFilter, &block, emit);
            self.finished = true;
        }
        if let Some(u) = r.usage_metadata {
            let input = u
                .prompt_token_count
                .unwrap_or(0)
                .saturating_add(u.tool_use_prompt_token_count.unwrap_or(0));
            let output = u
                .candidates_token_count
                .unwrap_or(0)
                .saturating_add(u.thoughts_token_count.unwrap_or(0));
            self.asm.set_usage(
                TokenUsage::new(input, output)
                    .with_cache(u.cached_content_token_count, None)
                    .with_reasoning(u.thoughts_token_count),
            );
        }
        Ok(())
    }

    fn part(&mut self, p: Part<'_>, emit: Emit<'_>) -> Result<(), DecodeError> {
        let sig = p.thought_signature.as_deref().filter(|s| !s.is_empty());
        if let Some(fc) = p.function_call {
            let name = fc.name.as_deref().unwrap_or("");
            let pos = match fc.id.as_deref().filter(|s| !s.is_empty()) {
                Some(id) => self.asm.start_call(Some(id), name, emit),
                None => {
                    let n = self.asm.call_count();
                    let id = match &self.id_prefix {
                        Some(prefix) => format!("{prefix}{n}"),
                        None => format!("call_{n}"),
                    };
                    self.asm.start_synthesized_call(&id, name, emit)
                }
            };
            if let Some(sig) = sig {
                self.asm
                    .set_call_metadata(pos, THOUGHT_SIGNATURE_KEY, Value::String(sig.into()));
            }
            match fc.args {
                Some(Value::Object(o)) => self.asm.set_arguments_object(pos, o, emit)?,
                None | Some(Value::Null) => {}
                // Not an object: keep the text so validation reports it.
                Some(Value::String(s)) => self.asm.push_arguments(pos, &s, emit)?,
                Some(other) => self.asm.push_arguments(pos, &other.to_string(), emit)?,
            }
            return self.asm.finish_call(pos, emit);
        }
        let Some(text) = p.text.as_deref() else {
            return Ok(());
        };
        if p.thought == Some(true) {
            let pos = self.asm.part_for(ContentType::Thinking);
            self.asm.push_text(pos, text, emit);
            if let Some(sig) = sig {
                self.asm.set_signature(pos, sig, emit);
            }
        } else {
            if text.is_empty() && sig.is_none() {
                return Ok(());
            }
            let pos = self.asm.part_for(ContentType::Text);
            self.asm.push_text(pos, text, emit);
            if let Some(sig) = sig {
                self.asm
                    .set_part_option(pos, THOUGHT_SIGNATURE_KEY, Value::String(sig.into()));
            }
        }
        Ok(())
    }

    fn status(&self) -> MessageStatus {
        match self.asm.stop() {
            _ if !self.finished => MessageStatus::Cancelled,
            Some(StopReason::MaxTokens) => MessageStatus::Length,
            Some(StopReason::Error) => MessageStatus::Cancelled,
            _ => MessageStatus::Complete,
        }
    }
}

impl EventHandler for Events {
    fn on_data(&mut self, data: &[u8], emit: Emit<'_>) -> Result<(), DecodeError> {
        let r = Events::parse(data)?;
        self.handle(r, emit)
    }

    fn finish(self, emit: Emit<'_>) -> Result<DecodeOutcome, DecodeError> {
        let status = self.status();
        Ok(self.asm.into_outcome(status, emit))
    }

    fn decode_whole(&mut self, body: &[u8], emit: Emit<'_>) -> Result<DecodeOutcome, DecodeError> {
        let mut ev = Events::new(self.config);
        if body.trim_ascii_start().starts_with(b"[") {
            // `streamGenerateContent` without `alt=sse`: a JSON array of responses.
            let all: Vec<Response<'_>> =
                serde_json::from_slice(body).map_err(|e| malformed(FORMAT, e.to_string()))?;
            if all.is_empty() {
                return Err(wrong_format(FORMAT, "an empty array"));
            }
            for r in all {
                if !r.is_gemini() {
                    return Err(wrong_format(FORMAT, "an array item is not a response"));
                }
                ev.handle(r, emit)?;
            }
        } else {
            let r = Events::parse(body)?;
            ev.handle(r, emit)?;
        }
        ev.finish(emit)
    }
}

/// Decodes a whole response body.
pub(crate) fn decode_whole(
    body: &[u8],
    config: DecoderConfig,
    emit: Emit<'_>,
) -> Result<DecodeOutcome, DecodeError> {
    Events::new(config).decode_whole(body, emit)
}

/// A streaming decoder of this format (its codec's [`Codec::stream_decoder`]).
///
/// [`Codec::stream_decoder`]: crate::provider::Codec::stream_decoder
pub(crate) fn stream_decoder(config: DecoderConfig) -> crate::provider::framed::SseDecoder<Events> {
    crate::provider::framed::SseDecoder::new(FORMAT, Events::new(config), config)
}

//! The codec conformance suite (feature `test-util`): what every [`Codec`] must do,
//! built in or written elsewhere. Each check returns what failed, as text a person can
//! act on; a test asserts it is `Ok`:
//!
//! ```
//! use llmchain::provider::Format;
//! use llmchain::provider::conformance;
//! use llmchain::provider::render::render_stream;
//!
//! for &format in Format::ALL {
//!     conformance::check_codec(format.codec(), &|s| render_stream(format, s)).unwrap();
//! }
//! ```
//!
//! - **Chunking independence**: a body decodes to the same outcome however it is cut
//!   into reads ([`check_chunking`]).
//! - **Round trip**: a scripted response, written as the format's wire bytes, decodes
//!   to the script's text, calls and arguments ([`check_round_trip`]).
//! - **A truncated call never runs**: no prefix of a body decodes to a finished message
//!   holding a complete call whose arguments differ from the whole body's
//!   ([`check_truncation`]).
//! - **Hostile input is bounded**: arguments past the cap and bytes that are no body at
//!   all end in an error or a cut-off message, never a panic or a complete oversized
//!   call ([`check_hostile`]).

use super::format::{Codec, DecoderConfig};
use super::outcome::DecodeOutcome;
use super::render::{RenderError, ResponseScript};
use crate::message::{MessageStatus, ToolCallStatus};

/// Writes a scripted response as a format's wire bytes (for a built-in format,
/// [`render_stream`](super::render::render_stream)).
pub type Render<'a> = &'a dyn Fn(&ResponseScript) -> Result<Vec<u8>, RenderError>;

/// The scripts the suite writes: text, one call, two calls with text, multi-byte text
/// and arguments.
fn scripts() -> Vec<ResponseScript> {
    vec![
        ResponseScript::text("Hello there, how can I help?"),
        ResponseScript::tool_call("call_1", "get_weather", r#"{"city": "Paris"}"#),
        ResponseScript::tool_call("call_a", "search", r#"{"query": "rust", "limit": 3}"#)
            .with_call("call_b", "fetch", r#"{"url": "https://example.com/ü"}"#)
            .with_text("Let me look — ✓"),
    ]
}

/// Every check on every script the suite writes with `render`.
pub fn check_codec(codec: &dyn Codec, render: Render<'_>) -> Result<(), String> {
    for script in scripts() {
        let body = render(&script).map_err(|e| format!("cannot write a script: {e}"))?;
        check_chunking(codec, &body)?;
        check_round_trip(codec, &script, &body)?;
        check_truncation(codec, &body)?;
    }
    check_hostile(codec, render)
}

/// The body decodes to the same outcome fed whole and fed 1, 2, 3, … bytes at a time
/// (every size up to 64, then some larger); returns that outcome.
pub fn check_chunking(codec: &dyn Codec, body: &[u8]) -> Result<DecodeOutcome, String> {
    let name = codec.format();
    let whole = codec
        .decode_body(body, 0, DecoderConfig::default())
        .map_err(|e| format!("{name}: the whole body does not decode: {e}"))?;
    let sizes = (1..=64.min(body.len())).chain([97, 256, 1000, 4096]);
    for size in sizes.filter(|s| *s < body.len()) {
        let cut = codec
            .decode_body(body, size, DecoderConfig::default())
            .map_err(|e| format!("{name}: fed {size} bytes at a time: {e}"))?;
        if cut != whole {
            return Err(format!(
                "{name}: fed {size} bytes at a time, the outcome differs from the whole body's:\n{cut:?}\nagainst\n{whole:?}"
            ));
        }
    }
    Ok(whole)
}

/// `body` (written from `script`) decodes to the script's text and calls: names, ids
/// where the wire carries them, and arguments equal as JSON.
pub fn check_round_trip(
    codec: &dyn Codec,
    script: &ResponseScript,
    body: &[u8],
) -> Result<(), String> {
    let name = codec.format();
    let out = codec
        .decode_body(body, 0, DecoderConfig::default())
        .map_err(|e| format!("{name}: {e}"))?;
    let m = &out.message;
    if m.status != MessageStatus::Complete {
        return Err(format!(
            "{name}: a whole body decodes to a {:?} message",
            m.status
        ));
    }
    let text = m.text().unwrap_or_default();
    if let Some(want) = &script.text
        && text != *want
    {
        return Err(format!("{name}: the text is {text:?}, not {want:?}"));
    }
    if m.tool_calls.len() != script.tool_calls.len() {
        return Err(format!(
            "{name}: {} calls decoded, {} written",
            m.tool_calls.len(),
            script.tool_calls.len()
        ));
    }
    for (got, want) in m.tool_calls.iter().zip(&script.tool_calls) {
        if got.status != ToolCallStatus::Complete || got.name.as_deref() != Some(&want.name) {
            return Err(format!("{name}: call {want:?} decoded as {got:?}"));
        }
        let args: serde_json::Value = serde_json::from_str(&want.arguments)
            .map_err(|e| format!("a script's arguments are not JSON: {e}"))?;
        if serde_json::Value::Object(got.arguments_as_map()) != args {
            return Err(format!(
                "{name}: call {} has arguments {:?}, not {args}",
                want.name,
                got.arguments_as_map()
            ));
        }
    }
    Ok(())
}

/// No prefix of `body` decodes to a finished (`Complete`) message holding a complete
/// call whose arguments differ from the whole body's: a call cut off is never one the
/// chain would run. Prefixes that do not decode at all are fine (an error, nothing run).
pub fn check_truncation(codec: &dyn Codec, body: &[u8]) -> Result<(), String> {
    let name = codec.format();
    let whole = codec
        .decode_body(body, 0, DecoderConfig::default())
        .map_err(|e| format!("{name}: {e}"))?;
    let step = (body.len() / 400).max(1);
    for cut in (0..body.len()).step_by(step) {
        let Ok(out) = codec.decode_body(&body[..cut], 0, DecoderConfig::default()) else {
            continue;
        };
        if out.message.status != MessageStatus::Complete {
            continue;
        }
        for (i, call) in out.message.tool_calls.iter().enumerate() {
            if call.status != ToolCallStatus::Complete {
                continue;
            }
            let same = whole.message.tool_calls.get(i).is_some_and(|w| {
                w.status == ToolCallStatus::Complete
                    && w.arguments_as_map() == call.arguments_as_map()
                    && w.name == call.name
            });
            if !same {
                return Err(format!(
                    "{name}: the first {cut} of {} bytes decode to a finished message with a complete call {:?} that the whole body does not hold: a truncated call would run",
                    body.len(),
                    call.name
                ));
            }
        }
    }
    Ok(())
}

/// Arguments larger than the decoder's cap end in an error or an unfinished call, at
/// every chunking; bytes that are no body at all (noise, a lone brace, a long line)
/// give an error or an outcome, never a panic.
pub fn check_hostile(codec: &dyn Codec, render: Render<'_>) -> Result<(), String> {
    let name = codec.format();
    let big = format!(r#"{{"data": "{}"}}"#, "x".repeat(64 * 1024));
    let script = ResponseScript::tool_call("call_big", "upload", big);
    let body = render(&script).map_err(|e| format!("cannot write a script: {e}"))?;
    let capped = DecoderConfig {
        max_argument_bytes: 4096,
        ..DecoderConfig::default()
    };
    for size in [0, 7, 1024] {
        if let Ok(out) = codec.decode_body(&body, size, capped) {
            let runs = out.message.status == MessageStatus::Complete
                && out
                    .message
                    .tool_calls
                    .iter()
                    .any(|c| c.status == ToolCallStatus::Complete);
            if runs {
                return Err(format!(
                    "{name}: a call with arguments past the {} byte cap decoded as complete",
                    capped.max_argument_bytes
                ));
            }
        }
    }
    let tight = DecoderConfig {
        max_line_bytes: 1024,
        ..DecoderConfig::default()
    };
    let long_line = [b"data: ".as_slice(), &[b'a'; 4096], b"\n"].concat();
    let noise: Vec<u8> = (0u32..4096)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    for bytes in [&b"{"[..], b"}\n\n", b"\x00\x00\x00\x10", &long_line, &noise] {
        for size in [0, 1, 13] {
            // Any Ok or Err will do: the check is that this returns at all.
            let _ = codec.decode_body(bytes, size, tight);
        }
    }
    Ok(())
}

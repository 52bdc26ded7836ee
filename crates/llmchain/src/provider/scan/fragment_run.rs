//! Runs of argument-fragment events taken straight from a stream's raw bytes.
//!
//! A tool call's arguments usually stream as many consecutive SSE events that are the
//! same bytes but for a block or wire index and the fragment. Once a decoder knows those
//! bytes are valid (it validated one such event, or they are a format's fixed shape), it
//! can take each following event by comparing its bytes and reading its fragment string,
//! without framing lines or reading the JSON envelope again. The decoder's handler is
//! offered the raw bytes wherever the framer stands between events
//! ([`EventHandler::raw_events`](crate::provider::framed::EventHandler::raw_events));
//! [`take_fragments`] does the taking. Anything that differs in a byte is left to the
//! framer and the decoder's full path.

use std::borrow::Cow;

use super::json::{Cursor, read_string_into, short_plain_literal, starts_with_bytes};
use crate::provider::assembly::{Assembler, Emit};
use crate::provider::error::DecodeError;
use crate::provider::event::StreamEvent;
use crate::provider::format::DecoderConfig;

/// A decoder's scratch space for [`take_fragments`], kept between reads.
#[derive(Debug, Default)]
pub(crate) struct RunScratch {
    /// The bytes between two fragments of one call's run.
    joint: Vec<u8>,
}

/// The fixed bytes of a fragment event around its index and fragment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FragmentShape<'s> {
    /// From the start of the event through the key of its index (`…"index":`).
    pub(crate) head: &'s [u8],
    /// From after the index through the key of the fragment string.
    pub(crate) key: &'s [u8],
    /// What closes the event after the fragment string, ending with the blank line
    /// (`\n\n`); with [`after_varying`](Self::after_varying), what follows the fragment
    /// up to a varying string.
    pub(crate) tail: &'s [u8],
    /// For events that also hold a string that differs from one event to the next
    /// (OpenAI's random `obfuscation` member), right after `tail`: what closes the
    /// event after that string, ending with the blank line. The string is taken when it
    /// is plain (no escape, valid UTF-8), as the decoder's fast path takes it.
    pub(crate) after_varying: Option<&'s [u8]>,
    /// The length of the lines at the start of `head` before the `data:` line (an
    /// `event:` line and its line end); the line cap applies to them apart.
    pub(crate) lead: usize,
}

/// Takes the fragment events at the front of `bytes` (raw stream bytes at an event
/// boundary) that have `shape`, whose index `call_of` maps to a call of `asm` taking
/// text fragments. Each fragment is appended to its call and emitted as
/// [`StreamEvent::ToolCallArguments`](crate::provider::StreamEvent::ToolCallArguments), or, when `join`, each run of one call's fragments
/// as one event ([`DecoderConfig::join_fragments`]). Stops at the first event that differs in any
/// byte, whose fragment the plain string scan does not take, whose line would pass
/// the config's `max_line_bytes` or whose call would pass the argument cap: the full path decides those.
/// Returns the bytes and the number of events taken.
/// Always inlined into the decoder's `raw_events` (measured: 64 KiB streams ~15 % slower
/// when it is a call of its own).
#[inline(always)]
pub(crate) fn take_fragments(
    bytes: &[u8],
    shape: FragmentShape<'_>,
    config: DecoderConfig,
    scratch: &mut RunScratch,
    asm: &mut Assembler,
    call_of: impl Fn(u64) -> Option<u32>,
    emit: Emit<'_>,
) -> Result<(usize, usize), DecodeError> {
    let (max_line, join) = (config.max_line_bytes, config.join_fragments);
    // One loop per kind, so that events without a varying string pay nothing for it,
    // and the loop does not test `join` at each event.
    match (shape.after_varying, join) {
        (None, false) => take::<false, false>(bytes, shape, max_line, scratch, asm, call_of, emit),
        (None, true) => take::<false, true>(bytes, shape, max_line, scratch, asm, call_of, emit),
        (Some(_), false) => {
            take::<true, false>(bytes, shape, max_line, scratch, asm, call_of, emit)
        }
        (Some(_), true) => take::<true, true>(bytes, shape, max_line, scratch, asm, call_of, emit),
    }
}

/// [`take_fragments`] for shapes with a varying string (`VARYING`) or without, each
/// run emitted as one fragment (`JOIN`) or each fragment as it comes.
#[inline(always)]
fn take<const VARYING: bool, const JOIN: bool>(
    bytes: &[u8],
    shape: FragmentShape<'_>,
    max_line: usize,
    scratch: &mut RunScratch,
    asm: &mut Assembler,
    call_of: impl Fn(u64) -> Option<u32>,
    emit: Emit<'_>,
) -> Result<(usize, usize), DecodeError> {
    let FragmentShape {
        head,
        key,
        tail,
        after_varying,
        lead,
    } = shape;
    // What follows the varying string (or the fragment): the end of the event.
    let close = after_varying.unwrap_or(tail);
    if lead > max_line.saturating_add(1) {
        return Ok((0, 0));
    }
    let joint = &mut scratch.joint;
    // The longest event the framer would take: its `data:` line, the lead before it
    // and the blank line after.
    let max_event = max_line.saturating_add(lead + 2);
    let (mut at, mut events) = (0usize, 0usize);
    // One call's run of events: from the head, through its index and key.
    while starts_with_bytes(&bytes[at..], head) {
        let mut p = Cursor::new(bytes, at + head.len());
        let Some(index) = p.number_u64() else { break };
        if !starts_with_bytes(&bytes[p.pos()..], key) {
            break;
        }
        let after_key = p.pos() + key.len();
        let Some(pos) = call_of(index) else { break };
        let Some(room) = asm.arguments_room(pos) else {
            break;
        };
        // Every event of this call up to its fragment: `head`, the index, `key`;
        // between two fragments of the call come `close` and `prefix` (after `tail`
        // and the varying string, if any), compared at once.
        let prefix = &bytes[at..after_key];
        joint.clear();
        joint.reserve(close.len() + prefix.len());
        joint.extend_from_slice(close);
        joint.extend_from_slice(prefix);
        // Each fragment is decoded straight onto the call's text (measured: decoding it
        // into a buffer of its own and copying it there was a tenth of the loop).
        let Some(raw) = asm.arguments_mut(pos) else {
            break;
        };
        let run_start = raw.len();
        let mut lit = after_key;
        let stop = loop {
            let start = raw.len();
            let end = match read_string_into(&bytes[lit..], raw) {
                // The arguments within their cap, else the full path decides.
                Some(n) if raw.len() - run_start <= room => lit + n,
                _ => {
                    raw.truncate(start);
                    break true;
                }
            };
            // Where the event's closing bytes start: after the fragment, or after
            // `tail` and the varying string.
            let end = if VARYING {
                let Some(closing) = varying_end(bytes, end, tail) else {
                    raw.truncate(start);
                    break true;
                };
                closing
            } else {
                end
            };
            let more = starts_with_bytes(&bytes[end..], joint);
            let next = end + close.len();
            // The event ends with `close`; its data line (without the two line ends) is
            // within the framer's cap.
            if !(more || ends_with_tail(&bytes[end..], close)) || next - at > max_event {
                raw.truncate(start);
                break true;
            }
            // `start` was the text's length before the fragment was appended: a char
            // boundary (checked anyway, at the cost of one byte's look).
            if !JOIN && raw.len() > start {
                emit(StreamEvent::ToolCallArguments {
                    index: pos,
                    fragment: Cow::Borrowed(raw.get(start..).unwrap_or_default()),
                });
            }
            events += 1;
            at = next;
            if !more {
                break false;
            }
            lit = at + prefix.len();
        };
        if JOIN && raw.len() > run_start {
            emit(StreamEvent::ToolCallArguments {
                index: pos,
                fragment: Cow::Borrowed(raw.get(run_start..).unwrap_or_default()),
            });
        }
        if stop {
            break;
        }
    }
    Ok((at, events))
}

/// True when `rest` starts with `tail`: the last event of a call's run (the next one
/// does not repeat the call's prefix). Out of line, so that the loop does not compare
/// the tail again after every fragment whose joint matched.
#[cold]
#[inline(never)]
fn ends_with_tail(rest: &[u8], tail: &[u8]) -> bool {
    starts_with_bytes(rest, tail)
}

/// Where the bytes after a varying string start, when `tail` follows the fragment at
/// `end` and a plain string (no escape, valid UTF-8) follows `tail`.
#[inline]
fn varying_end(bytes: &[u8], end: usize, tail: &[u8]) -> Option<usize> {
    if !starts_with_bytes(&bytes[end..], tail) {
        return None;
    }
    let at = end + tail.len();
    // The usual value (OpenAI's are up to 15 letters and digits) without a call.
    if let Some(n) = short_plain_literal(&bytes[at..]) {
        return Some(at + n);
    }
    let mut p = Cursor::new(bytes, at);
    p.string_plain()?;
    Some(p.pos())
}

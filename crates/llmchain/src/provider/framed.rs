//! Streaming decoders made of a framer (SSE or NDJSON) and a format's event handler.
//! Bedrock's ConverseStream has its own driver (`bedrock/decode.rs`): its frames are
//! binary (AWS event-stream, with a CRC per frame and the event type in a header), so
//! it feeds an `EventStreamFramer` and keeps the frame's event type beside its payload,
//! which the text framers here do not carry.

use super::assembly::{Emit, malformed, wrong_format};
use super::error::DecodeError;
use super::event::StreamEvent;
use super::format::{DecoderConfig, StreamDecoder, cut_off};
use super::framing::{NdjsonFramer, SseFramer};
use super::outcome::DecodeOutcome;
use crate::message::Message;

/// A format's handler of framed events.
pub(crate) trait EventHandler: Send {
    /// True when a body in which no SSE event appears is decoded whole
    /// ([`decode_whole`](Self::decode_whole)): an HTTP error body, a non-streaming
    /// response. When false such a body is [`DecodeError::WrongFormat`] (and an empty one
    /// simply ends the stream), and an unparsable last event cut off at the end of the
    /// body is an error rather than a cut-off stream.
    const WHOLE_BODIES: bool = true;

    /// Handles one SSE event's data or one NDJSON line.
    fn on_data(&mut self, data: &[u8], emit: Emit<'_>) -> Result<(), DecodeError>;
    /// Reads whole SSE events off the front of `bytes` itself, unframed: raw stream
    /// bytes where the framer stands between events
    /// ([`SseFramer::between_events`]). A handler that recognises some events by their
    /// exact bytes takes them here, handling each as [`on_data`](Self::on_data) would,
    /// and returns the bytes and the number of events taken. It must take only bytes
    /// the framer would frame as those same complete events (`data:` lines, each event
    /// ending with a blank line, within the line cap). None by default.
    fn raw_events(
        &mut self,
        _bytes: &[u8],
        _emit: Emit<'_>,
    ) -> Result<(usize, usize), DecodeError> {
        Ok((0, 0))
    }
    /// Handles an SSE `data: [DONE]` event (ignored by default).
    fn on_done(&mut self) {}
    /// Ends the body.
    fn finish(self, emit: Emit<'_>) -> Result<DecodeOutcome, DecodeError>;
    /// Decodes a body that held no SSE event (a plain JSON response or error body).
    fn decode_whole(&mut self, body: &[u8], emit: Emit<'_>) -> Result<DecodeOutcome, DecodeError>;
}

/// An SSE stream decoder. A body in which no SSE event appears (an HTTP error body, a
/// non-streaming response, Gemini's JSON-array stream) is decoded whole at the end, so
/// one decoder serves captured bodies of either kind (unless the handler opts out, see
/// [`EventHandler::WHOLE_BODIES`]). That raw copy is kept only until the first event,
/// and is capped like an event. An error is final: later calls return it again.
pub(crate) struct SseDecoder<H> {
    format: &'static str,
    framer: SseFramer,
    handler: Option<H>,
    raw: Vec<u8>,
    saw_bytes: bool,
    saw_event: bool,
    raw_overflow: bool,
    ok_events: usize,
    max: usize,
    failed: Option<DecodeError>,
}

impl<H: EventHandler> SseDecoder<H> {
    /// A decoder for `format` over `handler`.
    pub(crate) fn new(format: &'static str, handler: H, config: DecoderConfig) -> Self {
        SseDecoder {
            format,
            framer: SseFramer::data_only(config.max_line_bytes),
            handler: Some(handler),
            raw: Vec::new(),
            saw_bytes: false,
            saw_event: false,
            raw_overflow: false,
            ok_events: 0,
            max: config.max_line_bytes,
            failed: None,
        }
    }

    fn feed_inner(&mut self, chunk: &[u8], on_event: Emit<'_>) -> Result<(), DecodeError> {
        let handler = self.handler.as_mut().ok_or_else(|| finished(self.format))?;
        self.saw_bytes |= !chunk.is_empty();
        let (saw, ok) = (&mut self.saw_event, &mut self.ok_events);
        let mut rest = chunk;
        while !rest.is_empty() {
            if self.framer.between_events() {
                // The handler may read the next events unframed.
                let (n, events) = handler.raw_events(rest, on_event)?;
                if events > 0 {
                    *saw = true;
                    *ok += events;
                }
                rest = &rest[n.min(rest.len())..];
                if rest.is_empty() {
                    break;
                }
            }
            let n = self.framer.feed_event(rest, &mut |ev| {
                *saw = true;
                if is_done(ev.data) {
                    handler.on_done();
                    return Ok(());
                }
                handler.on_data(ev.data, on_event)?;
                *ok += 1;
                Ok(())
            })?;
            rest = &rest[n..];
        }
        if !H::WHOLE_BODIES {
            return Ok(());
        }
        if self.saw_event {
            self.raw = Vec::new();
        } else if !self.raw_overflow {
            // Past the cap the copy stops; the error comes only if the body turns out
            // to hold no event at all, so it does not depend on the chunking.
            if self.raw.len().saturating_add(chunk.len()) > self.max {
                self.raw_overflow = true;
                self.raw = Vec::new();
            } else {
                self.raw.extend_from_slice(chunk);
            }
        }
        Ok(())
    }

    fn finish_inner(&mut self, on_event: Emit<'_>) -> Result<DecodeOutcome, DecodeError> {
        let mut handler = self.handler.take().ok_or_else(|| finished(self.format))?;
        let saw = &mut self.saw_event;
        let ok = self.ok_events;
        let framed = self.framer.finish(&mut |ev| {
            *saw = true;
            if is_done(ev.data) {
                handler.on_done();
                return Ok(());
            }
            let r = handler.on_data(ev.data, on_event);
            // An unterminated last event cut inside its JSON is a cut-off body, not a
            // malformed one: the outcome reports what came before as unfinished.
            if H::WHOLE_BODIES { cut_tail(r, ok) } else { r }
        });
        if let Err(e) = framed {
            // Kept for `interrupt`: what came before the cut-off event is still good.
            self.handler = Some(handler);
            return Err(e);
        }
        if !self.saw_event {
            if !H::WHOLE_BODIES {
                if !self.saw_bytes {
                    return handler.finish(on_event);
                }
                return Err(wrong_format(
                    self.format,
                    "no SSE `data:` event in the body (is it a non-streaming response?)",
                ));
            }
            if self.raw_overflow {
                return Err(DecodeError::LineTooLong { limit: self.max });
            }
            let raw = std::mem::take(&mut self.raw);
            if raw.trim_ascii().is_empty() {
                return Err(malformed(self.format, "the body is empty"));
            }
            return handler.decode_whole(&raw, on_event);
        }
        handler.finish(on_event)
    }
}

/// `data: [DONE]`, the OpenAI-style end marker (some proxies add it to other formats).
#[inline]
fn is_done(data: &[u8]) -> bool {
    data.trim_ascii() == b"[DONE]"
}

/// Ignores a `Malformed` error of the unterminated tail of a body that had `ok` good
/// events before it (a body with none is simply malformed).
fn cut_tail(r: Result<(), DecodeError>, ok: usize) -> Result<(), DecodeError> {
    match r {
        Err(DecodeError::Malformed { .. }) if ok > 0 => Ok(()),
        other => other,
    }
}

fn finished(format: &'static str) -> DecodeError {
    malformed(format, "the decoder was already finished")
}

impl<H: EventHandler> StreamDecoder for SseDecoder<H> {
    fn feed(
        &mut self,
        chunk: &[u8],
        on_event: &mut dyn FnMut(StreamEvent<'_>),
    ) -> Result<(), DecodeError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let r = self.feed_inner(chunk, on_event);
        if let Err(e) = &r {
            self.failed = Some(e.clone());
        }
        r
    }

    fn finish(
        &mut self,
        on_event: &mut dyn FnMut(StreamEvent<'_>),
    ) -> Result<DecodeOutcome, DecodeError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let r = self.finish_inner(on_event);
        if let Err(e) = &r {
            self.failed = Some(e.clone());
        }
        r
    }

    fn interrupt(&mut self) -> Option<Message> {
        interrupt(self.handler.take())
    }
}

/// What `handler` assembled, cut off ([`StreamDecoder::interrupt`]).
fn interrupt<H: EventHandler>(handler: Option<H>) -> Option<Message> {
    let outcome = handler?.finish(&mut |_| {}).ok()?;
    Some(cut_off(outcome.message))
}

/// An NDJSON stream decoder.
pub(crate) struct NdjsonDecoder<H> {
    format: &'static str,
    framer: NdjsonFramer,
    handler: Option<H>,
    lines: usize,
    ok_lines: usize,
}

impl<H: EventHandler> NdjsonDecoder<H> {
    /// A decoder for `format` over `handler`.
    pub(crate) fn new(format: &'static str, handler: H, config: DecoderConfig) -> Self {
        NdjsonDecoder {
            format,
            framer: NdjsonFramer::new(config.max_line_bytes),
            handler: Some(handler),
            lines: 0,
            ok_lines: 0,
        }
    }
}

impl<H: EventHandler> StreamDecoder for NdjsonDecoder<H> {
    fn feed(
        &mut self,
        chunk: &[u8],
        on_event: &mut dyn FnMut(StreamEvent<'_>),
    ) -> Result<(), DecodeError> {
        let handler = self.handler.as_mut().ok_or_else(|| finished(self.format))?;
        let lines = &mut self.lines;
        let ok = &mut self.ok_lines;
        self.framer.feed(chunk, &mut |line| {
            *lines += 1;
            handler.on_data(line, on_event)?;
            *ok += 1;
            Ok(())
        })
    }

    fn finish(
        &mut self,
        on_event: &mut dyn FnMut(StreamEvent<'_>),
    ) -> Result<DecodeOutcome, DecodeError> {
        let mut handler = self.handler.take().ok_or_else(|| finished(self.format))?;
        let lines = &mut self.lines;
        let ok = self.ok_lines;
        let framed = self.framer.finish(&mut |line| {
            *lines += 1;
            cut_tail(handler.on_data(line, on_event), ok)
        });
        if let Err(e) = framed {
            self.handler = Some(handler);
            return Err(e);
        }
        if self.lines == 0 {
            return Err(malformed(self.format, "the body is empty"));
        }
        handler.finish(on_event)
    }

    fn interrupt(&mut self) -> Option<Message> {
        interrupt(self.handler.take())
    }
}

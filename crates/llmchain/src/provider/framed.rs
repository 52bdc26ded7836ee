//! Streaming decoders made of a framer (SSE or NDJSON) and a format's event handler.

use super::assembly::{Emit, malformed};
use super::error::DecodeError;
use super::event::StreamEvent;
use super::format::{DecoderConfig, StreamDecoder};
use super::framing::{NdjsonFramer, SseFramer};
use super::outcome::DecodeOutcome;

/// A format's handler of framed events.
pub(crate) trait EventHandler: Send {
    /// Handles one SSE event's data or one NDJSON line.
    fn on_data(&mut self, data: &[u8], emit: Emit<'_>) -> Result<(), DecodeError>;
    /// Ends the body.
    fn finish(self, emit: Emit<'_>) -> Result<DecodeOutcome, DecodeError>;
    /// Decodes a body that held no SSE event (a plain JSON response or error body).
    fn decode_whole(&mut self, body: &[u8], emit: Emit<'_>) -> Result<DecodeOutcome, DecodeError>;
}

/// An SSE stream decoder. A body in which no SSE event appears (an HTTP error body, a
/// non-streaming response, Gemini's JSON-array stream) is decoded whole at the end, so
/// one decoder serves captured bodies of either kind. That raw copy is kept only until
/// the first event, and is capped like an event.
pub(crate) struct SseDecoder<H> {
    format: &'static str,
    framer: SseFramer,
    handler: Option<H>,
    raw: Vec<u8>,
    saw_event: bool,
    raw_overflow: bool,
    ok_events: usize,
    max: usize,
}

impl<H: EventHandler> SseDecoder<H> {
    /// A decoder for `format` over `handler`.
    pub(crate) fn new(format: &'static str, handler: H, config: DecoderConfig) -> Self {
        SseDecoder {
            format,
            framer: SseFramer::data_only(config.max_line_bytes),
            handler: Some(handler),
            raw: Vec::new(),
            saw_event: false,
            raw_overflow: false,
            ok_events: 0,
            max: config.max_line_bytes,
        }
    }
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
        let handler = self.handler.as_mut().ok_or_else(|| finished(self.format))?;
        let saw = &mut self.saw_event;
        let ok = &mut self.ok_events;
        self.framer.feed(chunk, &mut |ev| {
            *saw = true;
            if ev.data.trim_ascii() == b"[DONE]" {
                return Ok(());
            }
            handler.on_data(ev.data, on_event)?;
            *ok += 1;
            Ok(())
        })?;
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

    fn finish(
        &mut self,
        on_event: &mut dyn FnMut(StreamEvent<'_>),
    ) -> Result<DecodeOutcome, DecodeError> {
        let mut handler = self.handler.take().ok_or_else(|| finished(self.format))?;
        let saw = &mut self.saw_event;
        let ok = self.ok_events;
        self.framer.finish(&mut |ev| {
            *saw = true;
            if ev.data.trim_ascii() == b"[DONE]" {
                return Ok(());
            }
            // An unterminated last event cut inside its JSON is a cut-off body, not a
            // malformed one: the outcome reports what came before as unfinished.
            cut_tail(handler.on_data(ev.data, on_event), ok)
        })?;
        if !self.saw_event {
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
        self.framer.finish(&mut |line| {
            *lines += 1;
            cut_tail(handler.on_data(line, on_event), ok)
        })?;
        if self.lines == 0 {
            return Err(malformed(self.format, "the body is empty"));
        }
        handler.finish(on_event)
    }
}

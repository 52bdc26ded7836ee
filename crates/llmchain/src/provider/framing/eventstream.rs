//! AWS event-stream framing (`application/vnd.amazon.eventstream`), as Bedrock's
//! ConverseStream sends it: binary frames, each a prelude (total length, headers
//! length, both big-endian u32, and a CRC32 of those 8 bytes), headers, a payload and a
//! CRC32 of everything before it.
//!
//! Hand-written rather than `aws-smithy-eventstream`: that crate needs Rust 1.94.1 (ours
//! is older), brings 15 crates, and trusts a frame's length before checking the
//! prelude's CRC (a corrupt length then waits for the end of the connection). This one
//! checks the prelude first, caps a frame, and hands out each frame's headers and
//! payload borrowed from the fed chunk when the frame lies in it whole.

use crate::provider::error::DecodeError;

/// Bytes of a frame's prelude (two lengths and their CRC).
const PRELUDE: usize = 12;
/// The smallest frame: a prelude and the message CRC.
const MIN_FRAME: usize = PRELUDE + 4;

/// One frame: its string headers and its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The header bytes, checked whole by the parser (read again on lookup rather than
    /// collected: a frame has three or four headers, and a `Vec` a frame cost more than
    /// the lookups).
    headers: &'a [u8],
    /// `:message-type` and `:event-type`, found while the parser checks the headers
    /// (every frame is asked for them).
    message_type: Option<&'a [u8]>,
    event_type: Option<&'a [u8]>,
    /// The payload bytes.
    pub payload: &'a [u8],
}

impl<'a> Frame<'a> {
    /// The `:message-type` header's bytes (`event`, `exception`, `error`), if any: every
    /// frame is asked, so without a UTF-8 check.
    pub fn message_type(&self) -> Option<&'a [u8]> {
        self.message_type
    }

    /// The `:event-type` header's bytes, if any.
    pub fn event_type(&self) -> Option<&'a [u8]> {
        self.event_type
    }

    /// The string header `name` (`:message-type`, `:event-type`, `:exception-type`...).
    pub fn header(&self, name: &str) -> Option<&'a str> {
        let known = match name {
            ":message-type" => Some(self.message_type),
            ":event-type" => Some(self.event_type),
            _ => None,
        };
        if let Some(value) = known {
            return value.and_then(|v| std::str::from_utf8(v).ok());
        }
        let mut h = self.headers;
        while let Ok(Some((n, kind, value, rest))) = next_header(h) {
            if kind == STRING && n == name.as_bytes() {
                return std::str::from_utf8(value).ok();
            }
            h = rest;
        }
        None
    }
}

/// The header type of a string.
const STRING: u8 = 7;

/// The header at the start of `h`: its name, type and value bytes and what follows, or
/// `None` at the end; `Err` names what is wrong.
#[allow(clippy::type_complexity)]
fn next_header(h: &[u8]) -> Result<Option<(&[u8], u8, &[u8], &[u8])>, &'static str> {
    let Some((&n, rest)) = h.split_first() else {
        return Ok(None);
    };
    let n = n as usize;
    let (Some(name), Some(&kind)) = (rest.get(..n), rest.get(n)) else {
        return Err("a frame's header runs past its headers");
    };
    let rest = &rest[n + 1..];
    let (len_bytes, value_len) = match kind {
        0 | 1 => (0, 0),
        2 => (0, 1),
        3 => (0, 2),
        4 => (0, 4),
        5 | 8 => (0, 8),
        9 => (0, 16),
        6 | 7 => match rest.get(..2) {
            Some(b) => (2, be16(b) as usize),
            None => return Err("a frame's header runs past its headers"),
        },
        _ => return Err("a frame's header has an unknown type"),
    };
    let Some(value) = rest.get(len_bytes..len_bytes + value_len) else {
        return Err("a frame's header runs past its headers");
    };
    Ok(Some((name, kind, value, &rest[len_bytes + value_len..])))
}

/// Frames from chunks of any size.
#[derive(Debug)]
pub struct EventStreamFramer {
    buf: Vec<u8>,
    max: usize,
    format: &'static str,
}

impl EventStreamFramer {
    /// A framer refusing frames longer than `max` bytes; errors name `format`.
    pub fn new(format: &'static str, max: usize) -> Self {
        EventStreamFramer {
            buf: Vec::new(),
            max: max.max(MIN_FRAME),
            format,
        }
    }

    /// Feeds `chunk`; calls `on_frame` with each complete frame.
    pub fn feed(
        &mut self,
        mut chunk: &[u8],
        on_frame: &mut dyn FnMut(Frame<'_>) -> Result<(), DecodeError>,
    ) -> Result<(), DecodeError> {
        // A frame begun in an earlier chunk: only the bytes it still lacks are copied.
        if !self.buf.is_empty() {
            if self.buf.len() < PRELUDE {
                let take = (PRELUDE - self.buf.len()).min(chunk.len());
                self.buf.extend_from_slice(&chunk[..take]);
                chunk = &chunk[take..];
            }
            let Some(len) = self.frame_len(&self.buf)? else {
                return Ok(());
            };
            let take = (len - self.buf.len()).min(chunk.len());
            self.buf.extend_from_slice(&chunk[..take]);
            chunk = &chunk[take..];
            if self.buf.len() < len {
                return Ok(());
            }
            let frame = std::mem::take(&mut self.buf);
            let r = parse(self.format, &frame).and_then(&mut *on_frame);
            // The allocation is kept for the next straddling frame.
            self.buf = frame;
            self.buf.clear();
            r?;
        }
        // Frames that lie whole in the chunk are read in place.
        while let Some(len) = self.frame_len(chunk)? {
            if chunk.len() < len {
                break;
            }
            let (frame, rest) = chunk.split_at(len);
            on_frame(parse(self.format, frame)?)?;
            chunk = rest;
        }
        self.buf.extend_from_slice(chunk);
        Ok(())
    }

    /// The length of the frame at the start of `bytes`, once its prelude is there and
    /// checked; `None` while it is not.
    fn frame_len(&self, bytes: &[u8]) -> Result<Option<usize>, DecodeError> {
        let Some(prelude) = bytes.get(..PRELUDE) else {
            return Ok(None);
        };
        let total = be32(&prelude[0..4]) as usize;
        let headers = be32(&prelude[4..8]) as usize;
        if crc32fast::hash(&prelude[..8]) != be32(&prelude[8..12]) {
            return Err(self.error(
                "a frame's prelude fails its checksum (the stream is corrupt or not an event stream)",
            ));
        }
        if total < MIN_FRAME || headers > total - MIN_FRAME {
            return Err(self.error(format!(
                "a frame claims {total} bytes with {headers} bytes of headers"
            )));
        }
        if total > self.max {
            return Err(DecodeError::LineTooLong { limit: self.max });
        }
        Ok(Some(total))
    }

    /// Bytes of an unfinished frame held back.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    fn error(&self, message: impl Into<String>) -> DecodeError {
        DecodeError::Malformed {
            format: self.format,
            message: message.into(),
        }
    }
}

fn be32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_be_bytes(a)
}

/// One whole frame (its length checked against its prelude).
fn parse<'a>(format: &'static str, frame: &'a [u8]) -> Result<Frame<'a>, DecodeError> {
    let bad = |m: &str| DecodeError::Malformed {
        format,
        message: m.to_owned(),
    };
    let total = frame.len();
    let headers_len = be32(&frame[4..8]) as usize;
    let (body, crc) = frame.split_at(total - 4);
    if crc32fast::hash(body) != be32(crc) {
        return Err(bad(
            "a frame fails its message checksum (the stream is corrupt)",
        ));
    }
    let headers = &frame[PRELUDE..PRELUDE + headers_len];
    let payload = &frame[PRELUDE + headers_len..total - 4];
    // The headers' layout is checked here; their text when one is looked up (a name
    // that is not UTF-8 cannot be one looked up, a value that is not is refused then).
    let (mut message_type, mut event_type) = (None, None);
    let mut h = headers;
    loop {
        match next_header(h) {
            Ok(Some((name, kind, value, rest))) => {
                if kind == STRING {
                    // The first of each, as `header` finds it.
                    match name {
                        b":message-type" if message_type.is_none() => message_type = Some(value),
                        b":event-type" if event_type.is_none() => event_type = Some(value),
                        _ => {}
                    }
                }
                h = rest;
            }
            Ok(None) => break,
            Err(m) => return Err(bad(m)),
        }
    }
    Ok(Frame {
        headers,
        message_type,
        event_type,
        payload,
    })
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

/// Encodes a frame with string headers (for tests, the scripted model and benchmarks).
pub fn encode_frame(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
    let mut h = Vec::new();
    for (name, value) in headers {
        h.push(name.len() as u8);
        h.extend_from_slice(name.as_bytes());
        h.push(7);
        h.extend_from_slice(&(value.len() as u16).to_be_bytes());
        h.extend_from_slice(value.as_bytes());
    }
    let total = (MIN_FRAME + h.len() + payload.len()) as u32;
    let mut out = Vec::with_capacity(total as usize);
    out.extend_from_slice(&total.to_be_bytes());
    out.extend_from_slice(&(h.len() as u32).to_be_bytes());
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(payload);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(bytes: &[u8], chunk: usize) -> Result<Vec<(String, Vec<u8>)>, DecodeError> {
        let mut f = EventStreamFramer::new("bedrock", 1 << 20);
        let mut out = Vec::new();
        for c in bytes.chunks(chunk.max(1)) {
            f.feed(c, &mut |fr| {
                out.push((
                    fr.header(":event-type").unwrap_or_default().to_owned(),
                    fr.payload.to_vec(),
                ));
                Ok(())
            })?;
        }
        Ok(out)
    }

    /// A frame made by AWS's published encoder (`aws-smithy-eventstream`'s test data
    /// layout) for Bedrock: `contentBlockDelta` with `{"text":"Hi"}`.
    const AWS_FRAME: &str = "0000009f00000057c37babff0b3a6576656e742d74797065070011636f6e74656e74426c6f636b44656c74610d3a636f6e74656e742d747970650700106170706c69636174696f6e2f6a736f6e0d3a6d6573736167652d747970650700056576656e747b22636f6e74656e74426c6f636b496e646578223a302c2264656c7461223a7b2274657874223a224869227d2c2270223a2261626364227df2ace5ff";

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn an_aws_frame_decodes_in_any_chunking_and_encodes_back() {
        let bytes = unhex(AWS_FRAME);
        for chunk in [1, 2, 7, 12, 13, 158, 159, 1000] {
            let got = frames(&bytes, chunk).unwrap();
            assert_eq!(got.len(), 1);
            assert_eq!(got[0].0, "contentBlockDelta");
            assert_eq!(
                got[0].1,
                br#"{"contentBlockIndex":0,"delta":{"text":"Hi"},"p":"abcd"}"#
            );
        }
        let again = encode_frame(
            &[
                (":event-type", "contentBlockDelta"),
                (":content-type", "application/json"),
                (":message-type", "event"),
            ],
            br#"{"contentBlockIndex":0,"delta":{"text":"Hi"},"p":"abcd"}"#,
        );
        assert_eq!(again, bytes);
    }

    #[test]
    fn corrupt_or_oversized_frames_are_clear_errors() {
        let mut bytes = unhex(AWS_FRAME);
        let n = bytes.len();
        bytes[n - 1] ^= 1;
        let e = frames(&bytes, 5).unwrap_err().to_string();
        assert!(e.contains("message checksum"), "{e}");
        let mut bytes = unhex(AWS_FRAME);
        bytes[2] ^= 0x40;
        let e = frames(&bytes, 100).unwrap_err().to_string();
        assert!(e.contains("prelude"), "{e}");
        let big = encode_frame(&[], &vec![b'x'; 2000]);
        let mut f = EventStreamFramer::new("bedrock", 1000);
        let e = f.feed(&big, &mut |_| Ok(())).unwrap_err();
        assert_eq!(e, DecodeError::LineTooLong { limit: 1000 });
        // A header that claims more bytes than there are.
        let mut bad = encode_frame(&[(":event-type", "x")], b"{}");
        bad[12 + 1 + 11 + 1 + 1] = 0xff;
        let body_len = bad.len() - 4;
        let crc = crc32fast::hash(&bad[..body_len]).to_be_bytes();
        bad[body_len..].copy_from_slice(&crc);
        assert!(frames(&bad, 3).is_err());
    }

    #[test]
    fn a_cut_off_frame_is_held_back() {
        let bytes = unhex(AWS_FRAME);
        let mut f = EventStreamFramer::new("bedrock", 1 << 20);
        let mut n = 0;
        f.feed(&bytes[..100], &mut |_| {
            n += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!((n, f.pending()), (0, 100));
    }
}

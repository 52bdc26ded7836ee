//! An incremental newline-delimited JSON (NDJSON) line framer.

use crate::provider::DecodeError;

/// An incremental NDJSON framer: calls back once per non-blank line.
///
/// Lines end with LF; a CR before the LF is dropped; lines holding only ASCII whitespace
/// are skipped; a leading UTF-8 BOM is dropped. [`finish`](Self::finish) hands out an
/// unterminated last line. The line passed to the callback borrows from the fed chunk
/// when it lies wholly inside it. The lines are the same for every chunking.
///
/// ```
/// use llmchain::provider::framing::NdjsonFramer;
/// let mut framer = NdjsonFramer::new(1 << 20);
/// let mut lines = Vec::new();
/// let mut cb = |l: &[u8]| {
///     lines.push(l.to_vec());
///     Ok(())
/// };
/// framer.feed(b"{\"a\":1}\r\n\n{\"b\"", &mut cb).unwrap();
/// framer.feed(b":2}", &mut cb).unwrap();
/// framer.finish(&mut cb).unwrap();
/// assert_eq!(lines, vec![b"{\"a\":1}".to_vec(), b"{\"b\":2}".to_vec()]);
/// ```
#[derive(Debug, Clone)]
pub struct NdjsonFramer {
    max_line_bytes: usize,
    partial: Vec<u8>,
    /// Bytes seen so far, up to the length of a BOM (to drop a leading BOM).
    seen: usize,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

impl NdjsonFramer {
    /// A framer that fails with [`DecodeError::LineTooLong`] past `max_line_bytes`.
    pub fn new(max_line_bytes: usize) -> Self {
        NdjsonFramer {
            max_line_bytes,
            partial: Vec::new(),
            seen: 0,
        }
    }

    /// Feeds a chunk; calls `on_line` for every line completed by it.
    pub fn feed<F>(&mut self, chunk: &[u8], on_line: &mut F) -> Result<(), DecodeError>
    where
        F: FnMut(&[u8]) -> Result<(), DecodeError> + ?Sized,
    {
        let mut rest = chunk;
        if self.seen < BOM.len() {
            // Keep the first bytes in `partial` until a BOM is ruled in or out.
            let take = (BOM.len() - self.seen).min(rest.len());
            self.partial.extend_from_slice(&rest[..take]);
            self.seen += take;
            rest = &rest[take..];
            if self.seen < BOM.len() && BOM.starts_with(&self.partial) {
                return Ok(());
            }
            self.seen = BOM.len();
            if self.partial.starts_with(BOM) {
                self.partial.drain(..BOM.len());
            }
            // The head may already hold line ends.
            let head = std::mem::take(&mut self.partial);
            self.split(&head, on_line)?;
        }
        self.split(rest, on_line)
    }

    /// Ends the stream, handing out an unterminated last line. Resets the framer.
    pub fn finish<F>(&mut self, on_line: &mut F) -> Result<(), DecodeError>
    where
        F: FnMut(&[u8]) -> Result<(), DecodeError> + ?Sized,
    {
        let line = std::mem::take(&mut self.partial);
        *self = NdjsonFramer::new(self.max_line_bytes);
        let line = line.strip_prefix(BOM).unwrap_or(&line);
        emit(line, on_line)
    }

    fn split<F>(&mut self, chunk: &[u8], on_line: &mut F) -> Result<(), DecodeError>
    where
        F: FnMut(&[u8]) -> Result<(), DecodeError> + ?Sized,
    {
        let mut rest = chunk;
        if !self.partial.is_empty() {
            match memchr::memchr(b'\n', rest) {
                None => return self.grow(rest),
                Some(i) => {
                    self.grow(&rest[..i])?;
                    rest = &rest[i + 1..];
                    let mut line = std::mem::take(&mut self.partial);
                    let result = emit(&line, on_line);
                    line.clear();
                    self.partial = line;
                    result?;
                }
            }
        }
        while let Some(i) = memchr::memchr(b'\n', rest) {
            if i > self.max_line_bytes {
                return Err(DecodeError::LineTooLong {
                    limit: self.max_line_bytes,
                });
            }
            emit(&rest[..i], on_line)?;
            rest = &rest[i + 1..];
        }
        self.grow(rest)
    }

    fn grow(&mut self, bytes: &[u8]) -> Result<(), DecodeError> {
        if self.partial.len() + bytes.len() > self.max_line_bytes {
            return Err(DecodeError::LineTooLong {
                limit: self.max_line_bytes,
            });
        }
        self.partial.extend_from_slice(bytes);
        Ok(())
    }
}

#[inline]
fn emit<F>(line: &[u8], on_line: &mut F) -> Result<(), DecodeError>
where
    F: FnMut(&[u8]) -> Result<(), DecodeError> + ?Sized,
{
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    on_line(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frame_chunks(chunks: &[&[u8]], max: usize) -> Result<Vec<Vec<u8>>, DecodeError> {
        let mut f = NdjsonFramer::new(max);
        let mut out = Vec::new();
        let mut cb = |l: &[u8]| {
            out.push(l.to_vec());
            Ok(())
        };
        for c in chunks {
            f.feed(c, &mut cb)?;
        }
        f.finish(&mut cb)?;
        Ok(out)
    }

    #[test]
    fn lines_crlf_blank_and_unterminated() {
        let got = frame_chunks(&[b"{\"a\":1}\r\n  \n\n{\"b\":2}\n{\"c\""], 100).unwrap();
        assert_eq!(
            got,
            vec![
                b"{\"a\":1}".to_vec(),
                b"{\"b\":2}".to_vec(),
                b"{\"c\"".to_vec()
            ]
        );
    }

    #[test]
    fn bom_and_tiny_streams() {
        assert_eq!(
            frame_chunks(&[b"\xEF\xBB", b"\xBF{}\n"], 100).unwrap(),
            vec![b"{}".to_vec()]
        );
        assert_eq!(
            frame_chunks(&[b"{", b"}"], 100).unwrap(),
            vec![b"{}".to_vec()]
        );
        assert_eq!(frame_chunks(&[b"\n"], 100).unwrap(), Vec::<Vec<u8>>::new());
        assert_eq!(frame_chunks(&[], 100).unwrap(), Vec::<Vec<u8>>::new());
    }

    #[test]
    fn cap() {
        let long = vec![b'x'; 101];
        assert_eq!(
            frame_chunks(&[&long, b"\n"], 100),
            Err(DecodeError::LineTooLong { limit: 100 })
        );
        let mut l2 = long.clone();
        l2.push(b'\n');
        assert_eq!(
            frame_chunks(&[&l2], 100),
            Err(DecodeError::LineTooLong { limit: 100 })
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn any_chunking_gives_the_same_lines(
            lines in proptest::collection::vec("[a-z{}\" ]{0,10}", 0..12),
            crlf in any::<bool>(),
            bom in any::<bool>(),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
        ) {
            let eol = if crlf { "\r\n" } else { "\n" };
            let mut body = if bom { "\u{feff}".to_owned() } else { String::new() };
            body.push_str(&lines.join(eol));
            let body = body.into_bytes();
            let whole = frame_chunks(&[&body], 1 << 20).unwrap();
            let mut points: Vec<usize> = cuts.iter().map(|c| c.index(body.len() + 1)).collect();
            points.sort_unstable();
            let mut chunks = Vec::new();
            let mut last = 0;
            for p in points { chunks.push(&body[last..p]); last = p; }
            chunks.push(&body[last..]);
            prop_assert_eq!(&frame_chunks(&chunks, 1 << 20).unwrap(), &whole);
            let bytes: Vec<&[u8]> = body.chunks(1).collect();
            prop_assert_eq!(&frame_chunks(&bytes, 1 << 20).unwrap(), &whole);
            let expect: Vec<Vec<u8>> = lines.iter().filter(|l| !l.trim().is_empty()).map(|l| l.as_bytes().to_vec()).collect();
            prop_assert_eq!(whole, expect);
        }
    }
}

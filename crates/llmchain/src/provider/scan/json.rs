//! Byte-level JSON reading for the decoders' hot paths: a chunk in the exact shape a
//! provider sends for "the next argument fragment" is recognised by a strict scan and
//! its string unescaped straight into the call's buffer, without building a parse tree;
//! [`Cursor`] also reads whole objects and arrays member by member, for the hand-written
//! readers of a format's common chunks (`openai_chat/chunk.rs`). Anything a scan does
//! not accept (other shapes, unusual escapes, numbers it does not check) returns `None`
//! and the caller takes the full serde parse, which has the final word.
//!
//! Written by hand rather than with a crate: serde_json is the fallback and the
//! reference (every scan is tested against it), and the SIMD JSON crates parse whole
//! documents into their own trees, where these scans need a few known shapes read in
//! place with no allocation.

// The audited `unsafe` of the crate (see the workspace lints): every block has a
// SAFETY comment; the fuzz targets run it under AddressSanitizer (fuzz/campaign.sh).
#![allow(unsafe_code)]

use std::borrow::Cow;

use serde_json::{Map, Value};

/// A JSON string body (between its quotes), checked: no raw control characters, no
/// unescaped quote, valid UTF-8; escapes not decoded (nor checked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct JsonStr<'a> {
    /// The body, escapes intact.
    pub(crate) raw: &'a str,
    /// The body holds at least one backslash escape.
    pub(crate) escaped: bool,
}

/// Reads the string literal at the start of `lit` (opening quote included) and
/// appends its decoded text to `out` in one pass; returns the bytes read. `None` for
/// anything serde_json would reject or that is not a string; `out` may then hold part
/// of the text (the caller truncates).
///
/// The usual fragment (plain ASCII closed within 16 bytes) is read inline; any other
/// string by a call, so that the decoders' hot loops stay small.
#[inline(always)]
pub(crate) fn read_string_into(lit: &[u8], out: &mut String) -> Option<usize> {
    if let Some([b'"', rest @ ..]) = lit.first_chunk::<17>()
        && let Some(head) = rest.first_chunk::<16>()
        && let Some(k) = short_plain_len(head)
    {
        // SAFETY: `short_plain_len` saw plain ASCII before the quote at `k`.
        unsafe { push_ascii_block(head, k, out) };
        return Some(k + 2);
    }
    read_string_long(lit, out)
}

/// Reads `text`, a JSON object (whitespace around it allowed), exactly as
/// `serde_json::from_slice::<Map<String, Value>>` would, or returns `None` for text it
/// leaves to serde_json (not an object, invalid, a string with an escape, nesting deeper
/// than 64, see [`Cursor::value`]). Tool arguments are mostly strings, often long (a
/// file's content): this reads those without escapes sixteen bytes at a time where
/// serde_json's string search takes eight (measured: the parse of a 1 KiB argument
/// string ~4k → ~3k instructions); one with an escape is given up at its first
/// backslash, since serde_json unescapes in one pass where this would take two.
pub(crate) fn read_object(text: &[u8]) -> Option<Map<String, Value>> {
    let mut p = Cursor::new(text, 0);
    p.ws();
    if p.b.get(p.i) != Some(&b'{') {
        return None;
    }
    let Value::Object(map) = p.value(0)? else {
        return None;
    };
    p.ws();
    p.at_end().then_some(map)
}

/// The length of the string literal at the start of `lit` (its quotes included) when it
/// is plain ASCII closed within 16 bytes of its opening quote, the usual short value,
/// tested as one block; `None` for any other (which [`Cursor::string_plain`] reads).
#[inline(always)]
pub(crate) fn short_plain_literal(lit: &[u8]) -> Option<usize> {
    let [b'"', rest @ ..] = lit.first_chunk::<17>()? else {
        return None;
    };
    let head = rest.first_chunk::<16>()?;
    short_plain_len(head).map(|k| k + 2)
}

/// [`read_string_into`] for any string.
#[inline(never)]
fn read_string_long(lit: &[u8], out: &mut String) -> Option<usize> {
    if lit.first() != Some(&b'"') {
        return None;
    }
    let mut i = 1;
    loop {
        // A run of plain ASCII (the usual fragment is nothing else): one byte test each,
        // no UTF-8 decoding.
        i += push_plain_ascii(&lit[i..], out);
        match *lit.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => i = unescape_one(lit, i, out)?,
            c if c < 0x20 => return None, // a raw control character
            _ => {
                // Non-ASCII text up to the next quote, backslash or control byte.
                let run_end = i + lit[i..]
                    .iter()
                    .position(|&c| c == b'"' || c == b'\\' || c < 0x20)?;
                out.push_str(std::str::from_utf8(&lit[i..run_end]).ok()?);
                i = run_end;
            }
        }
    }
}

/// True when `b` starts with `prefix`. The decoders' hot path compares the same
/// ~30–200 bytes of every event. Below 32 bytes: eight bytes at a time without
/// stopping early (inlined, no call); from 32 bytes on, the C library's `bcmp`, which
/// picks AVX2/EVEX code at run time (measured faster than an inlined SSE2 block loop:
/// workload A 64 KiB 149 → 138 µs).
#[inline(always)]
pub(crate) fn starts_with_bytes(b: &[u8], prefix: &[u8]) -> bool {
    const BLOCK: usize = 32;
    let Some(b) = b.get(..prefix.len()) else {
        return false;
    };
    if prefix.len() < BLOCK {
        starts_with_words(b, prefix)
    } else {
        b == prefix
    }
}

/// [`starts_with_bytes`] for prefixes shorter than 32 bytes (`b` as long as `prefix`):
/// eight bytes at a time.
#[inline(always)]
fn starts_with_words(b: &[u8], prefix: &[u8]) -> bool {
    let n = prefix.len();
    if n < 8 {
        return b == prefix;
    }
    let word = |s: &[u8], i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&s[i..i + 8]);
        u64::from_ne_bytes(w)
    };
    let (bw, _) = b.as_chunks::<8>();
    let (pw, _) = prefix.as_chunks::<8>();
    let mut diff = 0u64;
    for (x, y) in bw.iter().zip(pw) {
        diff |= u64::from_ne_bytes(*x) ^ u64::from_ne_bytes(*y);
    }
    // The last (partial) word, overlapping the one before it.
    diff |= word(b, n - 8) ^ word(prefix, n - 8);
    diff == 0
}

/// Appends the run of plain ASCII at the start of `b` to `out` and returns its length:
/// bytes in 0x20..0x80 other than `"` and `\\`, the bytes a JSON string holds as they
/// are. Eight bytes at a time (SWAR): a fragment is usually one or two words, each
/// tested and copied without a call.
///
/// Why `unsafe` (the crate's only use): this is the innermost step of the decoders' hot
/// path, one 8-byte fragment per streamed event, and `str::from_utf8` on such a short
/// run costs more than the rest of the event's handling (measured: ~16 % of the OpenAI
/// Chat decoder's time), while pushing byte by byte as `char`s costs more still.
#[inline]
fn push_plain_ascii(b: &[u8], out: &mut String) -> usize {
    // A run that ends within 16 bytes: one block tested and copied.
    if let Some(head) = b.first_chunk::<16>()
        && let Some(k) = first_mark(head)
    {
        // SAFETY: `first_mark` finds the first byte that is not plain ASCII; the
        // first `k` bytes are before it.
        unsafe { push_ascii_block(head, k, out) };
        return k;
    }
    // SAFETY: only bytes tested to be in 0x20..0x80 (ASCII) are appended below, so
    // `out` stays valid UTF-8.
    let out = unsafe { out.as_mut_vec() };
    let mut n = 0;
    while let Some(word) = b.get(n..n + 8) {
        let marks = plain_marks(word_of(word));
        if marks != 0 {
            let k = (marks.trailing_zeros() / 8) as usize;
            out.extend_from_slice(&word[..k]);
            return n + k;
        }
        out.extend_from_slice(word);
        n += 8;
    }
    let k = b[n..]
        .iter()
        .position(|&c| !(0x20..0x80).contains(&c) || c == b'"' || c == b'\\')
        .unwrap_or(b.len() - n);
    out.extend_from_slice(&b[n..n + k]);
    n + k
}

/// Appends the first `k` bytes of `block` to `out`. When there is room, all 16 bytes
/// are written into the spare capacity at once (no call for a copy of variable
/// length), and the first `k` kept.
///
/// # Safety
///
/// The first `k` bytes of `block` are ASCII.
#[inline(always)]
unsafe fn push_ascii_block(block: &[u8; 16], k: usize, out: &mut String) {
    let k = k.min(16);
    // SAFETY: only the first `k` bytes, ASCII by the caller's promise, become part of
    // the string, so `out` stays valid UTF-8.
    let out = unsafe { out.as_mut_vec() };
    let len = out.len();
    if out.capacity() - len < 16 {
        out.extend_from_slice(&block[..k]);
        return;
    }
    // SAFETY: there is room for 16 bytes after `len` (checked above), `block` is 16
    // bytes, and a caller's `&[u8; 16]` cannot overlap `out`'s spare capacity (it is
    // borrowed apart from the `&mut String`). The first `k` of the bytes written are
    // then part of the string.
    unsafe {
        std::ptr::copy_nonoverlapping(block.as_ptr(), out.as_mut_ptr().add(len), 16);
        out.set_len(len + k);
    }
}

/// The length of the string body at the start of `head` when it is plain ASCII (no
/// escape, no control byte) and closed by a quote within these 16 bytes.
#[inline(always)]
fn short_plain_len(head: &[u8; 16]) -> Option<usize> {
    let k = first_mark(head)?;
    (head[k] == b'"').then_some(k)
}

/// The position of the first byte of `block` that is not plain string text (below
/// 0x20, `"`, `\\` or non-ASCII), if any. SSE2 on x86-64 (part of its baseline: one
/// load, three compares), two SWAR words elsewhere.
#[inline(always)]
fn first_mark(block: &[u8; 16]) -> Option<usize> {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_cmplt_epi8, _mm_loadu_si128, _mm_movemask_epi8,
            _mm_or_si128, _mm_set1_epi8,
        };
        // SAFETY: SSE2 is enabled at compile time (the cfg above); the load reads the
        // 16 bytes of `block` (unaligned loads allowed).
        let bits = unsafe {
            let x = _mm_loadu_si128(block.as_ptr().cast::<__m128i>());
            // Signed bytes: non-ASCII ones are negative, so "below 0x20" marks them too.
            let marks = _mm_or_si128(
                _mm_or_si128(
                    _mm_cmpeq_epi8(x, _mm_set1_epi8(b'"' as i8)),
                    _mm_cmpeq_epi8(x, _mm_set1_epi8(b'\\' as i8)),
                ),
                _mm_cmplt_epi8(x, _mm_set1_epi8(0x20)),
            );
            _mm_movemask_epi8(marks) as u32
        };
        (bits != 0).then(|| bits.trailing_zeros() as usize)
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        first_mark_swar(block)
    }
}

/// [`first_mark`] by two SWAR words (targets without SSE2; tested against the SSE2
/// version and a byte loop on x86-64).
#[cfg(any(test, not(all(target_arch = "x86_64", target_feature = "sse2"))))]
#[inline(always)]
fn first_mark_swar(block: &[u8; 16]) -> Option<usize> {
    let (w0, w1) = block.split_at(8);
    let (m0, m1) = (plain_marks(word_of(w0)), plain_marks(word_of(w1)));
    if m0 != 0 {
        Some((m0.trailing_zeros() / 8) as usize)
    } else if m1 != 0 {
        Some((8 + m1.trailing_zeros() / 8) as usize)
    } else {
        None
    }
}

/// The eight bytes of `w` (exactly eight) as a little-endian word.
#[inline(always)]
fn word_of(w: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(w);
    u64::from_le_bytes(bytes)
}

/// The high bit of each byte of `x` that is not plain string text (below 0x20, `"`,
/// `\\` or non-ASCII); the lowest mark is exact (a borrow only marks bytes above a
/// truly marked one).
#[inline(always)]
fn plain_marks(x: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    (x.wrapping_sub(ONES * 0x20) & !x & HIGH)
        | zero(x ^ (ONES * u64::from(b'"')))
        | zero(x ^ (ONES * u64::from(b'\\')))
        | (x & HIGH)
}

/// Decodes the escape at `b[k]` (a backslash) into `out`; returns the position after it.
#[inline]
fn unescape_one(b: &[u8], k: usize, out: &mut String) -> Option<usize> {
    let c = *b.get(k + 1)?;
    let mut i = k + 2;
    match c {
        b'"' => out.push('"'),
        b'\\' => out.push('\\'),
        b'/' => out.push('/'),
        b'b' => out.push('\u{8}'),
        b'f' => out.push('\u{c}'),
        b'n' => out.push('\n'),
        b'r' => out.push('\r'),
        b't' => out.push('\t'),
        b'u' => {
            let hi = hex4(b.get(i..i + 4)?)?;
            i += 4;
            let cp = if (0xD800..0xDC00).contains(&hi) {
                if b.get(i..i + 2)? != b"\\u" {
                    return None;
                }
                let lo = hex4(b.get(i + 2..i + 6)?)?;
                if !(0xDC00..0xE000).contains(&lo) {
                    return None;
                }
                i += 6;
                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
            } else if (0xDC00..0xE000).contains(&hi) {
                return None;
            } else {
                hi
            };
            out.push(char::from_u32(cp)?);
        }
        _ => return None,
    }
    Some(i)
}

/// A cursor over the bytes of one JSON text.
pub(crate) struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at `b[i]`.
    pub(crate) fn new(b: &'a [u8], i: usize) -> Self {
        Cursor { b, i }
    }

    /// The position.
    pub(crate) fn pos(&self) -> usize {
        self.i
    }

    /// True when every byte was read.
    pub(crate) fn at_end(&self) -> bool {
        self.i == self.b.len()
    }

    /// Reads the literal bytes `lit`, given as an array so that the comparison is
    /// inlined (a long literal compared as a slice costs a `memcmp` call).
    #[inline]
    pub(crate) fn eat_array<const N: usize>(&mut self, lit: &[u8; N]) -> Option<()> {
        let got: &[u8; N] = self.b.get(self.i..self.i + N)?.try_into().ok()?;
        if got == lit {
            self.i += N;
            Some(())
        } else {
            None
        }
    }

    /// Reads the literal bytes `lit`.
    #[inline]
    pub(crate) fn eat(&mut self, lit: &[u8]) -> Option<()> {
        if self.b.get(self.i..self.i + lit.len())? == lit {
            self.i += lit.len();
            Some(())
        } else {
            None
        }
    }

    /// Reads `lit` when it comes next; says whether it did.
    #[inline]
    pub(crate) fn peek_eat(&mut self, lit: &[u8]) -> bool {
        self.eat(lit).is_some()
    }

    /// Skips JSON whitespace (space, tab, line feed, carriage return).
    #[inline]
    pub(crate) fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    /// The text of the string literal at the start of `lit` and the bytes it spans (see
    /// [`string_text`](Self::string_text)).
    #[inline]
    pub(crate) fn string_text_at(lit: &'a [u8]) -> Option<(Cow<'a, str>, usize)> {
        let mut c = Cursor::new(lit, 0);
        let text = c.string_text()?;
        Some((text, c.pos()))
    }

    /// Reads a string literal and returns its text: borrowed when it holds no escape,
    /// decoded otherwise (`None` for an escape serde_json would reject).
    pub(crate) fn string_text(&mut self) -> Option<Cow<'a, str>> {
        let start = self.i;
        let s = self.string()?;
        if !s.escaped {
            return Some(Cow::Borrowed(s.raw));
        }
        let mut out = String::with_capacity(s.raw.len());
        read_string_into(&self.b[start..self.i], &mut out)?;
        Some(Cow::Owned(out))
    }

    /// [`string_text`](Self::string_text), decoding a string with escapes into
    /// `scratch` (cleared first) instead of a new `String`: for a reader that reads one
    /// such string per document, again and again.
    pub(crate) fn string_text_in<'s>(&mut self, scratch: &'s mut String) -> Option<&'s str>
    where
        'a: 's,
    {
        let start = self.i;
        let s = self.string()?;
        if !s.escaped {
            return Some(s.raw);
        }
        scratch.clear();
        read_string_into(&self.b[start..self.i], scratch)?;
        Some(scratch.as_str())
    }

    /// Reads an object, whitespace allowed between tokens, calling `member` with the
    /// cursor at each value (after the `:` and whitespace) and the member's key (keys
    /// with escapes are not read). `member` reads the value and may refuse it.
    pub(crate) fn object(
        &mut self,
        mut member: impl FnMut(&mut Self, &'a [u8]) -> Option<()>,
    ) -> Option<()> {
        self.eat(b"{")?;
        self.ws();
        if self.peek_eat(b"}") {
            return Some(());
        }
        self.members(&mut member)
    }

    /// Reads the rest of an object after a member's value: the other members (as
    /// [`object`](Self::object) does) and the closing brace.
    pub(crate) fn object_rest(
        &mut self,
        mut member: impl FnMut(&mut Self, &'a [u8]) -> Option<()>,
    ) -> Option<()> {
        self.ws();
        if !self.peek_eat(b",") {
            return self.eat(b"}");
        }
        self.members(&mut member)
    }

    /// Members from a key on, through the closing brace.
    #[inline(always)]
    fn members(
        &mut self,
        member: &mut impl FnMut(&mut Self, &'a [u8]) -> Option<()>,
    ) -> Option<()> {
        loop {
            self.ws();
            let key = self.string_plain()?;
            self.ws();
            self.eat(b":")?;
            self.ws();
            member(self, key)?;
            self.ws();
            if !self.peek_eat(b",") {
                return self.eat(b"}");
            }
        }
    }

    /// Reads an array, whitespace allowed between tokens, with `item` reading each
    /// element (the cursor at its first byte).
    pub(crate) fn array<T>(
        &mut self,
        mut item: impl FnMut(&mut Self) -> Option<T>,
    ) -> Option<Vec<T>> {
        self.eat(b"[")?;
        self.ws();
        if self.peek_eat(b"]") {
            return Some(Vec::new());
        }
        // Room for one item at first: the arrays read here (`choices`, `tool_calls`)
        // nearly always hold one, and a small block comes from the allocator's fast
        // path where the default first growth (four items) may not.
        let mut items = Vec::with_capacity(1);
        loop {
            self.ws();
            items.push(item(self)?);
            self.ws();
            if !self.peek_eat(b",") {
                self.eat(b"]")?;
                return Some(items);
            }
        }
    }

    /// Reads `null` as `Some(None)`, anything else with `value`.
    #[inline]
    pub(crate) fn nullable<T>(
        &mut self,
        value: impl FnOnce(&mut Self) -> Option<T>,
    ) -> Option<Option<T>> {
        if self.peek_eat(b"null") {
            Some(None)
        } else {
            value(self).map(Some)
        }
    }

    /// Reads a JSON value as serde_json would read it into a [`Value`] (maps in their
    /// text's order, a repeated key keeping its first place and its last value), or
    /// `None`: strings without escapes, literals, arrays and objects nested up to 64
    /// deep, integers of up to 18 digits; other numbers are handed to serde_json, whose
    /// float parsing is the reference. Keys with escapes and deeper nesting are `None`.
    fn value(&mut self, depth: u32) -> Option<Value> {
        const DEEPEST: u32 = 64;
        Some(match *self.b.get(self.i)? {
            // A string with escapes leaves the text to serde_json, whose one-pass
            // unescaping is faster than finding the end and then decoding.
            b'"' => Value::String(self.plain_str()?.to_owned()),
            b'{' if depth < DEEPEST => {
                let mut map = Map::new();
                self.object(|p, key| {
                    // `string_plain` checked the key: valid UTF-8, no escapes.
                    let key = std::str::from_utf8(key).ok()?.to_owned();
                    let value = p.value(depth + 1)?;
                    map.insert(key, value);
                    Some(())
                })?;
                Value::Object(map)
            }
            b'[' if depth < DEEPEST => Value::Array(self.array(|p| p.value(depth + 1))?),
            b'n' => self.eat(b"null").map(|()| Value::Null)?,
            b't' => self.eat(b"true").map(|()| Value::Bool(true))?,
            b'f' => self.eat(b"false").map(|()| Value::Bool(false))?,
            b'0'..=b'9' => {
                let start = self.i;
                match self.number_u64() {
                    // A plain integer: serde_json's `u64` too.
                    Some(n) if !matches!(self.b.get(self.i), Some(b'.' | b'e' | b'E')) => {
                        Value::from(n)
                    }
                    _ => {
                        self.i = start;
                        self.number_by_serde()?
                    }
                }
            }
            b'-' => self.number_by_serde()?,
            _ => return None,
        })
    }

    /// Reads a number by the JSON grammar and has serde_json make it a [`Value`].
    fn number_by_serde(&mut self) -> Option<Value> {
        let start = self.i;
        self.skip_number()?;
        serde_json::from_slice(&self.b[start..self.i]).ok()
    }

    /// Reads any JSON value without keeping it (an unknown member's value): strings
    /// with their escapes checked, numbers by the JSON grammar, arrays and objects
    /// nested up to 32 deep. Keys with escapes are not read.
    pub(crate) fn skip_value(&mut self) -> Option<()> {
        self.skip_nested(0)
    }

    fn skip_nested(&mut self, depth: u32) -> Option<()> {
        match *self.b.get(self.i)? {
            b'"' => self.string_text().map(drop),
            b'{' if depth < 32 => self.object(|p, _| p.skip_nested(depth + 1)),
            b'[' if depth < 32 => self.array(|p| p.skip_nested(depth + 1)).map(drop),
            b'n' => self.eat(b"null"),
            b't' => self.eat(b"true"),
            b'f' => self.eat(b"false"),
            b'-' | b'0'..=b'9' => self.skip_number(),
            _ => None,
        }
    }

    /// Reads a number by the JSON grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)?
    /// ([eE] [+-]? [0-9]+)?`.
    fn skip_number(&mut self) -> Option<()> {
        let digits = |p: &mut Self| {
            let start = p.i;
            while let Some(b'0'..=b'9') = p.b.get(p.i) {
                p.i += 1;
            }
            (p.i > start).then_some(start)
        };
        self.peek_eat(b"-");
        let start = digits(self)?;
        if self.i - start > 1 && self.b[start] == b'0' {
            return None;
        }
        if self.peek_eat(b".") {
            digits(self)?;
        }
        if let Some(b'e' | b'E') = self.b.get(self.i) {
            self.i += 1;
            if let Some(b'+' | b'-') = self.b.get(self.i) {
                self.i += 1;
            }
            digits(self)?;
        }
        Some(())
    }

    /// Reads a string without escapes; returns its body (valid UTF-8).
    pub(crate) fn string_plain(&mut self) -> Option<&'a [u8]> {
        self.plain_str().map(str::as_bytes)
    }

    /// [`string_plain`](Self::string_plain) as text. A long string is given up at its
    /// first backslash, not read to its end.
    #[inline]
    fn plain_str(&mut self) -> Option<&'a str> {
        if self.b.get(self.i) != Some(&b'"') {
            return None;
        }
        let body = &self.b[self.i + 1..];
        let (len, ascii) = match body.first_chunk::<16>().and_then(short_plain_len) {
            Some(len) => (len, true),
            None => {
                let mut ascii = true;
                let k = next_special(body, &mut ascii)?;
                if body[k] != b'"' {
                    return None; // an escape or a control byte
                }
                (k, ascii)
            }
        };
        let text = if ascii {
            // SAFETY: `short_plain_len` or `next_special` saw every byte before the
            // quote below 0x80, and ASCII is UTF-8.
            unsafe { std::str::from_utf8_unchecked(&body[..len]) }
        } else {
            std::str::from_utf8(&body[..len]).ok()?
        };
        self.i += len + 2;
        Some(text)
    }

    /// Reads a string literal (opening quote included).
    #[inline]
    pub(crate) fn string(&mut self) -> Option<JsonStr<'a>> {
        let (body, end) = self.string_body()?;
        let raw = if end.ascii {
            // SAFETY: `string_end` saw every byte of `body` below 0x80 (tested against
            // a byte loop in `string_ends_match_a_byte_loop`), and ASCII is UTF-8.
            // Unchecked because the check costs ~100 instructions per short value,
            // a tenth of reading a whole chunk.
            unsafe { std::str::from_utf8_unchecked(body) }
        } else {
            std::str::from_utf8(body).ok()?
        };
        Some(JsonStr {
            raw,
            escaped: end.escaped,
        })
    }

    /// Reads a string literal; returns its body (escapes intact, UTF-8 not checked).
    /// Always inlined: a chunk holds dozens of strings, and the call would cost more
    /// than reading a key.
    #[inline(always)]
    fn string_body(&mut self) -> Option<(&'a [u8], StringEnd)> {
        if self.b.get(self.i) != Some(&b'"') {
            return None;
        }
        let rest = &self.b[self.i + 1..];
        // Most keys and short values: plain ASCII closed within 16 bytes, found by
        // testing two words (a tenth of the general search's instructions).
        if let Some(head) = rest.first_chunk::<16>()
            && let Some(len) = short_plain_len(head)
        {
            self.i += len + 2;
            let end = StringEnd {
                len,
                escaped: false,
                ascii: true,
            };
            return Some((&rest[..len], end));
        }
        self.string_body_long(rest)
    }

    /// [`string_body`](Self::string_body) for any string (`rest` after the quote).
    #[inline(never)]
    fn string_body_long(&mut self, rest: &'a [u8]) -> Option<(&'a [u8], StringEnd)> {
        let end = string_end(rest)?;
        self.i += end.len + 2;
        Some((&rest[..end.len], end))
    }

    /// Reads a string without escapes, `null`, `true`, `false` or a plain integer (no
    /// objects, arrays or other numbers: serde_json judges those).
    pub(crate) fn scalar(&mut self) -> Option<()> {
        match *self.b.get(self.i)? {
            b'"' => self.string_plain().map(|_| ()),
            b'n' => self.eat(b"null"),
            b't' => self.eat(b"true"),
            b'f' => self.eat(b"false"),
            b'-' => {
                self.i += 1;
                self.number_u64().map(|_| ())
            }
            _ => self.number_u64().map(|_| ()),
        }
    }

    /// Reads a non-negative integer of at most 18 digits without leading zeros.
    #[inline]
    pub(crate) fn number_u64(&mut self) -> Option<u64> {
        let start = self.i;
        let mut v = 0u64;
        while let Some(&d @ b'0'..=b'9') = self.b.get(self.i) {
            v = v * 10 + u64::from(d - b'0');
            self.i += 1;
            if self.i - start > 18 {
                return None;
            }
        }
        let n = self.i - start;
        if n == 0 || (n > 1 && self.b[start] == b'0') {
            return None;
        }
        Some(v)
    }
}

/// Where a string body ends, and what it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StringEnd {
    /// The body's length (the closing quote is at `len`).
    len: usize,
    /// It holds at least one backslash escape.
    escaped: bool,
    /// Every byte is ASCII (no UTF-8 check needed).
    ascii: bool,
}

/// Finds the end of the string body at the start of `b` (its closing quote); `None` on
/// a raw control character or no closing quote. Escapes are skipped, not checked.
#[inline(always)]
fn string_end(b: &[u8]) -> Option<StringEnd> {
    let (mut escaped, mut ascii) = (false, true);
    let mut i = 0;
    loop {
        let k = i + next_special(&b[i..], &mut ascii)?;
        match b[k] {
            b'"' => {
                return Some(StringEnd {
                    len: k,
                    escaped,
                    ascii,
                });
            }
            b'\\' => {
                escaped = true;
                // The escaped byte is checked when the escape is decoded.
                let c = *b.get(k + 1)?;
                if c < 0x20 {
                    return None;
                }
                ascii &= c.is_ascii();
                i = k + 2;
            }
            _ => return None, // a control character
        }
    }
}

/// The position of the first `"`, `\\` or control byte in `b`; clears `ascii` when a
/// byte before it is not ASCII. Eight bytes at a time (SWAR) for the first 64 bytes,
/// where keys and short values end; sixteen bytes at a time beyond (long text).
#[inline(always)]
fn next_special(b: &[u8], ascii: &mut bool) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Without SSE2 the words go on to the end.
    let words_end = if cfg!(all(target_arch = "x86_64", target_feature = "sse2")) {
        64
    } else {
        usize::MAX
    };
    let mut n = 0;
    while n < words_end
        && let Some(word) = b.get(n..n + 8)
    {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        let x = u64::from_le_bytes(bytes);
        // High bit of each byte that is < 0x20, `"` or `\\`; the lowest mark is exact.
        let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
        let marks = (x.wrapping_sub(ONES * 0x20) & !x & HIGH)
            | zero(x ^ (ONES * u64::from(b'"')))
            | zero(x ^ (ONES * u64::from(b'\\')));
        if marks != 0 {
            let k = marks.trailing_zeros() / 8;
            // The high bits of the bytes before the mark.
            let before = (1u64 << (k * 8)).wrapping_sub(1);
            *ascii &= x & HIGH & before == 0;
            return Some(n + k as usize);
        }
        *ascii &= x & HIGH == 0;
        n += 8;
    }
    Some(n + special_in_blocks(&b[n..], ascii)?)
}

/// [`next_special`] for long text: sixteen bytes at a time with SSE2 on x86-64 (its
/// baseline: one load, four compares per block, against the eight-byte words' dozen
/// operations; measured: a 1 KiB argument string read in ~0.5 instead of ~2.5
/// instructions a byte), the words elsewhere.
#[inline]
fn special_in_blocks(b: &[u8], ascii: &mut bool) -> Option<usize> {
    let mut n = 0;
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8,
            _mm_or_si128, _mm_set1_epi8, _mm_setzero_si128,
        };
        // SAFETY: SSE2 is enabled at compile time (the cfg above); the
        // loads read 16 bytes of a slice of at least 16 (unaligned loads allowed).
        let marks_of = |block: &[u8]| unsafe {
            let x = _mm_loadu_si128(block.as_ptr().cast::<__m128i>());
            let control = _mm_set1_epi8(0x1f);
            // Unsigned: a byte is below 0x20 when its maximum with 0x1f is 0x1f.
            let marks = _mm_or_si128(
                _mm_or_si128(
                    _mm_cmpeq_epi8(x, _mm_set1_epi8(b'"' as i8)),
                    _mm_cmpeq_epi8(x, _mm_set1_epi8(b'\\' as i8)),
                ),
                _mm_cmpeq_epi8(_mm_max_epu8(x, control), control),
            );
            (x, marks)
        };
        // SAFETY: SSE2 is enabled at compile time (the cfg above); no memory is read.
        let mask = |x: __m128i| unsafe { _mm_movemask_epi8(x) };
        // SAFETY: SSE2 is enabled at compile time (the cfg above); no memory is read.
        let or = |a: __m128i, b: __m128i| unsafe { _mm_or_si128(a, b) };
        let found = |n: usize, x: __m128i, marks: __m128i, ascii: &mut bool| {
            let (marks, high) = (mask(marks), mask(x));
            let k = (marks as u32).trailing_zeros();
            *ascii &= (high as u32) & ((1u32 << k) - 1) == 0;
            n + k as usize
        };
        // Two blocks a round, their marks tested at once; the high bits of the bytes
        // passed are gathered and tested when the search ends.
        // SAFETY: SSE2 is enabled at compile time (the cfg above); no memory is read.
        let mut high = unsafe { _mm_setzero_si128() };
        while let Some(pair) = b.get(n..n + 32) {
            let (x0, m0) = marks_of(&pair[..16]);
            let (x1, m1) = marks_of(&pair[16..]);
            if mask(or(m0, m1)) != 0 {
                *ascii &= mask(high) == 0;
                return Some(if mask(m0) != 0 {
                    found(n, x0, m0, ascii)
                } else {
                    *ascii &= mask(x0) == 0;
                    found(n + 16, x1, m1, ascii)
                });
            }
            high = or(high, or(x0, x1));
            n += 32;
        }
        *ascii &= mask(high) == 0;
        if let Some(block) = b.get(n..n + 16) {
            let (x, marks) = marks_of(block);
            if mask(marks) != 0 {
                return Some(found(n, x, marks, ascii));
            }
            *ascii &= mask(x) == 0;
            n += 16;
        }
    }
    let k = b[n..]
        .iter()
        .position(|&c| c == b'"' || c == b'\\' || c < 0x20)?;
    *ascii &= b[n..n + k].is_ascii();
    Some(n + k)
}

fn hex4(h: &[u8]) -> Option<u32> {
    let mut v = 0u32;
    for &c in h {
        v = v * 16 + (c as char).to_digit(16)?;
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(lit: &str) -> Option<String> {
        let mut out = String::new();
        let n = read_string_into(lit.as_bytes(), &mut out)?;
        // The cursor finds the same end, and sees escapes where there are.
        let mut c = Cursor::new(lit.as_bytes(), 0);
        let s = c.string()?;
        assert_eq!(c.pos(), n);
        assert_eq!(s.escaped, lit.contains('\\'));
        // `string_text` decodes the same text.
        let text = Cursor::new(lit.as_bytes(), 0).string_text();
        assert_eq!(text.as_deref(), Some(out.as_str()), "{lit}");
        (n == lit.len()).then_some(out)
    }

    #[test]
    fn strings_match_serde() {
        let long = format!("{}\\n\\\"{}", "a".repeat(100), "é".repeat(50));
        for s in [
            "plain",
            r#"a\"b\\c\/d\n\r\t\b\f"#,
            r#"\u00e9\u4e2d\ud83d\ude00"#,
            "multi-byte é 😀",
            "",
            long.as_str(),
        ] {
            let lit = format!("\"{s}\"");
            let want: String = serde_json::from_str(&lit).unwrap();
            assert_eq!(read(&lit), Some(want), "{s}");
        }
        // Whatever serde_json rejects, the scan leaves to it.
        for bad in [
            r#""\ud83d""#,
            r#""\ude00""#,
            r#""\x""#,
            r#""\u12""#,
            "\"\\",
            "\"a\tb\"",
            "\"open",
        ] {
            assert!(serde_json::from_str::<String>(bad).is_err());
            assert_eq!(read(bad), None, "{bad}");
        }
        let mut c = Cursor::new(b"\"\xff\"", 0);
        assert!(c.string().is_none());
        assert_eq!(read_string_into(b"\"\xff\"", &mut String::new()), None);
    }

    #[test]
    fn numbers_and_scalars() {
        let num = |s: &str| Cursor::new(s.as_bytes(), 0).number_u64();
        assert_eq!(num("0"), Some(0));
        assert_eq!(num("120,"), Some(120));
        assert_eq!(num("01"), None);
        assert_eq!(num(""), None);
        assert_eq!(num("1234567890123456789"), None);
        for ok in ["null", "true", "false", "-3", "\"x\"", "17"] {
            let mut c = Cursor::new(ok.as_bytes(), 0);
            assert!(c.scalar().is_some() && c.at_end(), "{ok}");
        }
        for no in ["{}", "[]", "1.5", "1e3", "-", "nul", "\"a\\nb\""] {
            let mut c = Cursor::new(no.as_bytes(), 0);
            assert!(c.scalar().is_none() || !c.at_end(), "{no}");
        }
    }

    #[test]
    fn skipped_values_follow_the_json_grammar() {
        for ok in [
            "0",
            "-0",
            "12",
            "1.5",
            "-0.25e+3",
            "1E9",
            "2e-1",
            "\"a\\\"b\"",
            "[]",
            "{}",
            "[1, {\"a\": [null, true, false]}]",
            "{ \"k\" : \"\\u00e9\" }",
        ] {
            let mut c = Cursor::new(ok.as_bytes(), 0);
            assert!(c.skip_value().is_some() && c.at_end(), "{ok}");
        }
        for no in [
            "01", "-", "1.", ".5", "1e", "1e+", "[1,]", "{\"a\"}", "nul", "[", "\"\\x\"",
        ] {
            let mut c = Cursor::new(no.as_bytes(), 0);
            assert!(c.skip_value().is_none() || !c.at_end(), "{no}");
        }
        // Nesting deeper than 32 is left to serde_json.
        let deep = format!("{}{}", "[".repeat(40), "]".repeat(40));
        assert!(Cursor::new(deep.as_bytes(), 0).skip_value().is_none());
    }

    /// `read_object`'s reading of `text`, checked against serde_json's: whatever it
    /// reads, serde_json reads the same map, in the same order.
    fn object(text: &[u8]) -> Option<Map<String, Value>> {
        let fast = read_object(text)?;
        let serde: Map<String, Value> = serde_json::from_slice(text)
            .unwrap_or_else(|e| panic!("read what serde_json rejects ({e}): {text:?}"));
        assert_eq!(
            fast.iter().collect::<Vec<_>>(),
            serde.iter().collect::<Vec<_>>(),
            "{}",
            String::from_utf8_lossy(text)
        );
        Some(fast)
    }

    #[test]
    fn objects_read_as_serde_reads_them() {
        let long = "ab/c é ".repeat(300);
        for text in [
            r#"{}"#.to_owned(),
            r#" { "a" : 1 , "b":[true,false,null,{"c":"d"}] } "#.to_owned(),
            r#"{"path":"/tmp/x","content":"line next","n":18446744073709551615}"#.to_owned(),
            r#"{"a":1,"b":2,"a":3}"#.to_owned(),
            r#"{"f":1.5,"e":-2e-3,"z":-0,"big":123456789012345678901234567890,"neg":-9}"#
                .to_owned(),
            r#"{"x":0.1,"y":1e308,"w":[1,2.25,-3]}"#.to_owned(),
            format!(r#"{{"content":"{long}"}}"#),
            format!("{}1{}", r#"{"a":"#.repeat(64), "}".repeat(64)),
        ] {
            assert!(object(text.as_bytes()).is_some(), "{text}");
        }
        // Left to serde_json: not an object, invalid, an escape in a key or a value,
        // deep nesting, a number serde_json refuses.
        let deep = format!("{}1{}", r#"{"a":"#.repeat(65), "}".repeat(65));
        let escaped = format!(r#"{{"content":"{}"}}"#, "ab\\\"c é ".repeat(300));
        for text in [
            r#"{"content":"line\nnext"}"#,
            escaped.as_str(),
            "[1]",
            r#""x""#,
            r#"{"a":1,}"#,
            r#"{"a":01}"#,
            r#"{"a":1} x"#,
            r#"{"\u0061":1}"#,
            r#"{"a":"\ud800"}"#,
            r#"{"a":1e400}"#,
            r#"{"a":"x
y"}"#,
            deep.as_str(),
        ] {
            assert_eq!(object(text.as_bytes()), None, "{text}");
        }
    }

    /// Any JSON value (strings with any text, long ones, every kind of number).
    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<u64>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "\\PC{0,40}".prop_map(Value::String),
            "[a-z \"\\\\é]{50,300}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 40, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::vec(("[a-z_é]{0,8}", inner), 0..6)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn generated_objects_read_as_serde_reads_them(
            map in proptest::collection::vec(("[a-z_é]{0,8}", json_value()), 0..8),
            pretty in proptest::prelude::any::<bool>(),
            edits in proptest::collection::vec(
                (proptest::prelude::any::<proptest::sample::Index>(), proptest::sample::select(
                    b"{}[]\",:.-+eE0 9\\nu\x01\xc3".to_vec(),
                ), 0u8..3),
                0..3,
            ),
        ) {
            let map: Map<String, Value> = map.into_iter().collect();
            let text = if pretty {
                serde_json::to_string_pretty(&map).unwrap()
            } else {
                serde_json::to_string(&map).unwrap()
            };
            // Unedited, it is read (unless a string needed an escape).
            let read = object(text.as_bytes());
            proptest::prop_assert!(read.is_some() || text.contains('\\'), "{}", text);
            // Edited (bytes inserted, replaced or removed): whatever is read, serde_json
            // reads alike.
            let mut bytes = text.into_bytes();
            for (at, byte, how) in edits {
                let at = at.index(bytes.len() + 1);
                match how {
                    0 => bytes.insert(at, byte),
                    1 if at < bytes.len() => bytes[at] = byte,
                    _ if at < bytes.len() => {
                        bytes.remove(at);
                    }
                    _ => {}
                }
            }
            let _ = object(&bytes);
        }

        #[test]
        fn the_word_scans_match_byte_by_byte_ones(
            b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..130),
            p in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..130),
            cut in 0usize..130,
        ) {
            // The plain-ASCII run: its length, and exactly its bytes appended.
            let plain = |c: u8| (0x20..0x80).contains(&c) && c != b'"' && c != b'\\';
            let want = b.iter().position(|&c| !plain(c)).unwrap_or(b.len());
            let mut out = String::from("x");
            proptest::prop_assert_eq!(push_plain_ascii(&b, &mut out), want);
            proptest::prop_assert_eq!(&out.as_bytes()[1..], &b[..want]);
            // Prefix tests, with prefixes that match (a cut of `b`) and that do not.
            let cut = cut.min(b.len());
            proptest::prop_assert!(starts_with_bytes(&b, &b[..cut]));
            proptest::prop_assert_eq!(starts_with_bytes(&b, &p), b.starts_with(&p));
            let mut q = b[..cut].to_vec();
            if let Some(last) = q.last_mut() {
                *last ^= 1;
                proptest::prop_assert!(!starts_with_bytes(&b, &q));
            }
        }

        #[test]
        fn skipped_values_are_values_serde_json_reads(
            toks in proptest::collection::vec(proptest::sample::select(vec![
                "0", "1", "-", ".", "e", "+", "[", "]", "{", "}", ",", ":", " ", "\"", "\\",
                "\"k\"", "null", "true", "u", "00",
            ]), 0..24),
        ) {
            let text = toks.concat();
            let mut c = Cursor::new(text.as_bytes(), 0);
            if c.skip_value().is_some() {
                let end = c.pos();
                let got = serde_json::from_slice::<serde::de::IgnoredAny>(&text.as_bytes()[..end]);
                proptest::prop_assert!(got.is_ok(), "{} ({:?})", &text[..end], got);
            }
        }

        #[test]
        fn string_ends_match_a_byte_loop(
            body in proptest::collection::vec(proptest::sample::select(vec![
                b'a', b'Z', b' ', b'"', b'\\', b'n', b'\n', 0x01, 0x7f, 0x80, 0xc3, 0xa9, 0xff,
            ]), 0..200),
            plain in 0usize..150,
        ) {
            // Mostly plain bytes first, so that long bodies reach the SIMD search.
            let b = [&b"x".repeat(plain)[..], &body].concat();
            let want = (|| {
                let (mut escaped, mut ascii, mut i) = (false, true, 0);
                loop {
                    let c = *b.get(i)?;
                    match c {
                        b'"' => return Some(StringEnd { len: i, escaped, ascii }),
                        b'\\' => {
                            let e = *b.get(i + 1)?;
                            if e < 0x20 {
                                return None;
                            }
                            escaped = true;
                            ascii &= e.is_ascii();
                            i += 2;
                        }
                        c if c < 0x20 => return None,
                        c => {
                            ascii &= c.is_ascii();
                            i += 1;
                        }
                    }
                }
            })();
            proptest::prop_assert_eq!(string_end(&b), want);
        }

        #[test]
        fn strings_read_as_serde_reads_them(s in "\\PC{0,40}", raw in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40)) {
            let lit = serde_json::to_string(&s).unwrap();
            proptest::prop_assert_eq!(read(&lit), Some(s));
            // Arbitrary bytes: whatever the scan accepts, serde_json reads the same.
            let raw = [&b"\""[..], &raw].concat();
            let mut out = String::new();
            if let Some(n) = read_string_into(&raw, &mut out) {
                let want: String = serde_json::from_slice(&raw[..n]).unwrap();
                proptest::prop_assert_eq!(out, want);
            }
            let mut c = Cursor::new(&raw, 0);
            if let Some(text) = c.string_text() {
                let want: String = serde_json::from_slice(&raw[..c.pos()]).unwrap();
                proptest::prop_assert_eq!(text, want);
            }
        }

        #[test]
        fn first_marks_match_a_byte_loop(
            block in proptest::collection::vec(proptest::sample::select(vec![
                b'a', b' ', b'~', b'"', b'\\', 0x00, 0x1f, 0x20, 0x7f, 0x80, 0xc3, 0xff,
            ]), 16),
        ) {
            let block: [u8; 16] = block.try_into().unwrap();
            let want = block
                .iter()
                .position(|&c| !(0x20..0x80).contains(&c) || c == b'"' || c == b'\\');
            proptest::prop_assert_eq!(first_mark(&block), want);
            proptest::prop_assert_eq!(first_mark_swar(&block), want);
        }

        #[test]
        fn strings_followed_by_more_bytes_read_alike(
            s in "[a-z\\\\\"é\u{1}]{0,20}",
            pad in 0usize..24,
            spare in 0usize..20,
        ) {
            // The inline path (a short plain string with 16 bytes after its quote) and
            // the general one read the same; the buffer's spare room does not matter.
            let lit = serde_json::to_string(&s).unwrap();
            let b = [lit.as_bytes(), &b"}]".repeat(pad)].concat();
            let mut out = String::with_capacity(spare);
            out.push_str("ab");
            proptest::prop_assert_eq!(read_string_into(&b, &mut out), Some(lit.len()));
            proptest::prop_assert_eq!(out, format!("ab{s}"));
            // A string body as `string_body` finds it, with its kind, as `string_end`.
            let mut p = Cursor::new(&b, 0);
            let want = string_end(&b[1..]).map(|e| (&b[1..1 + e.len], e));
            proptest::prop_assert_eq!(p.string_body(), want);
            proptest::prop_assert_eq!(p.pos(), lit.len());
            // Raw bytes after the quote: control bytes and invalid UTF-8 included.
            let raw = [&b"\""[..], s.as_bytes(), b"\x01\xff\"", &b"x".repeat(pad)].concat();
            let mut q = Cursor::new(&raw, 0);
            let want = string_end(&raw[1..]).map(|e| (&raw[1..1 + e.len], e));
            proptest::prop_assert_eq!(q.string_body(), want);
        }
    }
}

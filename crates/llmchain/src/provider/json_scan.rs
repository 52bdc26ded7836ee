//! Byte-level JSON reading for the decoders' hot paths: a chunk in the exact shape a
//! provider sends for "the next argument fragment" is recognised by a strict scan and
//! its string unescaped straight into the call's buffer, without building a parse tree.
//! Anything the scan does not accept (other shapes, whitespace, unusual escapes) returns
//! `None` and the caller takes the full serde parse, which has the final word.

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
#[inline]
pub(crate) fn read_string_into(lit: &[u8], out: &mut String) -> Option<usize> {
    if lit.first() != Some(&b'"') {
        return None;
    }
    let mut i = 1;
    loop {
        // A run of plain bytes up to the next quote, backslash or control byte.
        let run_end = i + lit[i..]
            .iter()
            .position(|&c| c == b'"' || c == b'\\' || c < 0x20)?;
        let run = &lit[i..run_end];
        if run.len() <= 16 && run.is_ascii() {
            // Short ASCII runs (the usual 8-byte fragments): no call to copy them.
            out.extend(run.iter().map(|&c| char::from(c)));
        } else {
            out.push_str(std::str::from_utf8(run).ok()?);
        }
        i = run_end;
        match lit[i] {
            b'"' => return Some(i + 1),
            b'\\' => i = unescape_one(lit, i, out)?,
            _ => return None, // a raw control character
        }
    }
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

    /// Reads a string without escapes; returns its body.
    pub(crate) fn string_plain(&mut self) -> Option<&'a [u8]> {
        let s = self.string()?;
        (!s.escaped).then_some(s.raw.as_bytes())
    }

    /// Reads a string literal (opening quote included).
    #[inline]
    pub(crate) fn string(&mut self) -> Option<JsonStr<'a>> {
        self.eat(b"\"")?;
        let rest = &self.b[self.i..];
        let (len, escaped) = string_end(rest)?;
        let raw = std::str::from_utf8(&rest[..len]).ok()?;
        self.i += len + 1;
        Some(JsonStr { raw, escaped })
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

/// The length of the string body at the start of `b` (up to its closing quote) and
/// whether it holds escapes; `None` on a raw control character or no closing quote.
#[inline]
fn string_end(b: &[u8]) -> Option<(usize, bool)> {
    let mut escaped = false;
    let mut i = 0;
    loop {
        // Short bodies (the common 8-byte fragments): a plain loop beats a SIMD search.
        let k = if b.len() - i < 64 {
            i + b[i..]
                .iter()
                .position(|&c| c == b'"' || c == b'\\' || c < 0x20)?
        } else {
            let k = i + memchr::memchr2(b'"', b'\\', &b[i..])?;
            if b[i..k].iter().any(|&c| c < 0x20) {
                return None;
            }
            k
        };
        match b[k] {
            b'"' => return Some((k, escaped)),
            b'\\' => {
                escaped = true;
                // The escaped byte is checked when the escape is decoded.
                if b.get(k + 1).is_none_or(|&c| c < 0x20) {
                    return None;
                }
                i = k + 2;
            }
            _ => return None, // a control character
        }
    }
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
}

//! The OpenAI Chat chunk as the wire sends it, and how it is read.
//!
//! [`Chunk::parse`] first tries a hand-written scan of the shapes servers actually send
//! (members in any order, whitespace, escaped strings, nulls, unknown scalar members)
//! and falls back to serde_json for anything else: an `error` or `usage` object,
//! content parts, arguments given as an object, unknown members holding objects,
//! arrays or non-integer numbers, duplicate members, invalid JSON. The scan accepts a
//! chunk only when serde_json would read the same [`Chunk`] from it (tested against
//! serde_json on generated chunks), so serde_json keeps the final word on everything
//! unusual, its error messages included.
//!
//! Why by hand when serde_json exists: a typical 300-byte chunk costs serde_json's
//! typed parse about 1 µs (the nested `Option` structs are moved through every layer
//! and unknown members are skipped generically), which was a third of decoding a whole
//! 1 KiB tool-call stream; the scan reads it in a fraction of that.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;

use crate::provider::scan::json::Cursor;
use crate::provider::wire::{ArgsField, ContentField, WireUsage};

/// One chunk (or a whole non-streaming response: same envelope, `message` for `delta`).
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(PartialEq))]
pub(super) struct Chunk<'a> {
    #[serde(default, borrow)]
    pub(super) choices: Option<Vec<Choice<'a>>>,
    #[serde(default)]
    pub(super) usage: Option<WireUsage>,
    #[serde(default)]
    pub(super) error: Option<Value>,
    #[serde(default, borrow)]
    pub(super) object: Option<Cow<'a, str>>,
    #[serde(default, rename = "type", borrow)]
    pub(super) kind: Option<Cow<'a, str>>,
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(PartialEq))]
pub(super) struct Choice<'a> {
    #[serde(default)]
    pub(super) index: Option<u64>,
    #[serde(default, borrow)]
    pub(super) delta: Option<Delta<'a>>,
    /// Boxed: a streamed chunk has `delta`, only a whole response `message`, and the
    /// chunk is smaller to move around without it inline.
    #[serde(default, borrow)]
    pub(super) message: Option<Box<Delta<'a>>>,
    #[serde(default, borrow)]
    pub(super) finish_reason: Option<Cow<'a, str>>,
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(PartialEq))]
pub(super) struct Delta<'a> {
    #[serde(default, borrow)]
    pub(super) content: Option<ContentField<'a>>,
    #[serde(default, borrow)]
    pub(super) reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(super) reasoning: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(super) tool_calls: Option<Vec<WireCall<'a>>>,
    /// The legacy single call (boxed: rare).
    #[serde(default, borrow)]
    pub(super) function_call: Option<Box<WireFunction<'a>>>,
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(PartialEq))]
pub(super) struct WireCall<'a> {
    #[serde(default)]
    pub(super) index: Option<u64>,
    #[serde(default, borrow)]
    pub(super) id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(super) function: Option<WireFunction<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(PartialEq))]
pub(super) struct WireFunction<'a> {
    #[serde(default, borrow)]
    pub(super) name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(super) arguments: Option<ArgsField<'a>>,
    /// Old llama.cpp builds put the id here.
    #[serde(default, borrow)]
    pub(super) id: Option<Cow<'a, str>>,
}

impl<'a> Chunk<'a> {
    /// Reads a chunk from one `data:` payload (or a whole response body): the scan when
    /// it accepts the bytes, serde_json otherwise.
    pub(super) fn parse(data: &'a [u8]) -> Result<Self, serde_json::Error> {
        match scan(data) {
            Some(chunk) => Ok(chunk),
            None => serde_json::from_slice(data),
        }
    }

    /// [`parse`](Self::parse) for a chunk that starts with `prefix`, the prefix
    /// [`ChunkPrefix::learn`] just found in it (`{`, flat members, `"choices":`): the
    /// scan starts at the `choices` value. Anything it does not accept, or `None` for
    /// a prefix, takes the full [`parse`](Self::parse).
    pub(super) fn parse_after(
        data: &'a [u8],
        prefix: Option<&ChunkPrefix>,
    ) -> Result<Self, serde_json::Error> {
        let after = prefix.and_then(|prefix| {
            debug_assert!(data.starts_with(&prefix.bytes) && !prefix.bytes.is_empty());
            scan_after(data, prefix)
        });
        match after {
            Some(chunk) => Ok(chunk),
            None => Self::parse(data),
        }
    }
}

/// A chunk's opening bytes through `"choices":`, validated once and compared byte for
/// byte in later chunks (which repeat the same `id`, `object`, `created`, `model`…):
/// `{`, then members whose values are scalars, without whitespace.
#[derive(Debug, Default)]
pub(super) struct ChunkPrefix {
    /// The validated bytes (empty: none yet).
    pub(super) bytes: Vec<u8>,
    /// The top-level fields of [`Chunk`] among its members (as [`Seen`] bits): a
    /// later member repeating one makes serde_json reject the chunk.
    seen: u8,
}

impl ChunkPrefix {
    /// The length of the validated prefix `data` starts with, validating and keeping
    /// a new one when it differs; 0 when `data` does not start with one. A member the
    /// scan would read differently from serde_json (a non-null `usage` or `error`, a
    /// non-string `object` or `type`, a repeated field) makes it no prefix.
    pub(super) fn learn(&mut self, data: &[u8]) -> usize {
        if !self.bytes.is_empty() && data.starts_with(&self.bytes) {
            return self.bytes.len();
        }
        let mut p = Cursor::new(data, 0);
        let mut seen = Seen::default();
        let ok = (|| {
            p.eat(b"{")?;
            loop {
                let key = p.string_plain()?;
                p.eat(b":")?;
                match key {
                    b"choices" => return Some(()),
                    b"usage" | b"error" => {
                        seen.once(if key == b"usage" { 1 } else { 2 })?;
                        p.eat(b"null")?;
                    }
                    b"object" | b"type" => {
                        seen.once(if key == b"object" { 3 } else { 4 })?;
                        p.nullable(Cursor::string_plain)?;
                    }
                    _ => p.scalar()?,
                }
                p.eat(b",")?;
            }
        })();
        if ok.is_none() {
            return 0;
        }
        self.bytes.clear();
        self.bytes.extend_from_slice(&data[..p.pos()]);
        self.seen = seen.0;
        p.pos()
    }

    /// True when the prefix holds a `usage` member (a second one after `choices`
    /// makes serde_json reject the chunk).
    pub(super) fn holds_usage(&self) -> bool {
        self.seen & (1 << 1) != 0
    }
}

/// A response's `id` and `model` (`gen_ai.response.*`) from a chunk's or a whole
/// body's top-level members, strings only. Reading stops once both are found (every
/// server seen sends them before `choices`); anything unreadable leaves what was found
/// so far: these are for telemetry, never a reason to reject a chunk.
pub(super) fn response_meta(data: &[u8]) -> (Option<Cow<'_, str>>, Option<Cow<'_, str>>) {
    let (mut id, mut model) = (None, None);
    let mut p = Cursor::new(data, 0);
    p.ws();
    let _ = p.object(|p, key| {
        let slot = match key {
            b"id" => &mut id,
            b"model" => &mut model,
            _ => return p.skip_value(),
        };
        // A non-string value ends the walk too.
        *slot = p.nullable(Cursor::string_text)?;
        // Both known: stop here (`None` ends the walk; what was read is kept).
        (id.is_none() || model.is_none()).then_some(())
    });
    (id, model)
}

/// The scan: `Some` only for a chunk it reads exactly as serde_json would.
fn scan(data: &[u8]) -> Option<Chunk<'_>> {
    let mut p = Cursor::new(data, 0);
    p.ws();
    let mut chunk = Chunk::default();
    let mut seen = Seen::default();
    p.object(|p, key| top_member(p, key, &mut chunk, &mut seen))?;
    p.ws();
    p.at_end().then_some(chunk)
}

/// The scan of a chunk after its validated `prefix` (through `"choices":`): the
/// `choices` array, then the other members. A null `choices` is left to the full
/// parse (the chunk's `object` and `type`, which the prefix holds, then matter).
fn scan_after<'a>(data: &'a [u8], prefix: &ChunkPrefix) -> Option<Chunk<'a>> {
    let mut p = Cursor::new(data, prefix.bytes.len());
    let mut chunk = Chunk::default();
    let mut seen = Seen(prefix.seen);
    seen.once(0)?;
    p.ws();
    chunk.choices = Some(p.array(choice)?);
    p.object_rest(|p, key| top_member(p, key, &mut chunk, &mut seen))?;
    p.ws();
    p.at_end().then_some(chunk)
}

/// One top-level member of a chunk.
fn top_member<'a>(
    p: &mut Cursor<'a>,
    key: &[u8],
    chunk: &mut Chunk<'a>,
    seen: &mut Seen,
) -> Option<()> {
    match key {
        b"choices" => {
            seen.once(0)?;
            chunk.choices = p.nullable(|p| p.array(choice))?;
        }
        // Only a null `usage` or `error`: their objects are left to serde_json.
        b"usage" | b"error" => {
            seen.once(if key == b"usage" { 1 } else { 2 })?;
            p.eat(b"null")?;
        }
        b"object" => {
            seen.once(3)?;
            chunk.object = p.nullable(Cursor::string_text)?;
        }
        b"type" => {
            seen.once(4)?;
            chunk.kind = p.nullable(Cursor::string_text)?;
        }
        _ => p.skip_value()?,
    }
    Some(())
}

fn choice<'a>(p: &mut Cursor<'a>) -> Option<Choice<'a>> {
    let mut c = Choice::default();
    let mut seen = Seen::default();
    p.object(|p, key| {
        match key {
            b"index" => {
                seen.once(0)?;
                c.index = p.nullable(Cursor::number_u64)?;
            }
            b"delta" => {
                seen.once(1)?;
                c.delta = p.nullable(delta)?;
            }
            b"message" => {
                seen.once(2)?;
                c.message = p.nullable(|p| delta(p).map(Box::new))?;
            }
            b"finish_reason" => {
                seen.once(3)?;
                c.finish_reason = p.nullable(Cursor::string_text)?;
            }
            _ => p.skip_value()?,
        }
        Some(())
    })?;
    Some(c)
}

fn delta<'a>(p: &mut Cursor<'a>) -> Option<Delta<'a>> {
    let mut d = Delta::default();
    let mut seen = Seen::default();
    p.object(|p, key| {
        match key {
            // Content parts (an array) are left to serde_json.
            b"content" => {
                seen.once(0)?;
                d.content = p.nullable(|p| p.string_text().map(ContentField::Text))?;
            }
            b"reasoning_content" => {
                seen.once(1)?;
                d.reasoning_content = p.nullable(Cursor::string_text)?;
            }
            b"reasoning" => {
                seen.once(2)?;
                d.reasoning = p.nullable(Cursor::string_text)?;
            }
            b"tool_calls" => {
                seen.once(3)?;
                d.tool_calls = p.nullable(|p| p.array(wire_call))?;
            }
            b"function_call" => {
                seen.once(4)?;
                d.function_call = p.nullable(|p| function(p).map(Box::new))?;
            }
            _ => p.skip_value()?,
        }
        Some(())
    })?;
    Some(d)
}

fn wire_call<'a>(p: &mut Cursor<'a>) -> Option<WireCall<'a>> {
    let mut c = WireCall::default();
    let mut seen = Seen::default();
    p.object(|p, key| {
        match key {
            b"index" => {
                seen.once(0)?;
                c.index = p.nullable(Cursor::number_u64)?;
            }
            b"id" => {
                seen.once(1)?;
                c.id = p.nullable(Cursor::string_text)?;
            }
            b"function" => {
                seen.once(2)?;
                c.function = p.nullable(function)?;
            }
            _ => p.skip_value()?,
        }
        Some(())
    })?;
    Some(c)
}

fn function<'a>(p: &mut Cursor<'a>) -> Option<WireFunction<'a>> {
    let mut f = WireFunction::default();
    let mut seen = Seen::default();
    p.object(|p, key| {
        match key {
            b"name" => {
                seen.once(0)?;
                f.name = p.nullable(Cursor::string_text)?;
            }
            // Arguments given as an object (or any other value) are left to serde_json.
            b"arguments" => {
                seen.once(1)?;
                f.arguments = p.nullable(|p| p.string_text().map(ArgsField::Text))?;
            }
            b"id" => {
                seen.once(2)?;
                f.id = p.nullable(Cursor::string_text)?;
            }
            _ => p.skip_value()?,
        }
        Some(())
    })?;
    Some(f)
}

/// The members of one object read so far, by field number: serde_json rejects a
/// repeated field, so the scan leaves such an object to it.
#[derive(Default)]
struct Seen(u8);

impl Seen {
    /// `Some` the first time field `n` is seen, `None` after.
    #[inline]
    fn once(&mut self, n: u8) -> Option<()> {
        let bit = 1 << n;
        if self.0 & bit != 0 {
            return None;
        }
        self.0 |= bit;
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds chunk-like JSON from a stream of choices (`next` draws one below `n`):
    /// the fields of every level in any order, sometimes repeated, with values of the
    /// right and of wrong types, escapes, whitespace and unknown members.
    struct Gen<'r> {
        next: &'r mut dyn FnMut(usize) -> usize,
        out: String,
    }

    /// A field's name and how its value is generated.
    type Field<'r> = (&'static str, fn(&mut Gen<'r>));

    impl<'r> Gen<'r> {
        fn pick<'s>(&mut self, of: &[&'s str]) -> &'s str {
            of[(self.next)(of.len())]
        }

        /// One of `good`, or now and then (one in 100) one of `bad`.
        fn value(&mut self, good: &[&str], bad: &[&str]) {
            let v = if (self.next)(100) == 0 {
                self.pick(bad)
            } else {
                self.pick(good)
            };
            self.out.push_str(v);
        }

        fn ws(&mut self) {
            let w = self.pick(&["", "", "", "", " ", "\n", "\t ", "\r\n  "]);
            self.out.push_str(w);
        }

        fn object(&mut self, fields: &[Field<'r>]) {
            self.out.push('{');
            // Each field at most once, in any order, with unknown members among them;
            // now and then a field repeated.
            let mut left: Vec<usize> = (0..=fields.len()).collect();
            let n = if (self.next)(3) == 0 {
                (self.next)(fields.len() + 2)
            } else {
                fields.len() + 1
            };
            for i in 0..n {
                if i > 0 {
                    self.ws();
                    self.out.push(',');
                }
                self.ws();
                let k = if left.is_empty() || (self.next)(64) == 0 {
                    (self.next)(fields.len() + 1)
                } else {
                    let at = (self.next)(left.len());
                    left.swap_remove(at)
                };
                if k == fields.len() {
                    self.unknown_key(fields);
                    self.ws();
                    self.out.push(':');
                    self.ws();
                    self.value(
                        &[
                            "1",
                            "-2",
                            "0",
                            "true",
                            "false",
                            "null",
                            "\"x\"",
                            "1.5",
                            "-0.25e+3",
                            "[]",
                            "{\"k\":[1,{\"a\":null}]}",
                            "\"a\\\"b\"",
                            "[\"\\u00e9\"]",
                        ],
                        &[
                            "-",
                            "01",
                            "1.",
                            "[1,]",
                            "{\"a\"}",
                            "\"\\ud800\"",
                            "1e",
                            ".5",
                            "nul",
                        ],
                    );
                } else {
                    let (key, value) = fields[k];
                    self.out.push('"');
                    self.out.push_str(key);
                    self.out.push('"');
                    self.ws();
                    self.out.push(':');
                    self.ws();
                    value(self);
                }
            }
            self.ws();
            self.out.push('}');
        }

        /// A member name this level's struct does not have (or has, spelled with an
        /// escape serde_json reads through): a name servers send, any string, a field
        /// of another level, a near miss of one of this level's fields, or one of them
        /// with a character escaped.
        fn unknown_key(&mut self, fields: &[Field<'r>]) {
            const ALPHABET: &[&str] = &[
                "a",
                "z",
                "_",
                "-",
                "0",
                "9",
                " ",
                "é",
                "😀",
                "\\\"",
                "\\\\",
                "\\n",
                "\\u0041",
                "\\u00e9",
                "\\ud83d\\ude00",
                "\\/",
            ];
            const OTHER_LEVELS: &[&str] = &[
                "choices",
                "usage",
                "error",
                "object",
                "type",
                "index",
                "delta",
                "message",
                "finish_reason",
                "content",
                "reasoning_content",
                "reasoning",
                "tool_calls",
                "function_call",
                "id",
                "function",
                "name",
                "arguments",
            ];
            let own = |g: &mut Self| fields[(g.next)(fields.len())].0;
            // Mostly names servers send (the chunks the scan reads), often the others.
            let key = match (self.next)(20) {
                0..10 => self
                    .pick(&[
                        "id",
                        "role",
                        "logprobs",
                        "created",
                        "refusal",
                        "obfuscation",
                    ])
                    .to_owned(),
                10..12 => {
                    let n = (self.next)(10);
                    (0..n).map(|_| self.pick(ALPHABET)).collect()
                }
                12..15 => self.pick(OTHER_LEVELS).to_owned(),
                15..18 => {
                    let name = own(self);
                    match (self.next)(4) {
                        0 => format!("{name}s"),
                        1 => format!("{name} "),
                        2 => name.to_uppercase(),
                        _ => name[..name.len() - 1].to_owned(),
                    }
                }
                // A field of this level with one character escaped: serde_json reads
                // the field, so the scan must too, or leave the chunk to it.
                _ => {
                    let name = own(self);
                    let at = (self.next)(name.len());
                    format!(
                        "{}\\u{:04x}{}",
                        &name[..at],
                        name.as_bytes()[at],
                        &name[at + 1..]
                    )
                }
            };
            self.out.push('"');
            self.out.push_str(&key);
            self.out.push('"');
        }

        fn array(&mut self, item: fn(&mut Self)) {
            if (self.next)(8) == 0 {
                self.out.push_str("null");
                return;
            }
            self.out.push('[');
            let n = (self.next)(3);
            for i in 0..n {
                if i > 0 {
                    self.out.push(',');
                }
                self.ws();
                item(self);
                self.ws();
            }
            self.out.push(']');
        }

        fn text(&mut self) {
            self.value(
                &[
                    "\"plain\"",
                    "\"\"",
                    "null",
                    "\"tab\\there \\\"q\\\" \\/\"",
                    "\"\\u00e9\\ud83d\\ude00\"",
                    "\"é 😀\"",
                    "\"{\\\"city\\\":\\\"Paris\\\"}\"",
                    "\"call_1\"",
                    "\"tool_calls\"",
                ],
                &[
                    "5",
                    "\"\\ud800\"",
                    "\"\\x\"",
                    "[]",
                    "{\"type\":\"text\",\"text\":\"hi\"}",
                ],
            );
        }

        fn number(&mut self) {
            self.value(
                &["0", "0", "1", "3", "null", "123456789012345678"],
                &["01", "-1", "1.5", "\"0\"", "18446744073709551615"],
            );
        }

        fn parts(&mut self) {
            if (self.next)(30) == 0 {
                self.out.push_str("[{\"type\":\"text\",\"text\":\"hi\"}]");
            } else {
                self.text();
            }
        }

        fn arguments(&mut self) {
            if (self.next)(30) == 0 {
                self.out.push_str("{\"a\":1}");
            } else {
                self.text();
            }
        }

        fn function_fields() -> Vec<Field<'r>> {
            vec![
                ("name", Self::text),
                ("arguments", Self::arguments),
                ("id", Self::text),
            ]
        }

        fn function(&mut self) {
            self.object(&Self::function_fields());
        }

        fn nullable(&mut self, value: fn(&mut Self)) {
            if (self.next)(8) == 0 {
                self.out.push_str("null");
            } else {
                value(self);
            }
        }

        fn wire_call_fields() -> Vec<Field<'r>> {
            vec![
                ("index", Self::number),
                ("id", Self::text),
                ("function", |g| g.nullable(Self::function)),
                ("type", Self::text),
            ]
        }

        fn wire_call(&mut self) {
            self.object(&Self::wire_call_fields());
        }

        fn delta_fields() -> Vec<Field<'r>> {
            vec![
                ("content", Self::parts),
                ("reasoning_content", Self::text),
                ("reasoning", Self::text),
                ("tool_calls", |g| g.array(Self::wire_call)),
                ("function_call", |g| g.nullable(Self::function)),
            ]
        }

        fn delta(&mut self) {
            self.object(&Self::delta_fields());
        }

        fn choice_fields() -> Vec<Field<'r>> {
            vec![
                ("index", Self::number),
                ("delta", |g| g.nullable(Self::delta)),
                ("message", |g| g.nullable(Self::delta)),
                ("finish_reason", Self::text),
            ]
        }

        fn choice(&mut self) {
            self.object(&Self::choice_fields());
        }

        fn chunk_fields() -> Vec<Field<'r>> {
            vec![
                ("choices", |g| g.array(Self::choice)),
                ("usage", |g| {
                    g.value(
                        &["null"],
                        &["{\"prompt_tokens\":3,\"completion_tokens\":4}"],
                    );
                }),
                ("error", |g| {
                    g.value(&["null"], &["{\"message\":\"boom\"}", "\"boom\""]);
                }),
                ("object", Self::text),
                ("type", Self::text),
            ]
        }

        fn chunk(&mut self) {
            self.ws();
            self.object(&Self::chunk_fields());
            self.ws();
            if (self.next)(100) == 0 {
                let junk = self.pick(&["x", "}", ",", "\u{0}"]);
                self.out.push_str(junk);
            }
        }
    }

    /// A chunk generated from a non-zero xorshift state.
    fn generated_chunk(mut state: u64) -> String {
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let mut g = Gen {
            next: &mut next,
            out: String::new(),
        };
        g.chunk();
        g.out
    }

    /// A chunk generated from a seed, and whether the scan read it.
    fn generated(seed: u64) -> Option<usize> {
        check(generated_chunk(seed | 1).as_bytes())
    }

    /// Whatever the scan reads, serde_json reads the same from the same bytes; returns
    /// the number of tool calls the scan read, `None` when it left the bytes alone.
    fn check(data: &[u8]) -> Option<usize> {
        check_after_prefix(data);
        let scanned = scan(data)?;
        let calls = scanned.choices.iter().flatten().map(|c| {
            [c.delta.as_ref(), c.message.as_deref()]
                .into_iter()
                .flatten()
                .map(|d| d.tool_calls.as_ref().map_or(0, Vec::len))
                .sum::<usize>()
        });
        let calls = calls.sum();
        let serde: Result<Chunk<'_>, _> = serde_json::from_slice(data);
        match serde {
            Ok(want) => assert_eq!(scanned, want, "{}", String::from_utf8_lossy(data)),
            Err(e) => panic!(
                "the scan read what serde_json rejects ({e}): {}",
                String::from_utf8_lossy(data)
            ),
        }
        Some(calls)
    }

    /// The scan after a learned prefix reads what serde_json reads too (but for the
    /// `object` and `type` the prefix holds, which it does not read); true when it
    /// read the chunk.
    fn check_after_prefix(data: &[u8]) -> bool {
        let mut prefix = ChunkPrefix::default();
        if prefix.learn(data) == 0 {
            return false;
        }
        assert_eq!(
            prefix.learn(data),
            prefix.bytes.len(),
            "a learned prefix is known"
        );
        let Some(after) = scan_after(data, &prefix) else {
            return false;
        };
        let want: Chunk<'_> = serde_json::from_slice(data).unwrap_or_else(|e| {
            panic!(
                "the scan after a prefix read what serde_json rejects ({e}): {}",
                String::from_utf8_lossy(data)
            )
        });
        let text = String::from_utf8_lossy(data);
        assert_eq!(after.choices, want.choices, "{text}");
        assert_eq!(after.usage, want.usage, "{text}");
        assert_eq!(after.error, want.error, "{text}");
        assert!(
            after.object.is_none() || after.object == want.object,
            "{text}"
        );
        assert!(after.kind.is_none() || after.kind == want.kind, "{text}");
        true
    }

    /// The member names serde_json reads into `T` (its `Deserialize` impl's field
    /// list, caught by a deserializer that asks for nothing else).
    fn serde_fields<T: Deserialize<'static>>() -> Vec<&'static str> {
        use serde::de::{Error as _, Visitor, value::Error};
        struct Catch<'c>(&'c mut Vec<&'static str>);
        impl<'de> serde::Deserializer<'de> for Catch<'_> {
            type Error = Error;
            fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
                Err(Error::custom("not a struct"))
            }
            fn deserialize_struct<V: Visitor<'de>>(
                self,
                _: &'static str,
                fields: &'static [&'static str],
                _: V,
            ) -> Result<V::Value, Error> {
                self.0.extend_from_slice(fields);
                Err(Error::custom("caught"))
            }
            serde::forward_to_deserialize_any! {
                bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
                bytes byte_buf option unit unit_struct newtype_struct seq tuple
                tuple_struct map enum identifier ignored_any
            }
        }
        let mut fields = Vec::new();
        let _ = T::deserialize(Catch(&mut fields));
        assert!(
            !fields.is_empty(),
            "{} is a struct",
            std::any::type_name::<T>()
        );
        fields
    }

    /// A field added to a serde struct of the chunk but not to the generator fails
    /// here; once in the generator, the parity tests below fail until the scan reads
    /// it too (the scan skips a member it does not know, serde_json would not).
    #[test]
    fn the_generator_covers_every_field_of_the_serde_structs() {
        let levels: [(&str, Vec<&str>, Vec<Field<'_>>); 5] = [
            ("Chunk", serde_fields::<Chunk<'_>>(), Gen::chunk_fields()),
            ("Choice", serde_fields::<Choice<'_>>(), Gen::choice_fields()),
            ("Delta", serde_fields::<Delta<'_>>(), Gen::delta_fields()),
            (
                "WireCall",
                serde_fields::<WireCall<'_>>(),
                Gen::wire_call_fields(),
            ),
            (
                "WireFunction",
                serde_fields::<WireFunction<'_>>(),
                Gen::function_fields(),
            ),
        ];
        for (name, serde, generated) in levels {
            for field in serde {
                assert!(
                    generated.iter().any(|(g, _)| *g == field),
                    "{name}.{field} is read by serde_json but never generated: add it to \
                     the generator and to the scan"
                );
            }
        }
    }

    #[test]
    fn the_scan_after_a_prefix_reads_generated_chunks_as_serde_json_does() {
        let mut accepted = 0;
        for seed in 0..20_000u64 {
            let chunk = generated_chunk(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            accepted += usize::from(check_after_prefix(chunk.as_bytes()));
        }
        assert!(accepted > 100, "{accepted} of 20000");
        // A prefix serde_json reads otherwise is no prefix.
        for data in [
            r#"{"error":"boom","choices":[]}"#,
            r#"{"usage":1,"choices":[]}"#,
            r#"{"object":"a","object":"b","choices":[]}"#,
            r#"{"type":7,"choices":[]}"#,
            r#"{"id":{},"choices":[]}"#,
            r#"{ "choices":[]}"#,
        ] {
            assert_eq!(ChunkPrefix::default().learn(data.as_bytes()), 0, "{data}");
        }
        // A repeated field after the prefix, a null `choices`: the full parse decides.
        let mut prefix = ChunkPrefix::default();
        for data in [
            r#"{"object":"a","choices":[],"object":"b"}"#,
            r#"{"object":"a","choices":null}"#,
            r#"{"choices":[],"choices":[]}"#,
        ] {
            assert!(prefix.learn(data.as_bytes()) > 0, "{data}");
            assert!(scan_after(data.as_bytes(), &prefix).is_none(), "{data}");
        }
    }

    #[test]
    fn the_scan_reads_generated_chunks_as_serde_json_does() {
        let mut accepted = 0;
        let mut with_calls = 0;
        for seed in 0..50_000u64 {
            if let Some(calls) = generated(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)) {
                accepted += 1;
                with_calls += usize::from(calls > 0);
            }
        }
        // The generator reaches both sides: chunks the scan reads (with calls among
        // them) and chunks it leaves to serde_json.
        assert!(accepted > 5_000 && accepted < 45_000, "{accepted} of 50000");
        assert!(with_calls > 600, "{with_calls} (accepted {accepted})");
    }

    #[test]
    fn the_scan_reads_what_servers_send() {
        for chunk in [
            // OpenAI: the opening chunk of a call, a fragment, the closing chunk.
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}]}"#,
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"ci"}}]},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"a1b2"}"#,
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]}"#,
            // Text, reasoning (DeepSeek, vLLM), a spaced server (Python json.dumps).
            r#"{"choices":[{"index":0,"delta":{"content":"Hel\"lo\n"},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"reasoning_content":"hmm","content":null}}]}"#,
            r#"{"id": "x", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}, "finish_reason": null}]}"#,
            // A whole response, the legacy function_call, Mistral without an index.
            r#"{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[{"delta":{"function_call":{"name":"f","arguments":"{}"}}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"abc123","function":{"name":"f","arguments":"{}"}}]}}]}"#,
        ] {
            assert!(
                check(chunk.as_bytes()).is_some(),
                "left to serde_json: {chunk}"
            );
        }
        // Left to serde_json: the objects it alone reads, and repeated members.
        for chunk in [
            r#"{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#,
            r#"{"error":{"message":"boom"}}"#,
            r#"{"choices":[{"delta":{"content":[{"type":"text","text":"hi"}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":{"a":1}}}]}}]}"#,
            r#"{"choices":[],"choices":[]}"#,
            r#"{"choices":[{"index":0,"delta":{},"delta":{}}]}"#,
            r#"{"choices":[]} x"#,
        ] {
            assert!(scan(chunk.as_bytes()).is_none(), "{chunk}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_choices_give_the_scan_and_serde_json_the_same_chunk(
            draws in proptest::collection::vec(proptest::prelude::any::<u16>(), 0..300),
        ) {
            let mut at = 0;
            let mut next = |n: usize| {
                let d = draws.get(at).copied().unwrap_or(0);
                at += 1;
                usize::from(d) % n
            };
            let mut g = Gen { next: &mut next, out: String::new() };
            g.chunk();
            check(g.out.as_bytes());
        }

        #[test]
        fn arbitrary_bytes_the_scan_reads_are_read_alike(
            data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
            base in 0usize..3,
        ) {
            // Mutations of a real chunk: bytes spliced in at a random place.
            let real = br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#;
            let cut = (data.len() * 7 + base) % real.len();
            let mut b = real[..cut].to_vec();
            b.extend_from_slice(&data);
            b.extend_from_slice(&real[cut..]);
            check(&b);
            check(&data);
        }
    }
}

//! Live preview of tool-call arguments while they stream.
//!
//! [`ArgumentPreview`] is an incremental JSON reader fed the argument fragments of one
//! tool call as they arrive. It emits [`PreviewEvent`]s (container start and end, keys,
//! string chunks and finished scalars, each with its JSON pointer) and can materialise
//! the partial value at any time with [`ArgumentPreview::preview`], so a UI can show
//! `{"path": "src/main.rs", "content": "fn ma` while a model is still writing the file.
//!
//! Why hand-written: this is our core streaming path. Partial-JSON parsers such as
//! `jiter`'s partial mode (or "repair the prefix and re-parse" helpers) re-parse the
//! whole prefix on every fragment, which is quadratic over a long argument (a 1 MiB file
//! body in 8-byte fragments is 131 072 re-parses). This reader keeps its state between
//! fragments, so each fragment costs O(len(fragment)): it never looks at the prefix
//! again. It accepts exactly the documents `serde_json::from_str` accepts and builds
//! the same value (numbers are converted by serde_json itself), which the property tests
//! check for arbitrary fragmentations.
//!
//! Guarantees:
//! - fragments may split anything: a UTF-8 character, an escape (`\u00e9`, a surrogate
//!   pair), a number, a literal, a key;
//! - invalid input gives one [`PreviewEvent::Error`] and a failed state
//!   ([`ArgumentPreview::error`]), never a panic; later fragments are ignored;
//! - memory is bounded by the input plus a nesting cap ([`DEFAULT_MAX_DEPTH`], the same
//!   limit as serde_json), so hostile input cannot overflow the stack.
//!
//! ```
//! use llmchain::provider::preview::{ArgumentPreview, PreviewEvent};
//! use serde_json::json;
//!
//! let mut p = ArgumentPreview::new();
//! let mut events = Vec::new();
//! for fragment in [r#"{"path": "a.t"#, r#"xt", "content": "Hel"#, r#"lo\n"#] {
//!     events.extend(p.feed(fragment));
//! }
//! // The partial value, on demand: the unfinished string shows what arrived so far.
//! assert_eq!(p.preview(), Some(json!({"path": "a.txt", "content": "Hello\n"})));
//! assert!(events.contains(&PreviewEvent::Scalar { pointer: "/path".into(), value: json!("a.txt") }));
//! events.extend(p.feed("\"}"));
//! events.extend(p.finish());
//! assert!(p.is_done());
//! assert_eq!(events.last(), Some(&PreviewEvent::ObjectEnd { pointer: "".into() }));
//! ```

use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

/// The default nesting cap: the same as serde_json's recursion limit, so the reader
/// accepts exactly what `serde_json::from_str` accepts.
pub const DEFAULT_MAX_DEPTH: usize = 128;

/// One thing the reader found. Pointers are JSON pointers (RFC 6901) into the
/// arguments value; the root is `""`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum PreviewEvent {
    /// `{` of the object at `pointer`.
    ObjectStart {
        /// Where the object is.
        pointer: Arc<str>,
    },
    /// `}` of the object at `pointer`.
    ObjectEnd {
        /// Where the object is.
        pointer: Arc<str>,
    },
    /// `[` of the array at `pointer`.
    ArrayStart {
        /// Where the array is.
        pointer: Arc<str>,
    },
    /// `]` of the array at `pointer`.
    ArrayEnd {
        /// Where the array is.
        pointer: Arc<str>,
    },
    /// A complete object key; the member's value (at `pointer`) follows.
    Key {
        /// The pointer of the member, e.g. `/path`.
        pointer: Arc<str>,
        /// The decoded key.
        key: String,
    },
    /// A string value started at `pointer`.
    StringStart {
        /// Where the string is.
        pointer: Arc<str>,
    },
    /// More decoded text of the string at `pointer` (never empty). The chunks of one
    /// string concatenate to its value.
    StringChunk {
        /// Where the string is.
        pointer: Arc<str>,
        /// Decoded text (escapes resolved).
        chunk: String,
    },
    /// A finished scalar: a string (its whole value), a number, `true`, `false` or `null`.
    Scalar {
        /// Where the scalar is.
        pointer: Arc<str>,
        /// The value, as `serde_json::from_str` would give it.
        value: Value,
    },
    /// The input is not valid JSON; nothing follows.
    Error(PreviewError),
}

/// Why the arguments are not valid JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid tool arguments at byte {offset}: {kind}")]
pub struct PreviewError {
    /// Byte offset of the problem in the whole argument text.
    pub offset: usize,
    /// What is wrong.
    pub kind: PreviewErrorKind,
}

/// The kinds of [`PreviewError`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PreviewErrorKind {
    /// A byte that cannot appear here; `expected` says what could.
    Unexpected {
        /// The offending byte.
        byte: u8,
        /// What the grammar allows here.
        expected: &'static str,
    },
    /// A string holds bytes that are not UTF-8.
    InvalidUtf8,
    /// A raw control character (below U+0020) inside a string.
    ControlCharacter,
    /// A `\u` escape with an unpaired surrogate.
    LoneSurrogate,
    /// A number serde_json cannot represent (e.g. `1e400`).
    NumberOutOfRange,
    /// Containers nested deeper than the cap.
    TooDeep {
        /// The cap.
        limit: usize,
    },
    /// The text ended before the value did.
    UnexpectedEnd,
}

impl fmt::Display for PreviewErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PreviewErrorKind::Unexpected { byte, expected } => {
                if byte.is_ascii_graphic() {
                    write!(f, "unexpected '{}', expected {expected}", *byte as char)
                } else {
                    write!(f, "unexpected byte 0x{byte:02x}, expected {expected}")
                }
            }
            PreviewErrorKind::InvalidUtf8 => f.write_str("invalid UTF-8 in a string"),
            PreviewErrorKind::ControlCharacter => {
                f.write_str("control character in a string (must be escaped)")
            }
            PreviewErrorKind::LoneSurrogate => f.write_str("unpaired surrogate in a \\u escape"),
            PreviewErrorKind::NumberOutOfRange => f.write_str("number out of range"),
            PreviewErrorKind::TooDeep { limit } => {
                write!(f, "nesting deeper than {limit} levels")
            }
            PreviewErrorKind::UnexpectedEnd => f.write_str("the arguments ended too early"),
        }
    }
}

/// A node of the partial value. Containers refer to their children by arena index, so
/// the open container or string is reached in O(1) and dropping is never recursive.
#[derive(Debug, Clone)]
enum Node {
    Object(Vec<(String, usize)>),
    Array(Vec<usize>),
    Str(String),
    /// The raw text of a number, converted by serde_json when it ends.
    Number(String),
    /// A literal still being read (`tru`): not shown in previews.
    Pending,
    Scalar(Value),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Object,
    Array,
}

#[derive(Debug, Clone)]
struct Frame {
    kind: Kind,
    node: usize,
    pointer: Arc<str>,
    /// Elements so far (arrays).
    len: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Num {
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    Exp,
    ExpSign,
    ExpDigits,
}

impl Num {
    fn is_terminal(self) -> bool {
        matches!(self, Num::Zero | Num::Int | Num::Frac | Num::ExpDigits)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Esc {
    None,
    Backslash,
    Hex {
        count: u8,
        acc: u16,
        high: Option<u16>,
    },
    /// After a high surrogate: `\` must follow.
    NeedBackslash(u16),
    /// After a high surrogate and `\`: `u` must follow.
    NeedU(u16),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// A value must start here.
    Value,
    /// Just after `[`.
    ArrayFirst,
    /// Just after `{`.
    ObjectFirst,
    /// After `,` in an object.
    Key,
    Colon,
    /// After a value inside a container.
    AfterValue,
    /// Inside a string (key or value, see `in_key`).
    Str,
    Number(Num),
    Literal {
        lit: &'static [u8],
        pos: u8,
    },
    /// The top-level value is complete: only whitespace may follow.
    Done,
    Failed,
}

/// An incremental reader of one tool call's streamed arguments.
///
/// Feed fragments with [`feed`](Self::feed) (text) or [`feed_bytes`](Self::feed_bytes)
/// (bytes, which may split a UTF-8 character), call [`finish`](Self::finish) when the
/// call's arguments are complete, and read [`preview`](Self::preview) whenever a UI
/// wants to draw the partial value.
#[derive(Debug, Clone)]
pub struct ArgumentPreview {
    nodes: Vec<Node>,
    root: Option<usize>,
    frames: Vec<Frame>,
    state: State,
    max_depth: usize,
    /// Bytes consumed before the current fragment.
    offset: usize,
    error: Option<PreviewError>,
    finished: bool,

    // The member whose key was read and whose value has not started.
    pending_key: Option<(String, Arc<str>)>,
    // The scalar or string being read.
    cur_node: usize,
    cur_pointer: Arc<str>,

    // String machinery.
    in_key: bool,
    key_buf: String,
    chunk: String,
    esc: Esc,
    utf8: [u8; 4],
    utf8_len: u8,
}

impl Default for ArgumentPreview {
    fn default() -> Self {
        Self::new()
    }
}

fn utf8_width(lead: u8) -> u8 {
    match lead {
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        _ => 4,
    }
}

fn hex(b: u8) -> Option<u16> {
    (b as char).to_digit(16).map(|d| d as u16)
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Appends `token` to `pointer` with RFC 6901 escaping (`~` → `~0`, `/` → `~1`).
fn child_pointer(pointer: &str, token: &str) -> Arc<str> {
    let mut p = String::with_capacity(pointer.len() + token.len() + 1);
    p.push_str(pointer);
    p.push('/');
    for c in token.chars() {
        match c {
            '~' => p.push_str("~0"),
            '/' => p.push_str("~1"),
            c => p.push(c),
        }
    }
    p.into()
}

/// The value of an unfinished number for a preview: `12.` shows as 12, `-` as nothing.
fn partial_number(raw: &str) -> Option<Value> {
    let t = raw.trim_end_matches(['.', 'e', 'E', '+', '-']);
    if t.is_empty() {
        return None;
    }
    serde_json::from_str(t).ok()
}

type Step = Result<(), PreviewErrorKind>;

impl ArgumentPreview {
    /// A reader with the default nesting cap.
    pub fn new() -> Self {
        ArgumentPreview {
            nodes: Vec::new(),
            root: None,
            frames: Vec::new(),
            state: State::Value,
            max_depth: DEFAULT_MAX_DEPTH,
            offset: 0,
            error: None,
            finished: false,
            pending_key: None,
            cur_node: 0,
            cur_pointer: Arc::from(""),
            in_key: false,
            key_buf: String::new(),
            chunk: String::new(),
            esc: Esc::None,
            utf8: [0; 4],
            utf8_len: 0,
        }
    }

    /// Sets the nesting cap (containers open at once). Deeper input is an error.
    #[must_use]
    pub fn with_max_depth(mut self, max_depth: usize) -> Self {
        self.max_depth = max_depth;
        self
    }

    /// Feeds a text fragment and returns the events it completes.
    pub fn feed(&mut self, fragment: &str) -> Vec<PreviewEvent> {
        let mut out = Vec::new();
        self.feed_bytes(fragment.as_bytes(), &mut out);
        out
    }

    /// Feeds a fragment of bytes (it may end inside a UTF-8 character or an escape),
    /// appending the events it completes to `out`. Costs O(len(fragment)).
    pub fn feed_bytes(&mut self, fragment: &[u8], out: &mut Vec<PreviewEvent>) {
        if self.state == State::Failed || self.finished {
            return;
        }
        let mut i = 0;
        while i < fragment.len() {
            if let Err(kind) = self.step(fragment, &mut i, out) {
                self.fail(self.offset + i, kind, out);
                return;
            }
        }
        self.flush_chunk(out);
        self.offset += fragment.len();
    }

    /// Ends the input: finishes a trailing top-level number, and reports
    /// [`PreviewErrorKind::UnexpectedEnd`] if the value is incomplete.
    pub fn finish(&mut self) -> Vec<PreviewEvent> {
        let mut out = Vec::new();
        if self.state == State::Failed || self.finished {
            return out;
        }
        self.finished = true;
        if let State::Number(n) = self.state
            && n.is_terminal()
            && self.frames.is_empty()
            && let Err(kind) = self.end_number(&mut out)
        {
            self.fail(self.offset, kind, &mut out);
            return out;
        }
        if self.state != State::Done {
            self.fail(self.offset, PreviewErrorKind::UnexpectedEnd, &mut out);
        }
        out
    }

    /// True once a complete value was read and [`finish`](Self::finish) found no problem.
    pub fn is_done(&self) -> bool {
        self.finished && self.state == State::Done
    }

    /// The error that stopped the reader, if any.
    pub fn error(&self) -> Option<&PreviewError> {
        self.error.as_ref()
    }

    /// Bytes consumed so far.
    pub fn bytes_read(&self) -> usize {
        self.offset
    }

    /// Materialises the value read so far: open containers are shown closed, an open
    /// string shows its text so far, an unfinished number its digits so far; a key
    /// without a value and an unfinished literal are left out. `None` before the value
    /// starts. After an error, the value up to the error.
    ///
    /// Costs O(size of the value) — call it when drawing, not per fragment.
    pub fn preview(&self) -> Option<Value> {
        self.root.and_then(|r| self.build(r, 0))
    }

    fn build(&self, idx: usize, depth: usize) -> Option<Value> {
        // Depth is bounded by `max_depth` by construction; the guard keeps it obvious.
        if depth > self.max_depth {
            return None;
        }
        match &self.nodes[idx] {
            Node::Object(members) => {
                let mut m = Map::new();
                for (k, c) in members {
                    if let Some(v) = self.build(*c, depth + 1) {
                        m.insert(k.clone(), v);
                    }
                }
                Some(Value::Object(m))
            }
            Node::Array(items) => Some(Value::Array(
                items
                    .iter()
                    .filter_map(|c| self.build(*c, depth + 1))
                    .collect(),
            )),
            Node::Str(s) => Some(Value::String(s.clone())),
            Node::Number(raw) => partial_number(raw),
            Node::Pending => None,
            Node::Scalar(v) => Some(v.clone()),
        }
    }

    fn fail(&mut self, offset: usize, kind: PreviewErrorKind, out: &mut Vec<PreviewEvent>) {
        self.flush_chunk(out);
        let e = PreviewError { offset, kind };
        self.error = Some(e.clone());
        self.state = State::Failed;
        out.push(PreviewEvent::Error(e));
    }

    /// The pointer of the value that starts now.
    fn next_pointer(&mut self) -> Arc<str> {
        match self.frames.last() {
            None => Arc::from(""),
            Some(f) if f.kind == Kind::Array => child_pointer(&f.pointer, &f.len.to_string()),
            Some(_) => self
                .pending_key
                .as_ref()
                .map_or_else(|| Arc::from(""), |(_, p)| p.clone()),
        }
    }

    /// Adds a node for the value that starts now and attaches it to its parent.
    fn start_node(&mut self, node: Node) -> (usize, Arc<str>) {
        let pointer = self.next_pointer();
        let idx = self.nodes.len();
        self.nodes.push(node);
        match self.frames.last_mut() {
            None => self.root = Some(idx),
            Some(f) => {
                let parent = f.node;
                match f.kind {
                    Kind::Array => {
                        f.len += 1;
                        if let Node::Array(items) = &mut self.nodes[parent] {
                            items.push(idx);
                        }
                    }
                    Kind::Object => {
                        let key = self.pending_key.take().map(|(k, _)| k).unwrap_or_default();
                        if let Node::Object(members) = &mut self.nodes[parent] {
                            members.push((key, idx));
                        }
                    }
                }
            }
        }
        (idx, pointer)
    }

    fn value_done(&mut self) {
        self.state = if self.frames.is_empty() {
            State::Done
        } else {
            State::AfterValue
        };
    }

    fn open(&mut self, kind: Kind, out: &mut Vec<PreviewEvent>) -> Step {
        if self.frames.len() + 1 >= self.max_depth {
            return Err(PreviewErrorKind::TooDeep {
                limit: self.max_depth,
            });
        }
        let node = match kind {
            Kind::Object => Node::Object(Vec::new()),
            Kind::Array => Node::Array(Vec::new()),
        };
        let (idx, pointer) = self.start_node(node);
        out.push(match kind {
            Kind::Object => PreviewEvent::ObjectStart {
                pointer: pointer.clone(),
            },
            Kind::Array => PreviewEvent::ArrayStart {
                pointer: pointer.clone(),
            },
        });
        self.frames.push(Frame {
            kind,
            node: idx,
            pointer,
            len: 0,
        });
        self.state = match kind {
            Kind::Object => State::ObjectFirst,
            Kind::Array => State::ArrayFirst,
        };
        Ok(())
    }

    fn close(&mut self, kind: Kind, byte: u8, out: &mut Vec<PreviewEvent>) -> Step {
        match self.frames.last() {
            Some(f) if f.kind == kind => {}
            Some(f) => {
                return Err(PreviewErrorKind::Unexpected {
                    byte,
                    expected: if f.kind == Kind::Object {
                        "',' or '}'"
                    } else {
                        "',' or ']'"
                    },
                });
            }
            None => {
                return Err(PreviewErrorKind::Unexpected {
                    byte,
                    expected: "the end of the arguments",
                });
            }
        }
        if let Some(f) = self.frames.pop() {
            out.push(match kind {
                Kind::Object => PreviewEvent::ObjectEnd { pointer: f.pointer },
                Kind::Array => PreviewEvent::ArrayEnd { pointer: f.pointer },
            });
        }
        self.value_done();
        Ok(())
    }

    fn start_value(&mut self, b: u8, out: &mut Vec<PreviewEvent>) -> Step {
        match b {
            b'{' => self.open(Kind::Object, out),
            b'[' => self.open(Kind::Array, out),
            b'"' => {
                let (idx, pointer) = self.start_node(Node::Str(String::new()));
                out.push(PreviewEvent::StringStart {
                    pointer: pointer.clone(),
                });
                self.cur_node = idx;
                self.cur_pointer = pointer;
                self.in_key = false;
                self.state = State::Str;
                Ok(())
            }
            b'-' | b'0'..=b'9' => {
                let (idx, pointer) = self.start_node(Node::Number((b as char).to_string()));
                self.cur_node = idx;
                self.cur_pointer = pointer;
                self.state = State::Number(match b {
                    b'-' => Num::Minus,
                    b'0' => Num::Zero,
                    _ => Num::Int,
                });
                Ok(())
            }
            b't' | b'f' | b'n' => {
                let (idx, pointer) = self.start_node(Node::Pending);
                self.cur_node = idx;
                self.cur_pointer = pointer;
                let lit: &'static [u8] = match b {
                    b't' => b"true",
                    b'f' => b"false",
                    _ => b"null",
                };
                self.state = State::Literal { lit, pos: 1 };
                Ok(())
            }
            _ => Err(PreviewErrorKind::Unexpected {
                byte: b,
                expected: "a JSON value",
            }),
        }
    }

    fn end_scalar(&mut self, value: Value, out: &mut Vec<PreviewEvent>) {
        out.push(PreviewEvent::Scalar {
            pointer: self.cur_pointer.clone(),
            value: value.clone(),
        });
        self.nodes[self.cur_node] = Node::Scalar(value);
        self.value_done();
    }

    fn end_number(&mut self, out: &mut Vec<PreviewEvent>) -> Step {
        let value = match &self.nodes[self.cur_node] {
            // serde_json converts, so numbers are exactly what `from_str` gives.
            Node::Number(raw) => serde_json::from_str::<Value>(raw)
                .map_err(|_| PreviewErrorKind::NumberOutOfRange)?,
            _ => Value::Null,
        };
        self.end_scalar(value, out);
        Ok(())
    }

    fn push_number_byte(&mut self, b: u8) {
        if let Node::Number(raw) = &mut self.nodes[self.cur_node] {
            raw.push(b as char);
        }
    }

    /// Moves decoded string text gathered in this fragment into the tree and an event.
    fn flush_chunk(&mut self, out: &mut Vec<PreviewEvent>) {
        if self.chunk.is_empty() {
            return;
        }
        if self.in_key {
            self.key_buf.push_str(&self.chunk);
            self.chunk.clear();
            return;
        }
        let chunk = std::mem::take(&mut self.chunk);
        if let Node::Str(s) = &mut self.nodes[self.cur_node] {
            s.push_str(&chunk);
        }
        out.push(PreviewEvent::StringChunk {
            pointer: self.cur_pointer.clone(),
            chunk,
        });
    }

    fn end_string(&mut self, out: &mut Vec<PreviewEvent>) {
        self.flush_chunk(out);
        if self.in_key {
            let key = std::mem::take(&mut self.key_buf);
            let parent = self.frames.last().map_or("", |f| &*f.pointer);
            let pointer = child_pointer(parent, &key);
            out.push(PreviewEvent::Key {
                pointer: pointer.clone(),
                key: key.clone(),
            });
            self.pending_key = Some((key, pointer));
            self.in_key = false;
            self.state = State::Colon;
        } else {
            let value = match &self.nodes[self.cur_node] {
                Node::Str(s) => Value::String(s.clone()),
                _ => Value::Null,
            };
            self.end_scalar(value, out);
        }
    }

    fn push_char(&mut self, c: u32) -> Step {
        let c = char::from_u32(c).ok_or(PreviewErrorKind::LoneSurrogate)?;
        self.chunk.push(c);
        Ok(())
    }

    /// One byte of an escape sequence.
    fn escape_byte(&mut self, b: u8) -> Step {
        match self.esc {
            Esc::None => Ok(()),
            Esc::Backslash => {
                let c = match b {
                    b'"' => '"',
                    b'\\' => '\\',
                    b'/' => '/',
                    b'b' => '\u{8}',
                    b'f' => '\u{c}',
                    b'n' => '\n',
                    b'r' => '\r',
                    b't' => '\t',
                    b'u' => {
                        self.esc = Esc::Hex {
                            count: 0,
                            acc: 0,
                            high: None,
                        };
                        return Ok(());
                    }
                    _ => {
                        return Err(PreviewErrorKind::Unexpected {
                            byte: b,
                            expected: "an escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u)",
                        });
                    }
                };
                self.chunk.push(c);
                self.esc = Esc::None;
                Ok(())
            }
            Esc::Hex { count, acc, high } => {
                let d = hex(b).ok_or(PreviewErrorKind::Unexpected {
                    byte: b,
                    expected: "a hex digit",
                })?;
                let acc = acc * 16 + d;
                if count < 3 {
                    self.esc = Esc::Hex {
                        count: count + 1,
                        acc,
                        high,
                    };
                    return Ok(());
                }
                self.esc = Esc::None;
                match (high, acc) {
                    (None, 0xD800..=0xDBFF) => {
                        self.esc = Esc::NeedBackslash(acc);
                        Ok(())
                    }
                    (None, 0xDC00..=0xDFFF) => Err(PreviewErrorKind::LoneSurrogate),
                    (None, c) => self.push_char(u32::from(c)),
                    (Some(h), 0xDC00..=0xDFFF) => self.push_char(
                        ((u32::from(h) - 0xD800) << 10 | (u32::from(acc) - 0xDC00)) + 0x1_0000,
                    ),
                    (Some(_), _) => Err(PreviewErrorKind::LoneSurrogate),
                }
            }
            Esc::NeedBackslash(h) if b == b'\\' => {
                self.esc = Esc::NeedU(h);
                Ok(())
            }
            Esc::NeedU(h) if b == b'u' => {
                self.esc = Esc::Hex {
                    count: 0,
                    acc: 0,
                    high: Some(h),
                };
                Ok(())
            }
            Esc::NeedBackslash(_) | Esc::NeedU(_) => Err(PreviewErrorKind::LoneSurrogate),
        }
    }

    /// Consumes string bytes from `input[*i..]` until the string ends or the input does.
    fn string_bytes(&mut self, input: &[u8], i: &mut usize, out: &mut Vec<PreviewEvent>) -> Step {
        while *i < input.len() {
            if self.esc != Esc::None {
                self.escape_byte(input[*i])?;
                *i += 1;
                continue;
            }
            if self.utf8_len > 0 {
                // Complete a character split by the previous fragment.
                let width = utf8_width(self.utf8[0]);
                while self.utf8_len < width && *i < input.len() {
                    self.utf8[self.utf8_len as usize] = input[*i];
                    self.utf8_len += 1;
                    *i += 1;
                }
                if self.utf8_len < width {
                    return Ok(());
                }
                let s = std::str::from_utf8(&self.utf8[..width as usize])
                    .map_err(|_| PreviewErrorKind::InvalidUtf8)?;
                self.chunk.push_str(s);
                self.utf8_len = 0;
                continue;
            }
            let rest = &input[*i..];
            let run = rest
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                .unwrap_or(rest.len());
            match std::str::from_utf8(&rest[..run]) {
                Ok(s) => self.chunk.push_str(s),
                Err(e) => {
                    let valid = e.valid_up_to();
                    // Only a character cut by the end of the fragment may be incomplete.
                    if e.error_len().is_some() || run < rest.len() {
                        *i += valid;
                        return Err(PreviewErrorKind::InvalidUtf8);
                    }
                    if let Ok(s) = std::str::from_utf8(&rest[..valid]) {
                        self.chunk.push_str(s);
                    }
                    let tail = &rest[valid..run];
                    self.utf8[..tail.len()].copy_from_slice(tail);
                    self.utf8_len = tail.len() as u8;
                }
            }
            *i += run;
            let Some(&b) = input.get(*i) else {
                return Ok(());
            };
            match b {
                b'"' => {
                    *i += 1;
                    self.end_string(out);
                    return Ok(());
                }
                b'\\' => {
                    *i += 1;
                    self.esc = Esc::Backslash;
                }
                _ => return Err(PreviewErrorKind::ControlCharacter),
            }
        }
        Ok(())
    }

    /// Advances by at least one byte (or finishes a value without consuming).
    fn step(&mut self, input: &[u8], i: &mut usize, out: &mut Vec<PreviewEvent>) -> Step {
        if self.state == State::Str {
            return self.string_bytes(input, i, out);
        }
        let b = input[*i];
        let single = !matches!(self.state, State::Number(_) | State::Literal { .. });
        let r = self.step_byte(b, i, out);
        if single && r.is_ok() {
            *i += 1;
        }
        r
    }

    /// One byte in a state other than `Str`. Number and literal states consume the byte
    /// themselves (a number may end without consuming it); the others are consumed by
    /// [`step`](Self::step) when accepted, so an error offset points at the byte.
    fn step_byte(&mut self, b: u8, i: &mut usize, out: &mut Vec<PreviewEvent>) -> Step {
        match self.state {
            State::Number(n) => {
                let next = match (n, b) {
                    (Num::Minus, b'0') => Some(Num::Zero),
                    (Num::Minus, b'1'..=b'9') => Some(Num::Int),
                    (Num::Int, b'0'..=b'9') => Some(Num::Int),
                    (Num::Zero | Num::Int, b'.') => Some(Num::Dot),
                    (Num::Dot | Num::Frac, b'0'..=b'9') => Some(Num::Frac),
                    (Num::Zero | Num::Int | Num::Frac, b'e' | b'E') => Some(Num::Exp),
                    (Num::Exp, b'+' | b'-') => Some(Num::ExpSign),
                    (Num::Exp | Num::ExpSign | Num::ExpDigits, b'0'..=b'9') => Some(Num::ExpDigits),
                    _ => None,
                };
                match next {
                    Some(n) => {
                        self.push_number_byte(b);
                        self.state = State::Number(n);
                        *i += 1;
                        Ok(())
                    }
                    // The number ended: convert it, then read this byte in the new state.
                    None if n.is_terminal() => self.end_number(out),
                    None => Err(PreviewErrorKind::Unexpected {
                        byte: b,
                        expected: "a digit",
                    }),
                }
            }
            State::Literal { lit, pos } => {
                if lit.get(pos as usize) != Some(&b) {
                    return Err(PreviewErrorKind::Unexpected {
                        byte: b,
                        expected: match lit {
                            b"true" => "'true'",
                            b"false" => "'false'",
                            _ => "'null'",
                        },
                    });
                }
                *i += 1;
                let pos = pos + 1;
                if pos as usize == lit.len() {
                    let value = match lit {
                        b"true" => Value::Bool(true),
                        b"false" => Value::Bool(false),
                        _ => Value::Null,
                    };
                    self.end_scalar(value, out);
                } else {
                    self.state = State::Literal { lit, pos };
                }
                Ok(())
            }
            _ if is_ws(b) => Ok(()),
            State::Value => self.start_value(b, out),
            State::ArrayFirst => {
                if b == b']' {
                    self.close(Kind::Array, b, out)
                } else {
                    self.start_value(b, out)
                }
            }
            State::ObjectFirst | State::Key => match b {
                b'}' if self.state == State::ObjectFirst => self.close(Kind::Object, b, out),
                b'"' => {
                    self.in_key = true;
                    self.key_buf.clear();
                    self.state = State::Str;
                    Ok(())
                }
                _ => Err(PreviewErrorKind::Unexpected {
                    byte: b,
                    expected: if self.state == State::ObjectFirst {
                        "a key or '}'"
                    } else {
                        "a key"
                    },
                }),
            },
            State::Colon => {
                if b == b':' {
                    self.state = State::Value;
                    Ok(())
                } else {
                    Err(PreviewErrorKind::Unexpected {
                        byte: b,
                        expected: "':'",
                    })
                }
            }
            State::AfterValue => match b {
                b',' => {
                    self.state = match self.frames.last().map(|f| f.kind) {
                        Some(Kind::Object) => State::Key,
                        _ => State::Value,
                    };
                    Ok(())
                }
                b'}' => self.close(Kind::Object, b, out),
                b']' => self.close(Kind::Array, b, out),
                _ => Err(PreviewErrorKind::Unexpected {
                    byte: b,
                    expected: "',' or the end of the container",
                }),
            },
            State::Done => Err(PreviewErrorKind::Unexpected {
                byte: b,
                expected: "the end of the arguments",
            }),
            // Str is handled by `string_bytes`; Failed never steps.
            State::Str | State::Failed => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(fragments: &[&[u8]]) -> (Vec<PreviewEvent>, ArgumentPreview) {
        let mut p = ArgumentPreview::new();
        let mut out = Vec::new();
        for f in fragments {
            p.feed_bytes(f, &mut out);
        }
        out.extend(p.finish());
        (out, p)
    }

    #[test]
    fn events_of_a_small_document() {
        let (ev, p) = run(&[br#"{"a": [1, tr"#, br#"ue], "b\/": "x\u00"#, br#"e9"}"#]);
        assert!(p.is_done(), "{:?}", p.error());
        let p = |s: &str| Arc::<str>::from(s);
        assert_eq!(
            ev,
            vec![
                PreviewEvent::ObjectStart { pointer: p("") },
                PreviewEvent::Key {
                    pointer: p("/a"),
                    key: "a".into()
                },
                PreviewEvent::ArrayStart { pointer: p("/a") },
                PreviewEvent::Scalar {
                    pointer: p("/a/0"),
                    value: json!(1)
                },
                PreviewEvent::Scalar {
                    pointer: p("/a/1"),
                    value: json!(true)
                },
                PreviewEvent::ArrayEnd { pointer: p("/a") },
                PreviewEvent::Key {
                    pointer: p("/b~1"),
                    key: "b/".into()
                },
                PreviewEvent::StringStart { pointer: p("/b~1") },
                PreviewEvent::StringChunk {
                    pointer: p("/b~1"),
                    chunk: "x".into()
                },
                PreviewEvent::StringChunk {
                    pointer: p("/b~1"),
                    chunk: "é".into()
                },
                PreviewEvent::Scalar {
                    pointer: p("/b~1"),
                    value: json!("xé")
                },
                PreviewEvent::ObjectEnd { pointer: p("") },
            ]
        );
    }

    #[test]
    fn preview_of_partial_values() {
        let mut p = ArgumentPreview::new();
        assert_eq!(p.preview(), None);
        p.feed(r#"{"n": -12."#);
        assert_eq!(p.preview(), Some(json!({"n": -12})));
        p.feed(r#"5, "l": [nu"#);
        assert_eq!(p.preview(), Some(json!({"n": -12.5, "l": []})));
        p.feed(r#"ll, {"k""#);
        assert_eq!(p.preview(), Some(json!({"n": -12.5, "l": [null, {}]})));
    }

    #[test]
    fn split_utf8_and_surrogates() {
        let text = "{\"s\": \"h\u{e9}llo \u{1F600} \\ud83d\\ude00 \\\"q\\\"\"}";
        let bytes = text.as_bytes();
        for cut in 0..bytes.len() {
            for cut2 in cut..bytes.len() {
                let (ev, p) = run(&[&bytes[..cut], &bytes[cut..cut2], &bytes[cut2..]]);
                assert!(p.is_done(), "cut {cut} {cut2}: {:?}", p.error());
                assert_eq!(
                    p.preview().unwrap(),
                    serde_json::from_str::<Value>(text).unwrap()
                );
                let chunks: String = ev
                    .iter()
                    .filter_map(|e| match e {
                        PreviewEvent::StringChunk { chunk, .. } => Some(chunk.as_str()),
                        _ => None,
                    })
                    .collect();
                assert_eq!(chunks, "h\u{e9}llo \u{1F600} \u{1F600} \"q\"");
            }
        }
    }

    #[test]
    fn errors_are_events() {
        for bad in [
            &b"{\"a\" 1}"[..],
            b"[1,]",
            b"{\"a\":1,}",
            b"01",
            b"1.",
            b"-",
            b"tru",
            b"nulL",
            b"\"\\x\"",
            b"\"\\ud800\"",
            b"\"\\udc00\"",
            b"\"\\ud800\\u0041\"",
            b"\"a\nb\"",
            b"\"\xff\"",
            b"\"\xe2\x82\"",
            b"{} x",
            b"]",
            b"[}",
            b"1e400",
            b"",
            b"   ",
            b"{\"a\":\"unterminated",
        ] {
            assert!(
                serde_json::from_slice::<Value>(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
            let (ev, p) = run(&[bad]);
            assert!(p.error().is_some(), "{}", String::from_utf8_lossy(bad));
            assert!(matches!(ev.last(), Some(PreviewEvent::Error(_))));
            assert_eq!(
                ev.iter()
                    .filter(|e| matches!(e, PreviewEvent::Error(_)))
                    .count(),
                1
            );
        }
        let (_, p) = run(&[b"{\"a\": x}"]);
        assert_eq!(
            p.error().unwrap().to_string(),
            "invalid tool arguments at byte 6: unexpected 'x', expected a JSON value"
        );
    }

    #[test]
    fn depth_cap() {
        let deep = "[".repeat(200);
        let (_, p) = run(&[deep.as_bytes()]);
        assert_eq!(
            p.error().map(|e| &e.kind),
            Some(&PreviewErrorKind::TooDeep { limit: 128 })
        );
        // Agrees with serde_json at the boundary.
        for n in [126, 127, 128] {
            let text = format!("{}{}", "[".repeat(n), "]".repeat(n));
            let (_, p) = run(&[text.as_bytes()]);
            assert_eq!(
                p.is_done(),
                serde_json::from_str::<Value>(&text).is_ok(),
                "{n}"
            );
        }
    }

    #[test]
    fn top_level_scalars_and_trailing_whitespace() {
        for text in ["12", " -0.5e+3 ", "\"s\"", "true", "null\n", "[]", "{}"] {
            let (_, p) = run(&[text.as_bytes()]);
            assert!(p.is_done(), "{text}: {:?}", p.error());
            assert_eq!(
                p.preview().unwrap(),
                serde_json::from_str::<Value>(text).unwrap()
            );
        }
    }

    /// Rebuilds a value from events alone: the same rules a UI would follow.
    fn rebuild(events: &[PreviewEvent]) -> Option<Value> {
        let mut stack: Vec<(Value, Option<String>)> = Vec::new();
        let mut key: Option<String> = None;
        let mut root = None;
        let mut strings: std::collections::HashMap<Arc<str>, String> = Default::default();
        fn put(
            stack: &mut [(Value, Option<String>)],
            key: &mut Option<String>,
            root: &mut Option<Value>,
            v: Value,
        ) {
            match stack.last_mut() {
                None => *root = Some(v),
                Some((Value::Array(a), _)) => a.push(v),
                Some((Value::Object(m), _)) => {
                    m.insert(key.take().unwrap_or_default(), v);
                }
                Some(_) => unreachable!(),
            }
        }
        for e in events {
            match e {
                PreviewEvent::ObjectStart { .. } => stack.push((json!({}), key.take())),
                PreviewEvent::ArrayStart { .. } => stack.push((json!([]), key.take())),
                PreviewEvent::ObjectEnd { .. } | PreviewEvent::ArrayEnd { .. } => {
                    let (v, k) = stack.pop().unwrap();
                    key = k;
                    put(&mut stack, &mut key, &mut root, v);
                }
                PreviewEvent::Key { key: k, .. } => key = Some(k.clone()),
                PreviewEvent::StringStart { pointer } => {
                    strings.insert(pointer.clone(), String::new());
                }
                PreviewEvent::StringChunk { pointer, chunk } => {
                    strings.get_mut(pointer).unwrap().push_str(chunk);
                }
                PreviewEvent::Scalar { pointer, value } => {
                    if let Some(s) = strings.remove(pointer) {
                        // The chunks of a string concatenate to its value.
                        assert_eq!(Some(s.as_str()), value.as_str());
                    }
                    put(&mut stack, &mut key, &mut root, value.clone());
                }
                PreviewEvent::Error(_) => return None,
            }
        }
        root
    }

    fn any_json() -> impl Strategy<Value = Value> {
        let text = prop_oneof![
            any::<String>(),
            "[a-z\"\\\\/\n\t\u{0}\u{1f} é€😀\u{7f}]{0,10}",
        ];
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            text.clone().prop_map(Value::String),
        ];
        leaf.prop_recursive(5, 48, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((text.clone(), inner), 0..6)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    /// Cuts bytes at arbitrary positions (UTF-8 characters and escapes may be split).
    fn cut<'a>(bytes: &'a [u8], sizes: &[usize]) -> Vec<&'a [u8]> {
        let mut out = Vec::new();
        let mut at = 0;
        let mut k = 0;
        while at < bytes.len() {
            let n = sizes[k % sizes.len()].max(1);
            k += 1;
            let end = (at + n).min(bytes.len());
            out.push(&bytes[at..end]);
            at = end;
        }
        out
    }

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// The events of any fragmentation rebuild exactly what serde_json parses from the
        /// whole text, and so does `preview()` at the end; pointers address the values.
        #[test]
        fn any_fragmentation_rebuilds_the_value(
            v in any_json(),
            pretty in any::<bool>(),
            sizes in prop::collection::vec(1usize..12, 1..6),
        ) {
            let text = if pretty { serde_json::to_string_pretty(&v).unwrap() } else { v.to_string() };
            let expected: Value = serde_json::from_str(&text).unwrap();
            let (events, p) = run(&cut(text.as_bytes(), &sizes));
            prop_assert!(p.is_done(), "{:?}", p.error());
            prop_assert_eq!(rebuild(&events), Some(expected.clone()));
            prop_assert_eq!(p.preview(), Some(expected.clone()));
            for e in &events {
                if let PreviewEvent::Scalar { pointer, value } = e {
                    // Keys are unique in generated values, so pointers are unambiguous.
                    prop_assert_eq!(expected.pointer(pointer), Some(value));
                }
            }
        }

        /// Any text at all: the reader accepts exactly what serde_json accepts, agrees on
        /// the value, never panics, and reports at most one error, last.
        #[test]
        fn agrees_with_serde_json_on_any_text(
            text in prop_oneof![
                any::<String>(),
                "[ \t\n{}\\[\\],:\"a-e0-9.+\\-\\\\u]{0,40}",
                any_json().prop_map(|v| v.to_string()),
            ],
            damage in any::<Option<(prop::sample::Index, u8)>>(),
            sizes in prop::collection::vec(1usize..9, 1..5),
        ) {
            let mut bytes = text.into_bytes();
            if let Some((i, b)) = damage && !bytes.is_empty() {
                let i = i.index(bytes.len());
                bytes[i] = b;
            }
            let (events, p) = run(&cut(&bytes, &sizes));
            let errors = events.iter().filter(|e| matches!(e, PreviewEvent::Error(_))).count();
            prop_assert!(errors <= 1);
            if errors == 1 {
                prop_assert!(matches!(events.last(), Some(PreviewEvent::Error(_))));
            }
            match serde_json::from_slice::<Value>(&bytes) {
                Ok(v) => {
                    prop_assert!(p.is_done(), "{:?} for {:?}", p.error(), String::from_utf8_lossy(&bytes));
                    prop_assert_eq!(rebuild(&events), Some(v.clone()));
                    prop_assert_eq!(p.preview(), Some(v));
                }
                Err(_) => prop_assert!(p.error().is_some(), "accepted {:?}", String::from_utf8_lossy(&bytes)),
            }
        }

        /// The preview after every fragment never panics, and only grows towards the
        /// final value for strings (a prefix of the final text).
        #[test]
        fn previews_along_the_way(v in any_json(), sizes in prop::collection::vec(1usize..6, 1..4)) {
            let text = v.to_string();
            let mut p = ArgumentPreview::new();
            let mut out = Vec::new();
            for f in cut(text.as_bytes(), &sizes) {
                p.feed_bytes(f, &mut out);
                let _ = p.preview();
            }
            out.extend(p.finish());
            prop_assert_eq!(p.preview(), Some(v));
        }
    }
}

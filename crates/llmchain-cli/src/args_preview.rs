//! A long tool call's arguments shown as they stream: the library's incremental reader
//! ([`ArgumentPreview`]) is fed each fragment, and the spinner says what the arguments
//! hold so far (`write_file: path="notes.md", content="…the last words" (1.2 KB)`),
//! redrawn at most every [`EVERY`].

use std::collections::HashMap;
use std::time::{Duration, Instant};

use llmchain::provider::StreamEvent;
use llmchain::provider::preview::{ArgumentPreview, PreviewEvent};
use serde_json::Value;

/// How often the line is redrawn.
const EVERY: Duration = Duration::from_millis(100);

/// Arguments shorter than this are not previewed (they are shown whole a moment later).
const LONG: usize = 200;

/// The calls being written.
#[derive(Default)]
pub(crate) struct Previews {
    calls: HashMap<u32, Call>,
}

struct Call {
    name: String,
    reader: ArgumentPreview,
    drawn: Option<Instant>,
    /// The reader's events, not needed (the partial value is read when drawn): one
    /// buffer for the whole call rather than one a fragment.
    scratch: Vec<PreviewEvent>,
}

impl Previews {
    /// Takes a stream event; `Some(line)` when the spinner should show it, `None` for an
    /// event that is not a call's (and for a call too short or too recent to redraw).
    pub(crate) fn on_event(&mut self, ev: &StreamEvent<'_>) -> Option<String> {
        match ev {
            StreamEvent::ToolCallStarted { index, name, .. } => {
                self.calls.insert(
                    *index,
                    Call {
                        name: name.to_string(),
                        reader: ArgumentPreview::new(),
                        drawn: None,
                        scratch: Vec::new(),
                    },
                );
                Some(format!("{name}…"))
            }
            StreamEvent::ToolCallArguments { index, fragment } => {
                let call = self.calls.get_mut(index)?;
                call.reader
                    .feed_bytes(fragment.as_bytes(), &mut call.scratch);
                call.scratch.clear();
                let n = call.reader.bytes_read();
                if n < LONG || call.drawn.is_some_and(|t| t.elapsed() < EVERY) {
                    // The spinner stays as it is.
                    return None;
                }
                call.drawn = Some(Instant::now());
                Some(line(&call.name, call.reader.preview().as_ref(), n))
            }
            StreamEvent::ToolCallFinished { index } => {
                let call = self.calls.remove(index)?;
                Some(format!(
                    "{}: arguments complete ({})",
                    call.name,
                    size(call.reader.bytes_read())
                ))
            }
            _ => None,
        }
    }
}

/// `name: key=value, ... (size)`.
fn line(name: &str, value: Option<&Value>, bytes: usize) -> String {
    let body = match value {
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| format!("{k}={}", short(v)))
            .collect::<Vec<_>>()
            .join(", "),
        Some(v) => short(v),
        None => "…".to_owned(),
    };
    format!("{name}: {body} ({})", size(bytes))
}

/// A value in a few characters: a long string by its end (where it is being written).
fn short(v: &Value) -> String {
    match v {
        Value::String(s) => {
            let n = s.chars().count();
            if n <= 40 {
                format!("{s:?}")
            } else {
                let tail: String = s.chars().skip(n - 30).collect();
                format!("\"…{}\"", tail.escape_debug())
            }
        }
        Value::Array(a) => format!("[{} items]", a.len()),
        Value::Object(o) => format!("{{{} keys}}", o.len()),
        other => other.to_string(),
    }
}

fn size(bytes: usize) -> String {
    if bytes < 1024 {
        format!("{bytes} B")
    } else if bytes < 1 << 20 {
        format!("{:.1} KB", bytes as f64 / 1024.0)
    } else {
        format!("{:.1} MB", bytes as f64 / (1 << 20) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    #[test]
    fn a_long_call_is_shown_by_its_keys_and_the_end_of_its_long_string() {
        let mut p = Previews::default();
        p.on_event(&StreamEvent::ToolCallStarted {
            index: 0,
            call_id: None,
            name: Cow::Borrowed("write_file"),
        });
        let text = "x".repeat(300);
        let args = format!(r#"{{"path": "notes.md", "content": "{text}the end"#);
        let shown = p
            .on_event(&StreamEvent::ToolCallArguments {
                index: 0,
                fragment: Cow::Owned(args),
            })
            .unwrap();
        assert!(
            shown.starts_with(r#"write_file: path="notes.md", content="…"#)
                && shown.contains("the end")
                && shown.ends_with("(340 B)"),
            "{shown}"
        );
        // Too soon to redraw.
        assert!(
            p.on_event(&StreamEvent::ToolCallArguments {
                index: 0,
                fragment: Cow::Borrowed("!")
            })
            .is_none()
        );
        let done = p
            .on_event(&StreamEvent::ToolCallFinished { index: 0 })
            .unwrap();
        assert_eq!(done, "write_file: arguments complete (341 B)");
        assert!(
            p.on_event(&StreamEvent::TextDelta {
                index: 0,
                text: Cow::Borrowed("hi")
            })
            .is_none()
        );
    }
}

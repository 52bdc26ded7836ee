//! Text from a model, a tool, a provider or an MCP server, made safe to show in a
//! terminal: control characters (escape sequences that could retitle the window, clear
//! the screen or draw a fake "approved") and invisible format characters (bidi overrides
//! and isolates that reorder what is displayed, zero-width characters) are shown escaped,
//! as `\u{1b}` or `\u{202e}`, never sent ([`llmchain::redact::unsafe_in_terminal`]);
//! and every secret the process holds is masked ([`llmchain::secrets`]).
//!
//! Written here rather than taken from a crate: it is a few lines over `char`, and the
//! crates that strip ANSI sequences remove them silently, where a user should see that
//! something tried.

use llmchain::redact::unsafe_in_terminal;

/// One line: every control character escaped, line breaks included; at most `max`
/// characters, then `…`.
pub(crate) fn inline(text: &str, max: usize) -> String {
    let text = llmchain::secrets::mask(text);
    let mut out = String::with_capacity(text.len().min(max + 8));
    for (n, c) in text.chars().enumerate() {
        if n == max {
            out.push('…');
            break;
        }
        push(&mut out, c, false);
    }
    out
}

/// Several lines: line breaks and tabs kept, every other control character escaped.
pub(crate) fn block(text: &str) -> String {
    let text = llmchain::secrets::mask(text);
    if !text
        .chars()
        .any(|c| unsafe_in_terminal(c) && c != '\n' && c != '\t')
    {
        return text.into_owned();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        push(&mut out, c, true);
    }
    out
}

fn push(out: &mut String, c: char, keep_lines: bool) {
    if keep_lines && (c == '\n' || c == '\t') {
        out.push(c);
    } else if unsafe_in_terminal(c) {
        out.extend(c.escape_unicode());
    } else {
        out.push(c);
    }
}

/// JSON for stdout: every secret masked, and each character [`unsafe_in_terminal`] that
/// JSON leaves raw (C1 controls, bidi overrides, zero-width characters) written as a
/// `\uXXXX` escape: the same JSON to a parser, nothing hidden from a person.
pub(crate) fn json(value: &impl serde::Serialize, pretty: bool) -> String {
    let text = if pretty {
        serde_json::to_string_pretty(value)
    } else {
        serde_json::to_string(value)
    }
    .unwrap_or_default();
    let text = llmchain::secrets::masked(text);
    if !text.chars().any(|c| !c.is_ascii() && unsafe_in_terminal(c)) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !c.is_ascii() && unsafe_in_terminal(c) {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Whitespace folded to single spaces: one line for an error message.
pub(crate) fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_for_stdout_escapes_what_json_leaves_raw() {
        let v = serde_json::json!({"path": "notes\u{202E}txt.exe", "c1": "\u{9b}2J", "emoji": "é"});
        let shown = json(&v, false);
        assert!(
            !shown.contains('\u{202E}') && !shown.contains('\u{9b}'),
            "{shown}"
        );
        assert!(shown.contains("\\u202e") && shown.contains("é"), "{shown}");
        let back: serde_json::Value = serde_json::from_str(&shown).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn bidi_and_invisible_characters_are_shown_escaped() {
        let t = "a\u{202E}cba\u{2066}x\u{2069}\u{200B}\u{FEFF}\u{E0041}";
        let want = "a\\u{202e}cba\\u{2066}x\\u{2069}\\u{200b}\\u{feff}\\u{e0041}";
        assert_eq!(inline(t, 100), want);
        assert_eq!(block(t), want);
        assert_eq!(block("é 日本\n\tok"), "é 日本\n\tok");
    }

    #[test]
    fn escapes_are_shown_not_sent() {
        let osc = "\u{1b}]0;pwned\u{7}title";
        assert_eq!(inline(osc, 100), "\\u{1b}]0;pwned\\u{7}title");
        let csi_c1 = "a\u{9b}2Jb\r\nc";
        assert_eq!(inline(csi_c1, 100), "a\\u{9b}2Jb\\u{d}\\u{a}c");
        assert_eq!(block(csi_c1), "a\\u{9b}2Jb\\u{d}\nc");
        assert_eq!(block("plain\ttext\n"), "plain\ttext\n");
    }

    #[test]
    fn inline_truncates_by_characters() {
        assert_eq!(inline("héllo wörld", 5), "héllo…");
        assert_eq!(inline("short", 5), "short");
    }
}

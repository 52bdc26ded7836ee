//! Markdown in a terminal, as the answer streams: text is written the moment it
//! arrives, and each finished line that fits on one row is drawn again styled (headings
//! bold without their `#`, `•` bullets, `**bold**`, `*italic*`, `` `code` ``, code
//! blocks, quotes, rules). A line too long for one row is left as it came (redrawing it
//! would need to know where the terminal wrapped it). Off when stdout is not a terminal
//! or `NO_COLOR` is set: a pipe or a file gets the text as it came.
//!
//! Hand-written rather than a Markdown crate: those render whole documents, where an
//! answer arrives a few characters at a time and must show at once; the line rules here
//! are the few that matter in a chat answer.

use console::Style;

/// Renders an answer's lines as they finish.
pub(crate) struct Markdown {
    line: String,
    in_code: bool,
    width: usize,
}

impl Markdown {
    /// A renderer for a terminal `width` columns wide.
    pub(crate) fn new(width: usize) -> Self {
        Markdown {
            line: String::new(),
            in_code: false,
            width,
        }
    }

    /// A renderer when stdout is a terminal that takes colors, else `None`.
    pub(crate) fn for_stdout() -> Option<Self> {
        let term = console::Term::stdout();
        if !term.is_term() || std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()) {
            return None;
        }
        let (_, cols) = term.size();
        Some(Self::new(usize::from(cols).max(20)))
    }

    /// What to write for `text` (already made safe for a terminal): the text itself, and
    /// for each line it finishes, the styled line drawn over it.
    pub(crate) fn push(&mut self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(nl) = rest.find('\n') {
            let (head, tail) = rest.split_at(nl);
            out.push_str(head);
            self.line.push_str(head);
            out.push_str(&self.finish_line());
            out.push('\n');
            rest = &tail[1..];
        }
        out.push_str(rest);
        self.line.push_str(rest);
        out
    }

    /// The redraw of the finished line, when it is styled and fits on one row.
    fn finish_line(&mut self) -> String {
        let line = std::mem::take(&mut self.line);
        let styled = self.style_line(&line);
        // Wide characters may take two columns: count them so.
        let cols: usize = line.chars().map(|c| if c.is_ascii() { 1 } else { 2 }).sum();
        if styled == line || cols >= self.width {
            return String::new();
        }
        format!("\r\x1b[2K{styled}")
    }

    fn style_line(&mut self, line: &str) -> String {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            self.in_code = !self.in_code;
            return Style::new()
                .dim()
                .force_styling(true)
                .apply_to(line)
                .to_string();
        }
        if self.in_code {
            return Style::new()
                .cyan()
                .force_styling(true)
                .apply_to(line)
                .to_string();
        }
        let indent = &line[..line.len() - trimmed.len()];
        let hashes = trimmed.bytes().take_while(|b| *b == b'#').count();
        if (1..=6).contains(&hashes) && trimmed[hashes..].starts_with(' ') {
            let text = inline(trimmed[hashes..].trim());
            let mut style = Style::new().bold().force_styling(true);
            if hashes <= 2 {
                style = style.underlined();
            }
            return style.apply_to(text).to_string();
        }
        if matches!(trimmed, "---" | "***" | "___") {
            return Style::new()
                .dim()
                .force_styling(true)
                .apply_to("─".repeat(self.width.min(40)))
                .to_string();
        }
        if let Some(q) = trimmed.strip_prefix("> ") {
            return format!(
                "{indent}{}",
                Style::new()
                    .dim()
                    .force_styling(true)
                    .apply_to(format!("│ {}", inline(q)))
            );
        }
        for bullet in ["- ", "* ", "+ "] {
            if let Some(item) = trimmed.strip_prefix(bullet) {
                return format!("{indent}• {}", inline(item));
            }
        }
        format!("{indent}{}", inline(trimmed))
    }

    /// Ends the answer: nothing is pending to redraw (a last line without a break is
    /// left as it came).
    pub(crate) fn finish(&mut self) {
        self.line.clear();
        self.in_code = false;
    }
}

/// `**bold**`, `*italic*`/`_italic_` and `` `code` `` in one line; anything unclosed is
/// left as written.
fn inline(s: &str) -> String {
    let bold = Style::new().bold().force_styling(true);
    let italic = Style::new().italic().force_styling(true);
    let code = Style::new().cyan().force_styling(true);
    let mut out = String::with_capacity(s.len() + 16);
    let mut rest = s;
    while !rest.is_empty() {
        let (marker, style) = if rest.starts_with("**") {
            ("**", &bold)
        } else if rest.starts_with('`') {
            ("`", &code)
        } else if (rest.starts_with('*') || rest.starts_with('_'))
            && rest[1..].starts_with(|c: char| !c.is_whitespace())
        {
            (&rest[..1], &italic)
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            rest = &rest[c.len_utf8()..];
            continue;
        };
        let body = &rest[marker.len()..];
        match body.find(marker).filter(|&end| end > 0) {
            Some(end) => {
                out.push_str(&style.apply_to(&body[..end]).to_string());
                rest = &body[end + marker.len()..];
            }
            None => {
                out.push_str(marker);
                rest = body;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(s: &str) -> String {
        console::strip_ansi_codes(s).into_owned()
    }

    #[test]
    fn lines_are_written_at_once_and_redrawn_styled() {
        let mut md = Markdown::new(80);
        let out = md.push("# Tit");
        assert_eq!(out, "# Tit");
        let out = md.push("le\n- one **two** `three`\nplain\n");
        assert!(out.starts_with("le\r\x1b[2K"), "{out:?}");
        let shown = plain(&out);
        assert!(shown.contains("Title\n"), "{shown:?}");
        assert!(shown.contains("• one two three\n"), "{shown:?}");
        // A line with nothing to style is not redrawn.
        assert!(out.ends_with("\nplain\n"), "{out:?}");
    }

    #[test]
    fn code_blocks_are_left_alone_inside() {
        let mut md = Markdown::new(80);
        let out = plain(&md.push("```rust\nlet x = **y**;\n```\n"));
        assert!(out.contains("let x = **y**;"), "{out:?}");
    }

    #[test]
    fn a_line_longer_than_the_row_is_not_redrawn() {
        let mut md = Markdown::new(20);
        let out = md.push("**a long line that wraps the terminal**\n");
        assert!(!out.contains('\r'), "{out:?}");
        assert_eq!(inline("2 * 3 * 4"), "2 * 3 * 4");
        assert_eq!(plain(&inline("unclosed **bold")), "unclosed **bold");
    }
}

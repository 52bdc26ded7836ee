//! Tool names: the provider-legal check and the humanized display text.

use super::error::ToolError;

/// The longest tool name every provider accepts.
pub const MAX_NAME_LEN: usize = 64;

/// Checks that `name` is 1 to 64 characters of `[a-zA-Z0-9_-]`, the set every provider
/// accepts (OpenAI's rule; Anthropic and Gemini accept a superset).
///
/// ```
/// use llmchain::tool::validate_name;
/// assert!(validate_name("get_weather").is_ok());
/// assert_eq!(
///     validate_name("get weather").unwrap_err().to_string(),
///     "invalid tool name \"get weather\": character ' ' at position 3 is not allowed; use only a-z, A-Z, 0-9, '_' and '-'"
/// );
/// ```
pub fn validate_name(name: &str) -> Result<(), ToolError> {
    if name.is_empty() {
        return Err(ToolError::InvalidName {
            name: name.to_owned(),
            reason: "it is empty".to_owned(),
        });
    }
    let len = name.chars().count();
    if len > MAX_NAME_LEN {
        return Err(ToolError::InvalidName {
            name: name.to_owned(),
            reason: format!("it has {len} characters, more than {MAX_NAME_LEN}"),
        });
    }
    if let Some((pos, c)) = name
        .chars()
        .enumerate()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return Err(ToolError::InvalidName {
            name: name.to_owned(),
            reason: format!(
                "character {c:?} at position {pos} is not allowed; use only a-z, A-Z, 0-9, '_' and '-'"
            ),
        });
    }
    Ok(())
}

/// A tool name as a text shows it: as it is when it holds no control or bidirectional
/// formatting character, else quoted and escaped (`\n`, `\u{1b}`…); cut to 100
/// characters either way. A name the model chose is untrusted: a newline or an escape
/// sequence in it must not reach a terminal, a log line or the model's next prompt raw.
///
/// ```
/// use llmchain::tool::shown_name;
/// assert_eq!(shown_name("get_weather"), "get_weather");
/// assert_eq!(shown_name("rm\n\u{1b}[2J"), "\"rm\\n\\u{1b}[2J\"");
/// ```
pub fn shown_name(name: &str) -> String {
    let cut: String = name.chars().take(100).collect();
    if cut.chars().any(crate::redact::unsafe_in_terminal) {
        format!("{cut:?}")
    } else {
        cut
    }
}

/// The default display text of a tool: its name as words, first letter capitalized.
///
/// The reference replaces `_` with a space and calls `String.capitalize`, which also
/// lowercases the rest (`"getWeather"` → `"Getweather"`). We split on `_`, `-` and
/// camelCase boundaries instead, lowercase ordinary words and keep acronyms.
///
/// ```
/// use llmchain::tool::humanize_tool_name;
/// assert_eq!(humanize_tool_name("file_read"), "File read");
/// assert_eq!(humanize_tool_name("getWeather"), "Get weather");
/// assert_eq!(humanize_tool_name("fetch_URL"), "Fetch URL");
/// assert_eq!(humanize_tool_name("parseHTTPResponse"), "Parse HTTP response");
/// ```
pub fn humanize_tool_name(name: &str) -> String {
    if shown_name(name) != name {
        return shown_name(name);
    }
    let words = split_words(name);
    let mut out = String::with_capacity(name.len() + 4);
    for (i, word) in words.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let acronym = word.chars().count() > 1 && !word.chars().any(|c| c.is_lowercase());
        if acronym {
            out.push_str(word);
            continue;
        }
        for (j, c) in word.chars().enumerate() {
            if i == 0 && j == 0 {
                out.extend(c.to_uppercase());
            } else {
                out.extend(c.to_lowercase());
            }
        }
    }
    out
}

fn split_words(name: &str) -> Vec<String> {
    let chars: Vec<char> = name.chars().collect();
    let mut words = Vec::new();
    let mut cur = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c == '_' || c == '-' || c.is_whitespace() {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            continue;
        }
        if c.is_uppercase() && !cur.is_empty() {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            // "getWeather" → get|Weather; "HTTPResponse" → HTTP|Response.
            if prev.is_lowercase() || prev.is_ascii_digit() || (prev.is_uppercase() && next_lower) {
                words.push(std::mem::take(&mut cur));
            }
        }
        cur.push(c);
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(validate_name("a").is_ok());
        assert!(validate_name(&"a".repeat(64)).is_ok());
        assert_eq!(
            validate_name(&"a".repeat(65)).unwrap_err().to_string(),
            format!(
                "invalid tool name \"{}\": it has 65 characters, more than 64",
                "a".repeat(65)
            )
        );
        assert_eq!(
            validate_name("").unwrap_err().to_string(),
            "invalid tool name \"\": it is empty"
        );
        assert!(validate_name("café").is_err());
        assert!(validate_name("a.b").is_err());
        assert!(validate_name("A-z_09").is_ok());
    }

    #[test]
    fn humanize() {
        for (n, h) in [
            ("file_read", "File read"),
            ("getWeather", "Get weather"),
            ("get-current-time", "Get current time"),
            ("x", "X"),
            ("__odd__", "Odd"),
            ("v2Search", "V2 search"),
            ("GET_URL", "GET URL"),
            ("", ""),
        ] {
            assert_eq!(humanize_tool_name(n), h, "{n}");
        }
    }
}

//! Secrets out of URLs: the one redaction every part of llmchain uses before a URL is
//! stored, printed, logged or put in an error; and [`unsafe_in_terminal`], the characters
//! text from outside never reaches a terminal with.
//!
//! A URL may carry credentials: userinfo (`http://user:PASSWORD@host`) or a key in its
//! query (`…/v1?api-key=K`, `?key=…`, `?token=…`, a pre-signed `X-Amz-Signature=…`).
//! [`url`] removes the userinfo and replaces the value of every query parameter that is
//! not known to be harmless with `***`; [`urls_in`] does the same to every URL found in
//! a text (an error message that quotes the URL it could not reach).
//!
//! Hand-written rather than built on the `url` crate: this module is part of the
//! dependency-free core (it runs with no features), it must also work on URL-like text
//! inside messages that a URL parser would refuse, and it only needs to find the
//! authority and the query, not to normalise anything.

/// Query parameters whose values are never secret, shown as they are.
const PLAIN_QUERY: [&str; 6] = ["alt", "api-version", "format", "stream", "version", "v"];

/// `url` without its userinfo, and with the value of every query parameter outside a
/// short list of harmless ones (`alt`, `api-version`, …) replaced by `***`. The fragment
/// is dropped. Text that is not a URL (no `scheme://`) is returned as it is.
///
/// ```
/// use llmchain::redact;
/// assert_eq!(
///     redact::url("http://u:PW@host:8080/v1?api-key=K&alt=sse"),
///     "http://host:8080/v1?api-key=***&alt=sse"
/// );
/// assert_eq!(redact::url("https://api.example.com/v1"), "https://api.example.com/v1");
/// ```
pub fn url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_owned();
    };
    let (scheme, rest) = url.split_at(scheme_end + 3);
    // The userinfo ends at the last `@` of the authority. A password with an unencoded
    // `/`, `?` or `#` (a base64 token) makes the URL invalid, and would leave part of it
    // in the path: an `@` further on whose prefix holds a `:` (user:password) ends the
    // userinfo too.
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let rest = match rest[authority_end..].rfind('@') {
        Some(at) if !rest[..authority_end].contains('@') => {
            let at = authority_end + at;
            if rest[..at].contains(':') && !rest[..at].contains(char::is_whitespace) {
                &rest[at + 1..]
            } else {
                rest
            }
        }
        _ => rest,
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let tail = tail.split_once('#').map_or(tail, |(t, _)| t);
    let mut out = String::with_capacity(url.len());
    out.push_str(scheme);
    out.push_str(host);
    match tail.split_once('?') {
        None => out.push_str(tail),
        Some((path, query)) => {
            out.push_str(path);
            out.push('?');
            for (i, pair) in query.split('&').enumerate() {
                if i > 0 {
                    out.push('&');
                }
                match pair.split_once('=') {
                    Some((k, v)) if !v.is_empty() && !is_plain(k) => {
                        out.push_str(k);
                        out.push_str("=***");
                    }
                    _ => out.push_str(pair),
                }
            }
        }
    }
    out
}

fn is_plain(key: &str) -> bool {
    PLAIN_QUERY.iter().any(|p| p.eq_ignore_ascii_case(key))
}

/// Whether [`url`] hides the value of the query parameter `key`.
pub fn is_secret_query(key: &str) -> bool {
    !is_plain(key)
}

/// `text` with every URL in it (`scheme://…` up to whitespace, a quote or a closing
/// bracket) passed through [`url`].
///
/// ```
/// use llmchain::redact;
/// assert_eq!(
///     redact::urls_in("error sending request for url (http://t:PW@h/mcp?token=abc): refused"),
///     "error sending request for url (http://h/mcp?token=***): refused"
/// );
/// ```
pub fn urls_in(text: &str) -> String {
    if !text.contains("://") {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        // The scheme: the letters, digits, `+`, `-` and `.` just before `://`.
        let start = rest[..at]
            .char_indices()
            .rev()
            .find(|(_, c)| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |(i, c)| i + c.len_utf8());
        let end = rest[at..]
            .find(|c: char| {
                c.is_whitespace() || matches!(c, '"' | '\'' | ')' | ']' | '>' | '<' | '`')
            })
            .map_or(rest.len(), |i| at + i);
        out.push_str(&rest[..start]);
        if start == at {
            // `://` with no scheme before it: not a URL.
            out.push_str(&rest[at..at + 3]);
            rest = &rest[at + 3..];
            continue;
        }
        out.push_str(&url(&rest[start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Whether `c` must be shown escaped, never sent, when untrusted text reaches a terminal:
/// controls (C0, DEL, C1: escape sequences), the line and paragraph separators, and every
/// invisible format character (Unicode's category Cf): the bidi marks, embeddings,
/// overrides and isolates (U+061C, U+200E–F, U+202A–E, U+2066–9) that reorder what is
/// displayed, so that a reviewer would approve arguments other than those shown;
/// zero-width characters, the BOM, the soft hyphen and the tag characters.
///
/// Written by hand: category Cf is about twenty stable ranges, and a table crate for one
/// category would be a dependency of the core for those lines.
///
/// ```
/// use llmchain::redact::unsafe_in_terminal;
/// assert!(unsafe_in_terminal('\u{202E}') && unsafe_in_terminal('\u{1b}'));
/// assert!(!unsafe_in_terminal('é') && !unsafe_in_terminal('日'));
/// ```
pub fn unsafe_in_terminal(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{0600}'..='\u{0605}'
                | '\u{061C}'
                | '\u{06DD}'
                | '\u{070F}'
                | '\u{0890}'..='\u{0891}'
                | '\u{08E2}'
                | '\u{115F}'..='\u{1160}'
                | '\u{180E}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{206F}'
                | '\u{3164}'
                | '\u{FEFF}'
                | '\u{FFA0}'
                | '\u{FFF9}'..='\u{FFFB}'
                | '\u{110BD}'
                | '\u{110CD}'
                | '\u{13430}'..='\u{1343F}'
                | '\u{1BCA0}'..='\u{1BCA3}'
                | '\u{1D173}'..='\u{1D17A}'
                | '\u{E0001}'
                | '\u{E0020}'..='\u{E007F}'
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_and_secret_query_values_go() {
        assert_eq!(
            url("http://u:PW@host/v1?api-key=K"),
            "http://host/v1?api-key=***"
        );
        assert_eq!(url("http://token@host/mcp"), "http://host/mcp");
        assert_eq!(
            url("https://h/v1beta/models/m:streamGenerateContent?alt=sse&key=AIza123"),
            "https://h/v1beta/models/m:streamGenerateContent?alt=sse&key=***"
        );
        assert_eq!(
            url("https://h/p?X-Amz-Signature=abc&X-Amz-Credential=AKIA/x"),
            "https://h/p?X-Amz-Signature=***&X-Amz-Credential=***"
        );
        assert_eq!(url("http://h/p?flag&empty="), "http://h/p?flag&empty=");
        assert_eq!(url("http://h/p#frag?key=x"), "http://h/p");
        // An `@` in the path is not userinfo.
        assert_eq!(url("http://h/users/@me"), "http://h/users/@me");
        assert_eq!(url("not a url"), "not a url");
        // A password with an unencoded `/` (invalid, but a secret all the same).
        assert_eq!(url("http://u:ab/cd+ef@host/v1"), "http://host/v1");
        assert_eq!(
            url("http://u:ab/cd?x#y@host/v1?key=k"),
            "http://host/v1?key=***"
        );
        // An `@` in a path without a `user:` before it is a path.
        assert_eq!(url("http://h/users/@me"), "http://h/users/@me");
        assert_eq!(url("sqlite:///tmp/x.db"), "sqlite:///tmp/x.db");
        assert_eq!(
            url("postgres://llmchain:secret@127.0.0.1:5432/db"),
            "postgres://127.0.0.1:5432/db"
        );
    }

    #[test]
    fn every_url_in_a_text() {
        assert_eq!(
            urls_in("a http://a:b@x/y?key=1 and 'https://c:d@z/?token=2' end"),
            "a http://x/y?key=*** and 'https://z/?token=***' end"
        );
        assert_eq!(urls_in("no url here"), "no url here");
        assert_eq!(urls_in(":// alone"), ":// alone");
        assert_eq!(urls_in("x://"), "x://");
        // Found by the fuzzer: a multi-byte character just before the scheme.
        assert_eq!(urls_in("\u{fffd}://"), "\u{fffd}://");
        assert_eq!(urls_in("é http://u:p@h/"), "é http://h/");
        assert_eq!(urls_in("éhttp://u:p@h/"), "éhttp://h/");
    }

    proptest::proptest! {
        /// Whatever the text, a password placed in a URL's userinfo or a query value
        /// never survives, and nothing panics.
        #[test]
        fn no_secret_survives(prefix in "[a-z ()]{0,8}", host in "[a-z]{1,8}", secret in "[A-Za-z0-9]{8,16}") {
            let text = format!("{prefix}http://user:{secret}@{host}/p?key={secret} tail");
            let shown = urls_in(&text);
            proptest::prop_assert!(!shown.contains(&secret), "{shown}");
        }
    }
}

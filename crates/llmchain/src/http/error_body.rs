//! Reading an HTTP error response: the provider's own message, `Retry-After`, and the
//! response headers passed to callbacks.

use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;
use serde_json::{Map, Value};

use crate::model::{HttpErrorKind, ModelError};

/// Longest error message kept from a body that is not JSON.
const MAX_RAW_MESSAGE: usize = 500;

/// The provider's message from an error body:
/// OpenAI / compatible `{"error":{"message":…}}`, Anthropic
/// `{"type":"error","error":{"type":…,"message":…}}`, Gemini
/// `{"error":{"code":…,"message":…,"status":…}}` (also wrapped in an array), Ollama
/// `{"error":"…"}`, Mistral `{"message":…}` / `{"detail":…}`. Anything else: the body
/// text (shortened), or the status's reason phrase when the body is empty.
pub fn provider_message(status: u16, body: &[u8]) -> (String, Option<String>) {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        let v = match v {
            Value::Array(mut a) if !a.is_empty() => a.swap_remove(0),
            v => v,
        };
        if let Some((m, t)) = message_of(&v) {
            return (m, t);
        }
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        let reason = reqwest::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("error");
        return (reason.to_owned(), None);
    }
    let line = match html_page(text) {
        Some(page) => page,
        // One line: a body's line breaks and runs of blanks are one space.
        None => text.split_whitespace().collect::<Vec<_>>().join(" "),
    };
    (shortened(&line, MAX_RAW_MESSAGE).to_owned(), None)
}

/// `text` cut to at most `max` bytes, on a character boundary.
fn shortened(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// An HTML error page (a proxy's, a web server's 404) as one line: its title (else its
/// first heading), not the markup.
fn html_page(text: &str) -> Option<String> {
    // ASCII lowercasing keeps every byte where it was: offsets in it are offsets in
    // `text`.
    let lower = text.to_ascii_lowercase();
    let is_page =
        lower.starts_with("<!doctype html") || lower.find("<html").is_some_and(|at| at < 512);
    if !is_page {
        return None;
    }
    let element = |tag: &str| {
        let open = lower.find(&format!("<{tag}"))?;
        let start = open + lower[open..].find('>')? + 1;
        let end = start + lower[start..].find(&format!("</{tag}"))?;
        let inner = text
            .get(start..end)?
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        (!inner.is_empty()).then_some(inner)
    };
    Some(match element("title").or_else(|| element("h1")) {
        Some(said) => format!("an HTML page: {said}"),
        None => "an HTML page".to_owned(),
    })
}

fn message_of(v: &Value) -> Option<(String, Option<String>)> {
    let obj = v.as_object()?;
    let kind = |o: &Map<String, Value>| {
        o.get("type")
            .or_else(|| o.get("status"))
            .or_else(|| o.get("code"))
            .and_then(|t| match t {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            })
    };
    match obj.get("error") {
        Some(Value::Object(e)) => {
            if let Some(Value::String(m)) = e.get("message") {
                return Some((m.clone(), kind(e)));
            }
        }
        Some(Value::String(m)) => return Some((m.clone(), None)),
        _ => {}
    }
    for key in ["message", "detail"] {
        match obj.get(key) {
            Some(Value::String(m)) => return Some((m.clone(), kind(obj))),
            Some(d @ (Value::Array(_) | Value::Object(_))) => {
                return Some((d.to_string(), kind(obj)));
            }
            _ => {}
        }
    }
    None
}

/// `Retry-After` as seconds or an HTTP date, or OpenAI's `retry-after-ms`.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
    {
        // Capped like `retry-after` below: `from_secs_f64` panics past u64 seconds.
        return Some(Duration::from_secs_f64((ms / 1000.0).min(1e9)));
    }
    let v = headers.get("retry-after")?.to_str().ok()?.trim();
    if let Ok(secs) = v.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(1e9)));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(
        at.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO)
            .min(Duration::from_secs(1_000_000_000)),
    )
}

/// The typed error of an HTTP error response. An `overloaded` error type (Anthropic
/// sends it with 529, some gateways with other codes) makes the kind `Overloaded`.
/// `secret` (the key) is cut out of the message should a provider echo it.
pub(super) fn http_error(
    provider: &str,
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    secret: Option<&str>,
) -> ModelError {
    let (message, kind_text) = provider_message(status, body);
    let mut kind = HttpErrorKind::from_status(status);
    if kind_text
        .as_deref()
        .is_some_and(|k| k.to_ascii_lowercase().contains("overloaded"))
    {
        kind = HttpErrorKind::Overloaded;
    }
    ModelError::Http {
        provider: provider.to_owned(),
        status,
        kind,
        message: redact(message, secret),
        retry_after: retry_after(headers),
    }
}

/// Replaces every occurrence of `secret` in `text` with `[redacted]`, and every other
/// secret the process holds (tokens fetched at run time, other keys, URL secrets) with
/// the masker's `***` ([`crate::secrets`]).
pub(super) fn redact(text: String, secret: Option<&str>) -> String {
    let text = match secret {
        Some(s) if s.len() >= 4 && text.contains(s) => text.replace(s, "[redacted]"),
        _ => text,
    };
    crate::secrets::masked(text)
}

/// The headers reported to callbacks: rate limits, request ids, processing times and
/// `retry-after`. Values that are not visible ASCII are skipped.
pub fn reported_headers(headers: &HeaderMap) -> Map<String, Value> {
    let mut out = Map::new();
    for (name, value) in headers {
        let n = name.as_str();
        let keep = n.contains("ratelimit")
            || n.contains("request-id")
            || n.starts_with("retry-after")
            || n.starts_with("openai-")
            || n.starts_with("anthropic-")
            || n == "x-goog-request-id"
            || n == "cf-ray";
        if !keep {
            continue;
        }
        if let Ok(v) = value.to_str() {
            out.insert(n.to_owned(), Value::String(v.to_owned()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_html_page_is_one_line_its_title() {
        let page = b"<!DOCTYPE html>\n<html><head>\n<title>404 Not Found</title></head>\n<body><h1>Not Found</h1><p>The requested URL was not found on this server.</p>\n</body></html>";
        assert_eq!(provider_message(404, page).0, "an HTML page: 404 Not Found");
        let page = b"<html><body>\n<h1>502   Bad\nGateway</h1></body></html>";
        assert_eq!(
            provider_message(502, page).0,
            "an HTML page: 502 Bad Gateway"
        );
        assert_eq!(provider_message(500, b"<html></html>").0, "an HTML page");
        // A page whose first 512 bytes end inside a character is still a page.
        let page = format!(
            "<!DOCTYPE html><html><head><title>Überlastet — {}</title></head></html>",
            "é".repeat(300)
        );
        let said = provider_message(503, page.as_bytes()).0;
        assert!(said.starts_with("an HTML page: Überlastet"), "{said}");
        assert!(said.len() <= MAX_RAW_MESSAGE, "{}", said.len());
        // Plain text keeps its words, on one line.
        assert_eq!(
            provider_message(500, b"upstream\n  timed out\n").0,
            "upstream timed out"
        );
    }

    #[test]
    fn messages_per_provider() {
        let cases: [(&str, &str); 6] = [
            (
                r#"{"error":{"message":"Invalid model","type":"invalid_request_error","param":null,"code":null}}"#,
                "Invalid model",
            ),
            (
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                "Overloaded",
            ),
            (
                r#"[{"error":{"code":400,"message":"API key not valid.","status":"INVALID_ARGUMENT"}}]"#,
                "API key not valid.",
            ),
            (
                r#"{"error":"model \"x\" not found, try pulling it first"}"#,
                "model \"x\" not found, try pulling it first",
            ),
            (
                r#"{"object":"error","message":"Tool call id was call_1 but must be a-z, A-Z, 0-9, with a length of 9.","type":"invalid_request_message_error"}"#,
                "Tool call id was call_1 but must be a-z, A-Z, 0-9, with a length of 9.",
            ),
            ("upstream connect error", "upstream connect error"),
        ];
        for (body, want) in cases {
            assert_eq!(provider_message(400, body.as_bytes()).0, want, "{body}");
        }
        assert_eq!(provider_message(502, b"").0, "Bad Gateway");
    }

    #[test]
    fn retry_after_headers_never_panic_and_are_capped() {
        for (name, value) in [
            ("retry-after-ms", "1e300"),
            ("retry-after-ms", "1e400"),
            ("retry-after-ms", "-5"),
            ("retry-after-ms", "NaN"),
            ("retry-after", "1e300"),
            ("retry-after", "inf"),
            ("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT"),
            ("retry-after", "\u{7f}garbage"),
        ] {
            let mut h = HeaderMap::new();
            if let Ok(v) = reqwest::header::HeaderValue::from_str(value) {
                h.insert(name, v);
            }
            if let Some(d) = retry_after(&h) {
                assert!(d <= Duration::from_secs(1_000_000_000), "{name}: {value}");
            }
        }
    }

    #[test]
    fn overloaded_type_and_retry_after() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", "3".parse().unwrap());
        let e = http_error(
            "anthropic",
            529,
            &h,
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            None,
        );
        match e {
            ModelError::Http {
                kind, retry_after, ..
            } => {
                assert_eq!(kind, HttpErrorKind::Overloaded);
                assert_eq!(retry_after, Some(Duration::from_secs(3)));
            }
            other => panic!("{other:?}"),
        }
        let mut h = HeaderMap::new();
        let later = SystemTime::now() + Duration::from_secs(30);
        h.insert(
            "retry-after",
            httpdate::fmt_http_date(later).parse().unwrap(),
        );
        let d = retry_after(&h).unwrap();
        assert!(
            d <= Duration::from_secs(30) && d >= Duration::from_secs(25),
            "{d:?}"
        );
    }

    #[test]
    fn echoed_key_is_redacted() {
        let e = http_error(
            "openai",
            401,
            &HeaderMap::new(),
            br#"{"error":{"message":"Incorrect API key provided: sk-abc123secret."}}"#,
            Some("sk-abc123secret"),
        );
        assert!(!e.to_string().contains("sk-abc123secret"), "{e}");
    }
}

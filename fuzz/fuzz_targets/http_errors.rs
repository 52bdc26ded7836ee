#![no_main]
//! An HTTP error response from a hostile server: status, headers and body all arbitrary.
//!
//! Input: the first two bytes are the status (mapped into 100..=999); then header lines
//! `name: value` up to the first empty line; the rest is the body. Checks: no panic in
//! `retry_after`, `provider_message` or `reported_headers` (issue 18: a
//! `retry-after-ms: 1e300` once panicked in `Duration::from_secs_f64`); a `Retry-After`
//! is capped; the raw-text message is bounded; the reported headers are strings.

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use llmchain::http::{provider_message, reported_headers, retry_after};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

fn parse(data: &[u8]) -> (u16, HeaderMap, Vec<u8>) {
    let status = match data {
        [a, b, ..] => 100 + u16::from_be_bytes([*a, *b]) % 900,
        _ => 500,
    };
    let mut rest = data.get(2..).unwrap_or_default();
    let mut headers = HeaderMap::new();
    while let Some(end) = rest.iter().position(|&b| b == b'\n') {
        let line = &rest[..end];
        rest = &rest[end + 1..];
        if line.is_empty() {
            break;
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        // A few well-known names by their first byte, so the fuzzer reaches them often.
        let name = match name {
            [b'0'] => b"retry-after".as_slice(),
            [b'1'] => b"retry-after-ms".as_slice(),
            [b'2'] => b"x-ratelimit-reset-requests".as_slice(),
            [b'3'] => b"anthropic-ratelimit-tokens-reset".as_slice(),
            name => name,
        };
        if let (Ok(n), Ok(v)) = (HeaderName::from_bytes(name), HeaderValue::from_bytes(value)) {
            headers.append(n, v);
        }
    }
    (status, headers, rest.to_vec())
}

fuzz_target!(|data: &[u8]| {
    let (status, headers, body) = parse(data);
    // At most a billion seconds, however large or strange the header.
    if let Some(wait) = retry_after(&headers) {
        assert!(wait <= Duration::from_secs(1_000_000_000), "{wait:?}");
    }
    let (message, _kind) = provider_message(status, &body);
    if serde_json::from_slice::<serde_json::Value>(&body).is_err() {
        // Raw text is cut to 500 bytes (UTF-8 lossy: at most 3 bytes per byte read).
        assert!(message.len() <= 500, "{}", message.len());
    }
    for value in reported_headers(&headers).values() {
        assert!(value.is_string());
    }
});

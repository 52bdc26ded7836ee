//! No header or error body panics the HTTP client: `retry-after`, `retry-after-ms`, the
//! rate-limit headers and provider error bodies, generated at random (property tests;
//! the hostile values the issue found are among the fixed cases).

use std::time::Duration;

use llmchain::http::{provider_message, reported_headers, retry_after};
use proptest::prelude::*;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

const NAMES: [&str; 8] = [
    "retry-after",
    "retry-after-ms",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-reset-tokens",
    "anthropic-ratelimit-requests-remaining",
    "x-request-id",
    "request-id",
    "openai-processing-ms",
];

fn headers(pairs: &[(usize, Vec<u8>)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (i, value) in pairs {
        if let Ok(v) = HeaderValue::from_bytes(value) {
            h.append(HeaderName::from_static(NAMES[i % NAMES.len()]), v);
        }
    }
    h
}

fn check(h: &HeaderMap) {
    if let Some(d) = retry_after(h) {
        assert!(d <= Duration::from_secs(1_000_000_000));
    }
    let _ = reported_headers(h);
}

#[test]
fn hostile_values_seen_in_the_wild() {
    for v in [
        "1e300",
        "1e400",
        "-1",
        "NaN",
        "inf",
        "-inf",
        "1.5",
        "0x10",
        "99999999999999999999999",
        "",
        " ",
        "Wed, 21 Oct 2015 07:28:00 GMT",
        "Fri, 31 Dec 9999 23:59:59 GMT",
    ] {
        for name in NAMES {
            let mut h = HeaderMap::new();
            h.insert(
                HeaderName::from_static(name),
                HeaderValue::from_str(v).unwrap(),
            );
            check(&h);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn headers_never_panic(
        pairs in proptest::collection::vec((0usize..8, proptest::collection::vec(any::<u8>(), 0..40)), 0..6),
        numbers in proptest::collection::vec(any::<f64>(), 0..3),
    ) {
        check(&headers(&pairs));
        let numeric: Vec<(usize, Vec<u8>)> = numbers
            .iter()
            .enumerate()
            .map(|(i, n)| (i, format!("{n:e}").into_bytes()))
            .collect();
        check(&headers(&numeric));
    }

    #[test]
    fn error_bodies_never_panic(status in 100u16..600, body in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = provider_message(status, &body);
    }

    #[test]
    fn json_error_bodies_never_panic(
        status in 100u16..600,
        message in ".{0,40}",
        kind in ".{0,20}",
        shape in 0usize..5,
    ) {
        let body = match shape {
            0 => serde_json::json!({"error": {"message": message, "type": kind}}),
            1 => serde_json::json!([{"error": {"message": message, "code": 5}}]),
            2 => serde_json::json!({"error": message}),
            3 => serde_json::json!({"type": "error", "error": {"type": kind, "message": null}}),
            _ => serde_json::json!({"message": [message]}),
        };
        let _ = provider_message(status, body.to_string().as_bytes());
    }
}

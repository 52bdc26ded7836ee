//! Secrets stay put. Credentials never cross origins: a provider (or anything at its
//! base URL) that redirects to another host, port or scheme does not get the request
//! followed, for every provider format; a redirect within the origin is followed. And a
//! provider error event that echoes the key inside a successful stream is redacted
//! before anything can print, store or export it.

mod http_support;

use http_support::failing::*;
use http_support::*;
use llmchain::chain::{ChatModel, ModelError, collect_stream};
use llmchain::http::{HttpModel, HttpModelConfig};
use llmchain::provider::Format;
use llmchain::provider::render::{ResponseScript, render_stream};

fn model(format: Format, base: &str) -> HttpModel {
    HttpModel::new(
        HttpModelConfig::new(format, "m")
            .unwrap()
            .api_key(KEY)
            .base_url(base)
            .retry(retry(3)),
    )
    .unwrap()
}

#[tokio::test]
async fn a_cross_origin_redirect_is_not_followed_for_any_provider() {
    for &format in Format::ALL {
        // The other origin: records whatever reaches it.
        let elsewhere = Server::start(vec![Reply::json(200, &serde_json::json!({}))]).await;
        for status in [301, 302, 303, 307, 308] {
            let target = format!("{}/steal?x=1", elsewhere.base);
            let here = Server::start(vec![
                Reply::new(status, "text/plain", "moved").header("location", &target),
            ])
            .await;
            let e = collect_stream(model(format, &here.base).stream(&ask("hi")), |_| {})
                .await
                .unwrap_err();
            let ModelError::Http {
                status: s, message, ..
            } = &e
            else {
                panic!("{format:?} {status}: {e:?}");
            };
            assert_eq!(*s, status);
            assert!(message.contains("another origin"), "{message}");
            assert!(message.contains(&elsewhere.base), "{message}");
            assert!(
                !message.contains("steal"),
                "only the origin is named: {message}"
            );
            assert_eq!(here.seen().len(), 1, "{format:?} {status}: not retried");
        }
        assert!(
            elsewhere.seen().is_empty(),
            "{format:?}: the other origin saw {:?}",
            elsewhere
                .seen()
                .iter()
                .map(|s| s.headers.clone())
                .collect::<Vec<_>>()
        );
    }
}

/// A redirect loop within the origin ends after five redirects with a configuration
/// error, and is not retried.
#[tokio::test]
async fn a_redirect_loop_is_not_retried() {
    let here = Server::start(vec![]).await;
    for _ in 0..20 {
        here.push(
            Reply::new(307, "text/plain", "").header("location", &format!("{}/v1/loop", here.base)),
        );
    }
    let e = collect_stream(
        model(Format::OPENAI_CHAT, &format!("{}/v1", here.base)).stream(&ask("hi")),
        |_| {},
    )
    .await
    .unwrap_err();
    assert!(matches!(e, ModelError::Config(_)), "{e:?}");
    assert!(e.to_string().contains("redirect loop"), "{e}");
    assert!(!e.is_retryable());
    assert_eq!(here.seen().len(), 6, "one request and five redirects, once");
}

/// A Gemini model id is one path segment: `/`, `..`, `?` and `#` in it are encoded, so
/// it cannot move the request (and its key) to another endpoint.
#[tokio::test]
async fn a_gemini_model_id_is_encoded_in_the_path() {
    let body = render_stream(Format::GEMINI, &ResponseScript::text("ok")).unwrap();
    let here = Server::start(vec![Reply::sse(body)]).await;
    let m = HttpModel::new(
        HttpModelConfig::new(Format::GEMINI, "../../../v1/files?x=1#y")
            .unwrap()
            .api_key(KEY)
            .base_url(&here.base),
    )
    .unwrap();
    collect_stream(m.stream(&ask("hi")), |_| {}).await.unwrap();
    let uri = &here.seen()[0].uri;
    assert!(
        uri.starts_with(
            "/v1beta/models/..%2F..%2F..%2Fv1%2Ffiles%3Fx%3D1%23y:streamGenerateContent?"
        ),
        "{uri}"
    );
}

#[tokio::test]
async fn a_same_origin_redirect_is_followed() {
    let body = render_stream(Format::OPENAI_CHAT, &ResponseScript::text("hello")).unwrap();
    let here = Server::start(vec![]).await;
    here.push(
        Reply::new(307, "text/plain", "").header("location", &format!("{}/v2/chat", here.base)),
    );
    here.push(Reply::sse(body));
    let out = collect_stream(
        model(Format::OPENAI_CHAT, &format!("{}/v1", here.base)).stream(&ask("hi")),
        |_| {},
    )
    .await
    .unwrap();
    assert_eq!(out.message.text().as_deref(), Some("hello"));
    let seen = here.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].uri, "/v2/chat");
    assert_eq!(
        seen[1].header("authorization"),
        Some(format!("Bearer {KEY}").as_str()),
        "the same origin keeps the key"
    );
}

#[tokio::test]
async fn error_events_inside_a_stream_are_redacted() {
    let echo = format!("key {KEY} is rate limited");
    let bodies = [
        (
            Format::OPENAI_CHAT,
            format!("data: {{\"error\":{{\"message\":\"{echo}\",\"type\":\"rate_limit\"}}}}\n\n"),
        ),
        (
            Format::ANTHROPIC,
            format!(
                "event: error\ndata: {{\"type\":\"error\",\"error\":{{\"type\":\"rate_limit_error\",\"message\":\"{echo}\"}}}}\n\n"
            ),
        ),
    ];
    for (format, body) in bodies {
        let server = Server::start(vec![Reply::sse(body.into_bytes())]).await;
        let mut events = Vec::new();
        let result = collect_stream(model(format, &server.base).stream(&ask("hi")), |e| {
            events.push(format!("{e:?}"))
        })
        .await;
        let shown = format!("{result:?} {events:?}");
        assert!(
            shown.contains("rate limited"),
            "{format:?}: the error is kept: {shown}"
        );
        assert!(!shown.contains(KEY), "{format:?}: {shown}");
        assert!(!shown.contains("SUPERSECRET"), "{format:?}: {shown}");
    }
}

/// A password or a key in the base URL is used, never shown: not in a connect error,
/// not in the model's `Debug`, not in its URL; and a query in the base URL stays after
/// the endpoint's path.
#[tokio::test]
async fn credentials_in_the_base_url_are_never_shown() {
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let m = model(
        Format::OPENAI_CHAT,
        &format!("http://user:HUNTER2-pass@127.0.0.1:{dead}/v1?key=QUERYSECRET9"),
    );
    let e = collect_stream(m.stream(&ask("hi")), |_| {})
        .await
        .unwrap_err();
    let shown = format!("{e} {e:?} {m:?} {}", m.url());
    assert!(matches!(e, ModelError::Connect { .. }), "{e:?}");
    assert!(!shown.contains("HUNTER2"), "{shown}");
    assert!(!shown.contains("QUERYSECRET9"), "{shown}");
    // The userinfo goes whole (`llmchain::redact::url`, the one redaction).
    assert!(
        shown.contains(&format!("http://127.0.0.1:{dead}/v1")),
        "{shown}"
    );
    assert!(!shown.contains("user:"), "{shown}");
    assert!(
        m.url().ends_with("/v1/chat/completions?key=***"),
        "{}",
        m.url()
    );

    let body = render_stream(Format::OPENAI_CHAT, &ResponseScript::text("ok")).unwrap();
    let server = Server::start(vec![Reply::sse(body)]).await;
    let m = model(
        Format::OPENAI_CHAT,
        &format!("{}/v1?api-version=2024-10-01", server.base),
    );
    collect_stream(m.stream(&ask("hi")), |_| {}).await.unwrap();
    assert_eq!(
        server.seen()[0].uri,
        "/v1/chat/completions?api-version=2024-10-01"
    );
}

/// Secrets that are not the configured key reach no error either: a bearer token fetched
/// at run time (an Entra token) and a key in the base URL's query, each echoed back by
/// the provider, are masked by the process's one masker.
#[tokio::test]
async fn tokens_fetched_at_run_time_and_url_secrets_echoed_back_are_masked() {
    use std::sync::Arc;
    const TOKEN: &str = "entra-runtime-token-5f2c9a71";
    const URL_KEY: &str = "url-query-key-8d41b6e3";
    let echo = format!(
        r#"{{"error":{{"message":"Invalid URL (POST /v2/chat/completions?api-key={URL_KEY}); token {TOKEN} refused"}}}}"#
    );
    let server = Server::start(vec![Reply::json(
        404,
        &serde_json::from_str::<serde_json::Value>(&echo).unwrap(),
    )])
    .await;
    let tokens = llmchain::http::BearerTokens::from_fn(|| async {
        Ok(llmchain::http::Token {
            secret: llmchain::http::ApiKey::new(TOKEN),
            expires_in: None,
        })
    });
    let model = HttpModel::new(
        HttpModelConfig::new(Format::OPENAI_CHAT, "m")
            .unwrap()
            .base_url(format!("{}/v2?api-key={URL_KEY}", server.base))
            .auth(Arc::new(tokens))
            .retry(retry(1)),
    )
    .unwrap();
    let e = collect_stream(model.stream(&ask("hi")), |_| {})
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("Invalid URL"), "{e}");
    assert!(!e.contains(TOKEN), "the run-time token leaked: {e}");
    assert!(!e.contains(URL_KEY), "the URL's key leaked: {e}");
    assert!(e.contains("api-key=***"), "{e}");
}

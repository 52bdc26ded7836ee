//! The HTTP client against local servers speaking Gemini and Ollama.

mod http_support;

use std::sync::Arc;

use http_support::*;
use llmchain::chain::{ChatModel, HttpErrorKind, ModelError, collect_stream};
use llmchain::http::{HttpModel, HttpModelConfig};
use llmchain::message::{Message, ToolResult};
use llmchain::provider::{DecoderConfig, Format};
use serde_json::json;

const KEY: &str = "AIza-test-secret-key";

fn want(format: Format, body: &[u8]) -> llmchain::provider::DecodeOutcome {
    format
        .codec()
        .decode_body(body, 0, DecoderConfig::default())
        .unwrap()
}

/// Gemini 3 rejects a model turn whose first function call has no thought signature.
fn gemini3_validator() -> Validator {
    Arc::new(|seen: &Seen| {
        if !seen.uri.contains("gemini-3") {
            return None;
        }
        for (i, c) in seen.body["contents"].as_array()?.iter().enumerate() {
            if c["role"] != "model" {
                continue;
            }
            let parts = c["parts"].as_array()?;
            if let Some((j, p)) = parts
                .iter()
                .enumerate()
                .find(|(_, p)| p.get("functionCall").is_some())
                && p.get("thoughtSignature").is_none()
            {
                let name = p["functionCall"]["name"].as_str().unwrap_or("");
                return Some(Reply::json(
                    400,
                    &json!({"error": {
                        "code": 400,
                        "message": format!("Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:{name}` , position {}. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.", i * 10 + j + 1),
                        "status": "INVALID_ARGUMENT"
                    }}),
                ));
            }
        }
        None
    })
}

#[tokio::test]
async fn gemini_streams_with_key_header_and_model_in_path() {
    for name in [
        "text_stream.sse",
        "parallel_calls.sse",
        "no_args_call.sse",
        "max_tokens.sse",
    ] {
        let body = fixture(&format!("gemini/{name}"));
        let server = Server::start(vec![Reply::sse(body.clone()).seed(5)]).await;
        let m = HttpModel::new(
            HttpModelConfig::gemini("gemini-2.5-flash")
                .api_key(KEY)
                .base_url(&server.base),
        )
        .unwrap();
        let got = collect_stream(m.stream(&ask("hi")), |_| {}).await.unwrap();
        assert_eq!(got, want(Format::GEMINI, &body), "{name}");
        let seen = &server.seen()[0];
        assert_eq!(
            seen.uri,
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
        assert_eq!(seen.header("x-goog-api-key"), Some(KEY));
        assert!(!seen.uri.contains(KEY));
    }
}

#[tokio::test]
async fn gemini_non_streaming_and_error_body() {
    let body = fixture("gemini/response.json");
    let server = Server::start(vec![
        Reply::new(200, "application/json", body.clone()),
        Reply::new(400, "application/json", fixture("gemini/error.json")),
    ])
    .await;
    let m = HttpModel::new(
        HttpModelConfig::gemini("models/gemini-2.5-flash")
            .api_key(KEY)
            .base_url(&server.base)
            .stream(false),
    )
    .unwrap();
    let got = collect_stream(m.stream(&ask("hi")), |_| {}).await.unwrap();
    assert_eq!(got, want(Format::GEMINI, &body));
    assert_eq!(
        server.seen()[0].uri,
        "/v1beta/models/gemini-2.5-flash:generateContent"
    );
    let e = collect_stream(m.stream(&ask("hi")), |_| {})
        .await
        .unwrap_err();
    let raw: serde_json::Value = serde_json::from_slice(&fixture("gemini/error.json")).unwrap();
    let raw = if raw.is_array() { raw[0].clone() } else { raw };
    match e {
        ModelError::Http {
            status: 400,
            kind: HttpErrorKind::InvalidRequest,
            message,
            ..
        } => {
            assert_eq!(message, raw["error"]["message"].as_str().unwrap());
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn gemini3_thought_signatures_round_trip_and_missing_ones_are_rejected() {
    let body = fixture("gemini/gemini3_thought_calls.sse");
    let server =
        Server::start_with(vec![Reply::sse(body).seed(9)], Some(gemini3_validator())).await;
    let m = HttpModel::new(
        HttpModelConfig::gemini("gemini-3-pro-preview")
            .api_key(KEY)
            .base_url(&server.base),
    )
    .unwrap();
    let mut conv = ask("Weather and time in Zürich?");
    let first = collect_stream(m.stream(&conv), |_| {}).await.unwrap();
    assert!(!first.message.tool_calls.is_empty());
    let results: Vec<ToolResult> = first
        .message
        .tool_calls
        .iter()
        .map(|c| {
            ToolResult::text(c.call_id.clone().unwrap_or_default(), "ok")
                .with_name(c.name.clone().unwrap_or_default())
        })
        .collect();
    // The decoded message carries the signature: the next turn is accepted.
    let ok = fixture("gemini/text_stream.sse");
    server.push(Reply::sse(ok));
    conv.messages.push(first.message.clone());
    conv.messages.push(Message::tool(results.clone()));
    collect_stream(m.stream(&conv), |_| {}).await.unwrap();
    // The same turn without the signature: Gemini 3's 400.
    let mut stripped = first.message.clone();
    for c in &mut stripped.tool_calls {
        c.metadata.clear();
    }
    let mut bad = ask("Weather and time in Zürich?");
    bad.messages.push(stripped);
    bad.messages.push(Message::tool(results));
    let e = collect_stream(m.stream(&bad), |_| {}).await.unwrap_err();
    match e {
        ModelError::Http {
            status: 400,
            message,
            ..
        } => {
            assert!(
                message.starts_with("Function call is missing a thought_signature"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn ollama_streams_ndjson_without_a_key() {
    for name in ["tool_calls.ndjson", "calls_in_done.ndjson", "length.ndjson"] {
        let body = fixture(&format!("ollama/{name}"));
        let server = Server::start(vec![Reply::ndjson(body.clone()).seed(2)]).await;
        // OLLAMA_HOST style: host:port without a scheme.
        let host = server.base.trim_start_matches("http://").to_owned();
        let m = HttpModel::new(HttpModelConfig::ollama("qwen3:8b").base_url(host)).unwrap();
        let got = collect_stream(m.stream(&ask("hi")), |_| {}).await.unwrap();
        assert_eq!(got, want(Format::OLLAMA, &body), "{name}");
        let seen = &server.seen()[0];
        assert_eq!(seen.uri, "/api/chat");
        assert_eq!(seen.header("authorization"), None);
        assert_eq!(seen.body["model"], "qwen3:8b");
    }
}

#[tokio::test]
async fn ollama_unknown_model_is_not_found_with_its_message() {
    let server = Server::start(vec![Reply::json(
        404,
        &json!({"error": "model \"nope\" not found, try pulling it first"}),
    )])
    .await;
    let m = HttpModel::new(HttpModelConfig::ollama("nope").base_url(&server.base)).unwrap();
    let e = collect_stream(m.stream(&ask("hi")), |_| {})
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "ollama returned HTTP 404: model \"nope\" not found, try pulling it first"
    );
}

//! The HTTP client against a local server speaking Anthropic Messages.

mod http_support;

use std::sync::Arc;
use std::time::Duration;

use http_support::*;
use llmchain::chain::{ChatModel, HttpErrorKind, ModelError, collect_stream};
use llmchain::http::{HttpModel, HttpModelConfig, RetryPolicy};
use llmchain::message::{Message, ToolCall, ToolCallAttrs, ToolCallStatus, ToolResult};
use llmchain::provider::render::{ResponseScript, render_stream};
use llmchain::provider::{DecoderConfig, Format};
use serde_json::{Value, json};

const KEY: &str = "sk-ant-test-secret-value";

fn retry(n: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts: n,
        base_delay: Duration::from_millis(5),
        max_delay: Duration::from_millis(20),
        total_deadline: Duration::from_secs(30),
    }
}

fn model(server: &Server, n: u32) -> HttpModel {
    HttpModel::new(
        HttpModelConfig::anthropic("claude-sonnet-4-5")
            .api_key(KEY)
            .base_url(&server.base)
            .header("anthropic-beta", "fine-grained-tool-streaming-2025-05-14")
            .retry(retry(n)),
    )
    .unwrap()
}

fn invalid(message: String) -> Reply {
    Reply::json(
        400,
        &json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}}),
    )
}

/// Anthropic's checks: `tool_use.input` must be an object; every `tool_result` must
/// answer a `tool_use` of the previous message.
fn validator() -> Validator {
    Arc::new(|seen: &Seen| {
        let msgs = seen.body["messages"].as_array()?;
        let mut prev_ids: Vec<String> = Vec::new();
        for (i, m) in msgs.iter().enumerate() {
            let blocks = m["content"].as_array().cloned().unwrap_or_default();
            let mut ids = Vec::new();
            for (j, b) in blocks.iter().enumerate() {
                if b["type"] == "tool_use" {
                    if !b["input"].is_object() {
                        return Some(invalid(format!(
                            "messages.{i}.content.{j}.tool_use.input: Input should be a valid dictionary"
                        )));
                    }
                    ids.push(b["id"].as_str().unwrap_or("").to_owned());
                }
                if b["type"] == "tool_result" {
                    let id = b["tool_use_id"].as_str().unwrap_or("");
                    if !prev_ids.iter().any(|p| p == id) {
                        return Some(invalid(format!(
                            "messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                        )));
                    }
                }
            }
            prev_ids = ids;
        }
        // And what Anthropic takes as content.
        content_rules::anthropic(&seen.body).err().map(invalid)
    })
}

#[tokio::test]
async fn streams_with_anthropic_headers_and_random_chunking() {
    let script = ResponseScript::tool_call("toolu_01", "get_weather", r#"{"city":"Zürich"}"#)
        .with_text("Checking.")
        .with_usage(20, 10);
    let body = render_stream(Format::ANTHROPIC, &script).unwrap();
    let want = Format::ANTHROPIC
        .codec()
        .decode_body(&body, 0, DecoderConfig::default())
        .unwrap();
    for seed in 1..5 {
        let server = Server::start(vec![
            Reply::sse(body.clone())
                .seed(seed)
                .header("anthropic-ratelimit-requests-remaining", "49")
                .header("request-id", "req_01"),
        ])
        .await;
        let m = model(&server, 1);
        let mut headers = None;
        let got = collect_stream(m.stream(&ask("Weather in Zürich?")), |e| {
            if let llmchain::chain::ModelEvent::Headers(h) = e {
                headers = Some(h.clone());
            }
        })
        .await
        .unwrap();
        assert_eq!(got, want);
        let h = headers.unwrap();
        assert_eq!(h["anthropic-ratelimit-requests-remaining"], "49");
        assert_eq!(h["request-id"], "req_01");
        let seen = &server.seen()[0];
        assert_eq!(seen.uri, "/v1/messages");
        assert_eq!(seen.header("x-api-key"), Some(KEY));
        assert_eq!(seen.header("anthropic-version"), Some("2023-06-01"));
        assert_eq!(
            seen.header("anthropic-beta"),
            Some("fine-grained-tool-streaming-2025-05-14")
        );
        assert_eq!(seen.header("authorization"), None);
        assert_eq!(seen.body["stream"], true);
    }
}

#[tokio::test]
async fn fixtures_stream_through_the_client() {
    for name in [
        "tool_use.sse",
        "thinking_parallel.sse",
        "input_in_start.sse",
        "max_tokens_cut.sse",
    ] {
        let body = fixture(&format!("anthropic/{name}"));
        let server = Server::start(vec![Reply::sse(body.clone()).seed(11)]).await;
        let got = collect_stream(model(&server, 1).stream(&ask("hi")), |_| {})
            .await
            .unwrap();
        let want = Format::ANTHROPIC
            .codec()
            .decode_body(&body, 0, DecoderConfig::default())
            .unwrap();
        assert_eq!(got, want, "{name}");
    }
}

#[tokio::test]
async fn encoder_output_passes_anthropics_checks_and_bad_requests_fail_with_its_message() {
    let ok = render_stream(Format::ANTHROPIC, &ResponseScript::text("done")).unwrap();
    let server = Server::start_with(vec![Reply::sse(ok)], Some(validator())).await;
    let m = model(&server, 3);
    // A call without arguments is sent with an object `input`: accepted.
    let mut conv = ask("List?");
    let raw = ToolCall::new(ToolCallAttrs {
        status: ToolCallStatus::Complete,
        call_id: Some("toolu_01".into()),
        name: Some("list".into()),
        arguments: None,
        ..Default::default()
    })
    .unwrap();
    conv.messages
        .push(Message::assistant_with_calls("", vec![raw]));
    conv.messages.push(Message::tool(vec![
        ToolResult::text("toolu_01", "ok").with_name("list"),
    ]));
    let got = collect_stream(m.stream(&conv), |_| {}).await.unwrap();
    assert_eq!(got.message.text().as_deref(), Some("done"));
    let sent = &server.seen()[0].body;
    assert!(
        sent["messages"][1]["content"][0]["input"].is_object(),
        "{sent}"
    );

    // A result with no matching call: Anthropic's 400, not retried.
    let e = collect_stream(m.stream(&with_tool_round("toolu_01", "toolu_99")), |_| {})
        .await
        .unwrap_err();
    match e {
        ModelError::Http {
            status: 400,
            kind: HttpErrorKind::InvalidRequest,
            message,
            ..
        } => {
            assert!(
                message
                    .contains("unexpected `tool_use_id` found in `tool_result` blocks: toolu_99"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.seen().len(), 2);
}

fn overloaded() -> Reply {
    Reply::new(
        529,
        "application/json",
        serde_json::to_vec(&json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})).unwrap(),
    )
}

#[tokio::test]
async fn overloaded_is_retried_then_succeeds() {
    let ok = render_stream(Format::ANTHROPIC, &ResponseScript::text("back")).unwrap();
    let server = Server::start(vec![overloaded(), Reply::sse(ok)]).await;
    let got = collect_stream(model(&server, 3).stream(&ask("hi")), |_| {})
        .await
        .unwrap();
    assert_eq!(got.message.text().as_deref(), Some("back"));
    assert_eq!(server.seen().len(), 2);
}

#[tokio::test]
async fn overloaded_until_attempts_run_out() {
    let server = Server::start(vec![overloaded(), overloaded(), overloaded()]).await;
    let e = collect_stream(model(&server, 3).stream(&ask("hi")), |_| {})
        .await
        .unwrap_err();
    match &e {
        ModelError::Http {
            status: 529,
            kind: HttpErrorKind::Overloaded,
            message,
            ..
        } => {
            assert_eq!(message, "Overloaded");
        }
        other => panic!("{other:?}"),
    }
    assert!(e.is_retryable());
    assert_eq!(server.seen().len(), 3);
    assert!(!e.to_string().contains(KEY));
}

#[tokio::test]
async fn an_error_event_inside_a_200_stream_reaches_the_outcome() {
    let body = fixture("anthropic/overloaded_error.sse");
    let server = Server::start(vec![Reply::sse(body)]).await;
    let got = collect_stream(model(&server, 1).stream(&ask("hi")), |_| {})
        .await
        .unwrap();
    let err = got.error.expect("the stream's error");
    assert_eq!(err.kind, "overloaded_error");
    let v: Value = serde_json::to_value(&err).unwrap();
    assert_eq!(v["type"], "overloaded_error");
}

//! The HTTP client against local servers speaking OpenAI Chat Completions (and
//! compatible servers such as Mistral) and OpenAI Responses.

mod http_support;

use http_support::*;
use llmchain::chain::{ChatModel, HttpErrorKind, ModelError, ModelEvent, collect_stream};
use llmchain::conversation::Conversation;
use llmchain::http::{HttpModel, HttpModelConfig, RetryPolicy};
use llmchain::provider::render::{ResponseScript, render_stream};
use llmchain::provider::{DecodeOutcome, DecoderConfig, Format, StreamEvent};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

const KEY: &str = "sk-test-0123456789abcdef";

fn fast_retry(n: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts: n,
        base_delay: Duration::from_millis(5),
        max_delay: Duration::from_millis(20),
        total_deadline: Duration::from_secs(30),
    }
}

async fn run(
    model: &HttpModel,
    conv: &Conversation,
) -> (Vec<ModelEvent>, Result<DecodeOutcome, ModelError>) {
    let mut events = Vec::new();
    let r = collect_stream(model.stream(conv), |e| events.push(e.clone())).await;
    (events, r)
}

fn text_of(events: &[ModelEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::Event(StreamEvent::TextDelta { text, .. }) => Some(text.to_string()),
            _ => None,
        })
        .collect()
}

fn local_decode(format: Format, body: &[u8]) -> DecodeOutcome {
    format
        .codec()
        .decode_body(body, 0, DecoderConfig::default())
        .unwrap()
}

#[tokio::test]
async fn chat_stream_chunked_at_random_boundaries_matches_local_decode() {
    let script = ResponseScript::tool_call("call_1", "get_weather", r#"{"city":"Paris"}"#)
        .with_text("Let me check ünïcödé ✓.")
        .with_usage(12, 34);
    let body = render_stream(Format::OPENAI_CHAT, &script).unwrap();
    let want = local_decode(Format::OPENAI_CHAT, &body);
    for seed in 1..6u64 {
        let server = Server::start(vec![
            Reply::sse(body.clone())
                .seed(seed)
                .header("x-ratelimit-remaining-requests", "99")
                .header("x-request-id", "req_123"),
        ])
        .await;
        let model = HttpModel::new(
            HttpModelConfig::openai("gpt-4.1")
                .api_key(KEY)
                .base_url(format!("{}/v1", server.base))
                .organization("org-1")
                .project("proj-1"),
        )
        .unwrap();
        let (events, got) = run(&model, &ask("Weather?")).await;
        let got = got.unwrap();
        assert_eq!(got, want);
        assert_eq!(got.message.tool_calls.len(), 1);
        assert_eq!(text_of(&events), "Let me check ünïcödé ✓.");
        let headers = events
            .iter()
            .find_map(|e| match e {
                ModelEvent::Headers(h) => Some(h.clone()),
                _ => None,
            })
            .expect("a headers event");
        assert_eq!(headers["x-ratelimit-remaining-requests"], "99");
        assert_eq!(headers["x-request-id"], "req_123");
        let seen = server.seen();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].uri, "/v1/chat/completions");
        assert_eq!(seen[0].method, "POST");
        assert_eq!(
            seen[0].header("authorization"),
            Some(format!("Bearer {KEY}").as_str())
        );
        assert_eq!(seen[0].header("openai-organization"), Some("org-1"));
        assert_eq!(seen[0].header("openai-project"), Some("proj-1"));
        assert_eq!(seen[0].body["model"], "gpt-4.1");
        assert_eq!(seen[0].body["stream"], true);
    }
}

#[tokio::test]
async fn chat_fixtures_stream_through_the_client() {
    for name in [
        "single_call.sse",
        "parallel_calls.sse",
        "text_only.sse",
        "mistral_whole_calls.sse",
    ] {
        let body = fixture(&format!("openai_chat/{name}"));
        let server = Server::start(vec![Reply::sse(body.clone()).seed(name.len() as u64)]).await;
        let model =
            HttpModel::new(HttpModelConfig::openai("m").base_url(format!("{}/v1", server.base)))
                .unwrap();
        let (_, got) = run(&model, &ask("hi")).await;
        assert_eq!(
            got.unwrap(),
            local_decode(Format::OPENAI_CHAT, &body),
            "{name}"
        );
        // A keyless compatible server: no Authorization header.
        assert_eq!(server.seen()[0].header("authorization"), None);
    }
}

#[tokio::test]
async fn chat_non_streaming_uses_decode_response() {
    let body = fixture("openai_chat/response.json");
    let server = Server::start(vec![Reply::new(200, "application/json", body.clone())]).await;
    let model = HttpModel::new(
        HttpModelConfig::openai("m")
            .api_key(KEY)
            .base_url(format!("{}/v1", server.base))
            .stream(false),
    )
    .unwrap();
    let (events, got) = run(&model, &ask("hi")).await;
    assert_eq!(got.unwrap(), local_decode(Format::OPENAI_CHAT, &body));
    assert!(events.iter().all(|e| !matches!(e, ModelEvent::Event(_))));
    assert_ne!(server.seen()[0].body["stream"], true);
}

/// OpenAI rejects a tool message whose id answers no call of the preceding assistant
/// message (and Mistral rejects ids that are not 9 alphanumerics).
fn openai_validator(mistral: bool) -> Validator {
    Arc::new(move |seen: &Seen| {
        let msgs = seen.body["messages"].as_array()?;
        let mut open: Vec<String> = Vec::new();
        for (i, m) in msgs.iter().enumerate() {
            if let Some(calls) = m["tool_calls"].as_array() {
                open = calls
                    .iter()
                    .filter_map(|c| c["id"].as_str().map(str::to_owned))
                    .collect();
                if mistral {
                    for id in &open {
                        if id.len() != 9 || !id.chars().all(|c| c.is_ascii_alphanumeric()) {
                            return Some(Reply::json(
                                400,
                                &json!({
                                    "object": "error",
                                    "message": format!("Tool call id was {id} but must be a-z, A-Z, 0-9, with a length of 9."),
                                    "type": "invalid_request_message_error", "param": null, "code": null
                                }),
                            ));
                        }
                    }
                }
            }
            if m["role"] == "tool" {
                let id = m["tool_call_id"].as_str().unwrap_or("");
                if !open.iter().any(|o| o == id) {
                    return Some(Reply::json(
                        400,
                        &json!({"error": {
                            "message": format!("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'. (messages[{i}])"),
                            "type": "invalid_request_error", "param": format!("messages.[{i}].role"), "code": null
                        }}),
                    ));
                }
            }
        }
        // And what OpenAI takes as content.
        let message = content_rules::openai_chat(&seen.body).err()?;
        Some(Reply::json(
            400,
            &json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": null}}),
        ))
    })
}

#[tokio::test]
async fn rejected_requests_surface_the_providers_message_without_retry() {
    let ok = render_stream(Format::OPENAI_CHAT, &ResponseScript::text("fine")).unwrap();
    let server = Server::start_with(vec![Reply::sse(ok)], Some(openai_validator(false))).await;
    let model = HttpModel::new(
        HttpModelConfig::openai("gpt-4.1")
            .api_key(KEY)
            .base_url(format!("{}/v1", server.base))
            .retry(fast_retry(3)),
    )
    .unwrap();
    // A result with no matching call: 400 with OpenAI's message, not retried.
    let (_, got) = run(&model, &with_tool_round("call_abc", "call_other")).await;
    match got.unwrap_err() {
        ModelError::Http {
            status,
            kind,
            message,
            ..
        } => {
            assert_eq!(status, 400);
            assert_eq!(kind, HttpErrorKind::InvalidRequest);
            assert!(
                message.starts_with("Invalid parameter: messages with role 'tool'"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.seen().len(), 1);
    // The matching round is accepted.
    let (_, got) = run(&model, &with_tool_round("call_abc", "call_abc")).await;
    assert_eq!(got.unwrap().message.text().as_deref(), Some("fine"));
}

#[tokio::test]
async fn mistral_rejects_foreign_ids_with_its_message() {
    let server = Server::start_with(vec![], Some(openai_validator(true))).await;
    let model = HttpModel::new(
        HttpModelConfig::openai("mistral-large-latest")
            .api_key(KEY)
            .base_url(format!("{}/v1", server.base)),
    )
    .unwrap();
    let (_, got) = run(&model, &with_tool_round("call_0fypS1hVX", "call_0fypS1hVX")).await;
    let e = got.unwrap_err();
    assert_eq!(
        e.to_string(),
        "openai returned HTTP 400: Tool call id was call_0fypS1hVX but must be a-z, A-Z, 0-9, with a length of 9."
    );
}

#[tokio::test]
async fn rate_limited_then_success_honours_retry_after() {
    let ok = render_stream(Format::OPENAI_CHAT, &ResponseScript::text("after the wait")).unwrap();
    let limited = Reply::json(
        429,
        &json!({"error": {"message": "Rate limit reached for gpt-4.1", "type": "requests", "code": "rate_limit_exceeded"}}),
    )
    .header("retry-after", "0");
    let server = Server::start(vec![limited.clone(), limited, Reply::sse(ok)]).await;
    let model = HttpModel::new(
        HttpModelConfig::openai("gpt-4.1")
            .api_key(KEY)
            .base_url(format!("{}/v1", server.base))
            .retry(fast_retry(4)),
    )
    .unwrap();
    let (_, got) = run(&model, &ask("hi")).await;
    assert_eq!(
        got.unwrap().message.text().as_deref(),
        Some("after the wait")
    );
    assert_eq!(server.seen().len(), 3);
}

#[tokio::test]
async fn rate_limit_gives_up_after_max_attempts_with_the_message() {
    let limited = Reply::json(
        429,
        &json!({"error": {"message": "Rate limit reached", "type": "requests"}}),
    )
    .header("retry-after", "0");
    let server = Server::start(vec![limited.clone(), limited.clone(), limited]).await;
    let model = HttpModel::new(
        HttpModelConfig::openai("gpt-4.1")
            .api_key(KEY)
            .base_url(format!("{}/v1", server.base))
            .retry(fast_retry(2)),
    )
    .unwrap();
    let (_, got) = run(&model, &ask("hi")).await;
    match got.unwrap_err() {
        ModelError::Http {
            status: 429,
            kind: HttpErrorKind::RateLimited,
            message,
            retry_after,
            ..
        } => {
            assert_eq!(message, "Rate limit reached");
            assert_eq!(retry_after, Some(Duration::ZERO));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.seen().len(), 2);
}

#[tokio::test]
async fn a_retry_after_past_the_deadline_is_not_waited_for() {
    let limited =
        Reply::json(429, &json!({"error": {"message": "slow down"}})).header("retry-after", "3600");
    let server = Server::start(vec![limited]).await;
    let model = HttpModel::new(
        HttpModelConfig::openai("gpt-4.1")
            .api_key(KEY)
            .base_url(format!("{}/v1", server.base))
            .retry(fast_retry(5)),
    )
    .unwrap();
    let (_, got) = run(&model, &ask("hi")).await;
    assert!(matches!(got, Err(ModelError::Http { status: 429, .. })));
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test]
async fn status_codes_map_to_kinds() {
    for (status, kind) in [
        (401, HttpErrorKind::Authentication),
        (403, HttpErrorKind::PermissionDenied),
        (404, HttpErrorKind::NotFound),
        (413, HttpErrorKind::RequestTooLarge),
        (500, HttpErrorKind::Server),
        (502, HttpErrorKind::Server),
        (503, HttpErrorKind::Server),
    ] {
        let msg = format!("failure {status}");
        let server = Server::start(vec![Reply::json(
            status,
            &json!({"error": {"message": msg}}),
        )])
        .await;
        let model = HttpModel::new(
            HttpModelConfig::openai("gpt-4.1")
                .api_key(KEY)
                .base_url(format!("{}/v1", server.base))
                .retry(RetryPolicy::none()),
        )
        .unwrap();
        let (_, got) = run(&model, &ask("hi")).await;
        match got.unwrap_err() {
            ModelError::Http {
                status: s,
                kind: k,
                message,
                ..
            } => {
                assert_eq!((s, k), (status, kind));
                assert_eq!(message, msg);
            }
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn responses_api_streams_and_decodes() {
    for name in [
        "text.sse",
        "parallel_calls_no_event_lines.sse",
        "reasoning_function_call.sse",
    ] {
        let body = fixture(&format!("openai_responses/{name}"));
        let server = Server::start(vec![Reply::sse(body.clone()).seed(3)]).await;
        let model = HttpModel::new(
            HttpModelConfig::openai_responses("gpt-5")
                .api_key(KEY)
                .base_url(format!("{}/v1", server.base)),
        )
        .unwrap();
        let (_, got) = run(&model, &ask("hi")).await;
        assert_eq!(
            got.unwrap(),
            local_decode(Format::OPENAI_RESPONSES, &body),
            "{name}"
        );
        let seen = server.seen();
        assert_eq!(seen[0].uri, "/v1/responses");
        assert_eq!(
            seen[0].header("authorization"),
            Some(format!("Bearer {KEY}").as_str())
        );
    }
}

//! The HTTP client when things go wrong: dropped connections, slow and stalled streams,
//! unreachable servers — and the key never showing.

mod http_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use http_support::failing::*;
use http_support::*;
use llmchain::chain::{
    ChainError, ChatModel, LLMChain, Mode, ModelError, ModelEvent, collect_stream,
};
use llmchain::http::{HttpModel, HttpModelConfig, Timeouts};
use llmchain::message::{Message, MessageStatus};
use llmchain::provider::render::{ResponseScript, render_stream};
use llmchain::provider::{Format, StreamEvent};
use llmchain::tool::{Tool, ToolOutput};
use serde_json::json;
use tokio::sync::Notify;

#[tokio::test]
async fn a_connection_dropped_mid_stream_is_interrupted_and_not_retried() {
    let body = call_body();
    let cut = mid_call(&body);
    let server = Server::start(vec![
        Reply::sse(body.clone()).drop_after(cut),
        Reply::sse(body),
    ])
    .await;
    let mut events = Vec::new();
    let e = collect_stream(openai(&server, 3).stream(&ask("hi")), |e| {
        events.push(e.clone())
    })
    .await
    .unwrap_err();
    assert!(matches!(e, ModelError::StreamInterrupted { .. }), "{e:?}");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, ModelEvent::Event(StreamEvent::ToolCallStarted { .. })))
    );
    // Events were shown: replaying could duplicate them, so no second request.
    assert_eq!(server.seen().len(), 1);
    assert!(!e.to_string().contains(KEY));
}

/// Every retry is reported before its wait, with the provider's `Retry-After` as the
/// delay, so a caller can say why nothing arrives.
#[tokio::test]
async fn each_retry_is_reported_before_its_wait() {
    let server = Server::start(vec![
        Reply::json(429, &json!({"error": {"message": "slow down"}})).header("retry-after", "0.01"),
        Reply::sse(call_body()).drop_after(3),
        Reply::sse(call_body()),
    ])
    .await;
    let mut retries = Vec::new();
    let (model, conversation) = (openai(&server, 3), ask("hi"));
    let mut stream = model.stream(&conversation);
    while let Some(event) = stream.next().await {
        if let ModelEvent::Retrying(r) = event.unwrap() {
            retries.push(r);
        }
    }
    assert_eq!(retries.len(), 2, "{retries:?}");
    assert_eq!(retries[0].attempt, 1);
    assert_eq!(retries[0].delay, Duration::from_millis(10));
    assert!(retries[0].reason.contains("slow down"), "{:?}", retries[0]);
    assert_eq!(retries[1].attempt, 2);
    // The second attempt's connection was dropped (before or after its headers).
    assert!(!retries[1].reason.is_empty(), "{:?}", retries[1]);
    assert_eq!(server.seen().len(), 3);
}

#[tokio::test]
async fn a_stream_dropped_before_any_event_is_retried() {
    let body = call_body();
    let server = Server::start(vec![
        Reply::sse(body.clone()).drop_after(3),
        Reply::sse(body),
    ])
    .await;
    let got = collect_stream(openai(&server, 3).stream(&ask("hi")), |_| {})
        .await
        .unwrap();
    assert_eq!(got.message.tool_calls.len(), 1);
    assert_eq!(server.seen().len(), 2);
}

#[tokio::test]
async fn a_body_ending_without_the_end_marker_is_interrupted() {
    let body = call_body();
    let cut = mid_call(&body);
    let at_event_end = cut - 5;
    // The server ends the body cleanly, but before `finish_reason` and `[DONE]`: at an
    // event boundary, and inside an event.
    let server = Server::start(vec![
        Reply::sse(body[..at_event_end].to_vec()),
        Reply::sse(body[..cut].to_vec()),
    ])
    .await;
    let model = openai(&server, 3);
    for want in ["end-of-stream marker", "ended inside an event"] {
        let e = collect_stream(model.stream(&ask("hi")), |_| {})
            .await
            .unwrap_err();
        match e {
            ModelError::StreamInterrupted { message, .. } => {
                assert!(message.contains(want), "{message}")
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(server.seen().len(), 2);
}

#[tokio::test]
async fn the_first_event_arrives_before_the_stream_ends() {
    let body = render_stream(
        Format::OPENAI_CHAT,
        &ResponseScript::text("Hello, slow world"),
    )
    .unwrap();
    let first_line_end = after(&body, "\n\n");
    // Past the first text delta.
    let hold = after(&body[first_line_end..], "\n\n") + first_line_end;
    let gate = Arc::new(Notify::new());
    let server = Server::start(vec![
        Reply::sse(body)
            .hold_after(hold, gate.clone())
            .delay(Duration::from_millis(2)),
    ])
    .await;
    let model = openai(&server, 1);
    let conv = ask("hi");
    let mut stream = model.stream(&conv);
    // The server sends nothing more until `gate` is notified, so a text event here
    // proves it was delivered while the response was still open.
    let first_text = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(item) = stream.next().await {
            if let ModelEvent::Event(StreamEvent::TextDelta { text, .. }) = item.unwrap() {
                return text.to_string();
            }
        }
        panic!("the stream ended without text");
    })
    .await
    .expect("no event before the stream ended: the client buffers the body");
    assert!(!first_text.is_empty());
    gate.notify_one();
    let mut text = first_text;
    let mut done = false;
    while let Some(item) = stream.next().await {
        match item.unwrap() {
            ModelEvent::Event(StreamEvent::TextDelta { text: t, .. }) => text.push_str(&t),
            ModelEvent::Done(_) => done = true,
            _ => {}
        }
    }
    assert!(done);
    assert_eq!(text, "Hello, slow world");
}

#[tokio::test]
async fn a_stalled_stream_hits_the_read_timeout() {
    let body = call_body();
    let gate = Arc::new(Notify::new()); // never notified
    let hold = mid_call(&body);
    let server = Server::start(vec![Reply::sse(body).hold_after(hold, gate)]).await;
    let model = HttpModel::new(
        HttpModelConfig::openai("gpt-4.1")
            .api_key(KEY)
            .base_url(format!("{}/v1", server.base))
            .timeouts(Timeouts {
                connect: Duration::from_secs(5),
                read: Duration::from_millis(300),
                ..Timeouts::default()
            })
            .retry(retry(2)),
    )
    .unwrap();
    let e = collect_stream(model.stream(&ask("hi")), |_| {})
        .await
        .unwrap_err();
    match e {
        ModelError::StreamInterrupted { message, .. } => {
            assert!(message.contains("read timeout"), "{message}")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_unreachable_server_is_a_connect_error_naming_the_url() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let model = HttpModel::new(
        HttpModelConfig::anthropic("claude")
            .api_key(KEY)
            .base_url(format!("http://127.0.0.1:{port}"))
            .retry(retry(2)),
    )
    .unwrap();
    let e = collect_stream(model.stream(&ask("hi")), |_| {})
        .await
        .unwrap_err();
    match &e {
        ModelError::Connect { url, .. } => {
            assert_eq!(url, &format!("http://127.0.0.1:{port}/v1/messages"))
        }
        other => panic!("{other:?}"),
    }
    assert!(e.is_retryable());
    assert!(!e.to_string().contains(KEY));
    // The transport's error is kept to downcast, without its URL; its text is in the
    // message, so `source()` does not repeat it.
    assert!(std::error::Error::source(&e).is_none());
    let cause = match &e {
        ModelError::Connect { cause: Some(c), .. } => c,
        other => panic!("{other:?}"),
    };
    let reqwest_error = cause.get().downcast_ref::<reqwest::Error>().unwrap();
    assert!(reqwest_error.is_connect() && reqwest_error.url().is_none());
    assert!(!cause.to_string().contains("127.0.0.1"), "{cause}");
}

#[tokio::test]
async fn the_chain_keeps_a_cancelled_message_and_never_runs_its_calls() {
    let body = call_body();
    let cut = mid_call(&body);
    let server = Server::start(vec![Reply::sse(body).drop_after(cut)]).await;
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let tool = Tool::builder("get_weather")
        .schema(json!({"type": "object", "properties": {"city": {"type": "string"}}}))
        .handler(move |_, _| {
            let r = r.clone();
            async move {
                r.fetch_add(1, Ordering::SeqCst);
                ToolOutput::text("sunny")
            }
        })
        .build()
        .unwrap();
    let mut chain = LLMChain::new(Arc::new(openai(&server, 3))).with_tool(tool);
    chain.add_message(Message::user("Weather?")).await.unwrap();
    let e = chain.run(Mode::while_needs_response()).await.unwrap_err();
    assert!(
        matches!(e, ChainError::Model(ModelError::StreamInterrupted { .. })),
        "{e:?}"
    );
    let last = chain.last_message().unwrap();
    assert_eq!(last.status, MessageStatus::Cancelled);
    assert!(last.tool_calls.iter().all(|c| !c.is_complete()));
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    // The call that was cut off is kept, named, for a person to see.
    assert_eq!(last.tool_calls.len(), 1, "{last:?}");
    assert_eq!(last.tool_calls[0].name.as_deref(), Some("get_weather"));
    assert!(last.metadata.contains_key("streaming_error"));
}

//! Every response is bounded: a server trickling bytes cannot hold a call past its
//! overall deadline, and a body larger than the cap is cut at the cap, streamed or not.
//! In a chain, what arrived is kept as a cancelled message and its calls never run. A
//! web page where the API should answer is named as such and not retried.

mod http_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use http_support::failing::*;
use http_support::*;
use llmchain::chain::{ChainError, ChatModel, LLMChain, Mode, ModelError, collect_stream};
use llmchain::http::{HttpModel, HttpModelConfig, Timeouts};
use llmchain::message::{Message, MessageStatus};
use llmchain::provider::Format;
use llmchain::provider::render::{ResponseScript, render_stream};
use llmchain::tool::Tool;

/// A tool call whose arguments are `n` bytes of text.
fn big_call(n: usize) -> Vec<u8> {
    let args = serde_json::json!({ "text": "x".repeat(n) }).to_string();
    render_stream(
        Format::OPENAI_CHAT,
        &ResponseScript::tool_call("call_1", "save", args).with_text("Saving."),
    )
    .unwrap()
}

fn chain_over(model: HttpModel, ran: &Arc<AtomicUsize>) -> LLMChain {
    let ran = ran.clone();
    let save = Tool::builder("save")
        .handler(move |_, _| {
            ran.fetch_add(1, Ordering::SeqCst);
            async { "saved" }
        })
        .build()
        .unwrap();
    LLMChain::new(Arc::new(model)).with_tool(save)
}

async fn run_and_check(mut chain: LLMChain, ran: &Arc<AtomicUsize>, expect: &str) {
    chain.add_message(Message::user("save it")).await.unwrap();
    let e = chain.run(Mode::while_needs_response()).await.unwrap_err();
    let ChainError::Model(ModelError::Limit { message, .. }) = &e else {
        panic!("{e:?}");
    };
    assert!(message.contains(expect), "{message}");
    let last = chain.messages().last().unwrap();
    assert_eq!(
        last.status,
        MessageStatus::Cancelled,
        "what arrived is kept"
    );
    assert!(last.tool_calls.iter().all(|c| !c.is_complete()));
    assert_eq!(ran.load(Ordering::SeqCst), 0, "its calls never run");
}

#[tokio::test]
async fn a_trickling_stream_stops_at_the_overall_deadline() {
    let server = Server::start(vec![
        // Some events arrive before the deadline; the whole body would take seconds.
        Reply::sse(big_call(20_000)).delay(Duration::from_millis(10)),
    ])
    .await;
    let model = HttpModel::new(
        HttpModelConfig::openai("m")
            .api_key(KEY)
            .base_url(format!("{}/v1", server.base))
            .timeouts(Timeouts {
                read: Duration::from_secs(5),
                total: Duration::from_millis(1500),
                ..Timeouts::default()
            })
            .retry(retry(3)),
    )
    .unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    run_and_check(chain_over(model, &ran), &ran, "overall deadline").await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_stream_over_the_cap_is_cut_at_the_cap() {
    let server = Server::start(vec![Reply::sse(big_call(200_000))]).await;
    let model = HttpModel::new(
        HttpModelConfig::openai("m")
            .api_key(KEY)
            .base_url(format!("{}/v1", server.base))
            .max_response_bytes(20_000)
            .retry(retry(3)),
    )
    .unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    run_and_check(chain_over(model, &ran), &ran, "larger than 20000 bytes").await;
    assert_eq!(server.seen().len(), 1, "not retried");
}

#[tokio::test]
async fn a_whole_body_over_the_cap_is_refused() {
    let huge = serde_json::json!({
        "id": "x", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "y".repeat(100_000)}}]
    });
    let server = Server::start(vec![Reply::json(200, &huge)]).await;
    let model = HttpModel::new(
        HttpModelConfig::openai("m")
            .api_key(KEY)
            .base_url(format!("{}/v1", server.base))
            .stream(false)
            .max_response_bytes(10_000),
    )
    .unwrap();
    let e = collect_stream(model.stream(&ask("hi")), |_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(&e, ModelError::Limit { message, .. } if message.contains("max_response_bytes")),
        "{e:?}"
    );
}

/// A web page where the API should be is reported as such, once, not retried.
#[tokio::test]
async fn an_html_page_is_named_and_not_retried() {
    let server = Server::start(vec![Reply::new(
        200,
        "text/html; charset=utf-8",
        "<html><body>Sign in to the Wi-Fi</body></html>",
    )])
    .await;
    let e = collect_stream(openai(&server, 4).stream(&ask("hi")), |_| {})
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("the server answered with text/html, not an event stream"),
        "{e}"
    );
    assert_eq!(server.seen().len(), 1);
}

/// A `Retry-After` longer than the retry deadline is not waited; the error says how long
/// the provider asked to wait.
#[tokio::test]
async fn a_retry_after_past_the_deadline_is_reported_not_waited() {
    let server = Server::start(vec![
        Reply::json(
            429,
            &serde_json::json!({"error": {"message": "Rate limit reached"}}),
        )
        .header("retry-after", "600"),
    ])
    .await;
    let started = Instant::now();
    let e = collect_stream(openai(&server, 4).stream(&ask("hi")), |_| {})
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        e.to_string().contains("the provider asked to wait 10 min"),
        "{e}"
    );
    assert_eq!(server.seen().len(), 1);
}

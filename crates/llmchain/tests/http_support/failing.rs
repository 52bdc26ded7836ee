//! What the failure tests share: a key to look for, an OpenAI client with a quick retry
//! policy, and a tool-call stream with a cut inside the call.

use std::time::Duration;

use llmchain::http::{HttpModel, HttpModelConfig, RetryPolicy};
use llmchain::provider::Format;
use llmchain::provider::render::{ResponseScript, render_stream};

use super::Server;

pub(crate) const KEY: &str = "sk-live-SUPERSECRET-9876543210";

pub(crate) fn retry(n: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts: n,
        base_delay: Duration::from_millis(5),
        max_delay: Duration::from_millis(20),
        total_deadline: Duration::from_secs(30),
    }
}

pub(crate) fn openai(server: &Server, n: u32) -> HttpModel {
    HttpModel::new(
        HttpModelConfig::openai("gpt-4.1")
            .api_key(KEY)
            .base_url(format!("{}/v1", server.base))
            .retry(retry(n)),
    )
    .unwrap()
}

pub(crate) fn call_body() -> Vec<u8> {
    let script = ResponseScript::tool_call("call_1", "get_weather", r#"{"city":"Paris","days":3}"#)
        .with_text("Looking it up.");
    render_stream(Format::OPENAI_CHAT, &script).unwrap()
}

/// Offset just after the first occurrence of `needle`.
pub(crate) fn after(body: &[u8], needle: &str) -> usize {
    let n = needle.as_bytes();
    body.windows(n.len()).position(|w| w == n).unwrap() + n.len()
}

/// A cut inside the call: after the event naming it, a few bytes into the next one.
pub(crate) fn mid_call(body: &[u8]) -> usize {
    let named = after(body, "get_weather");
    named + after(&body[named..], "\n\n") + 5
}

//! Ollama codec: NDJSON fixtures decoded under every chunking, and request encoding.

mod codec_support;

use codec_support::*;
use llmchain::message::{ContentType, MessageStatus, TokenUsage};
use llmchain::provider::{
    Codec, DecodeError, DecodeOutcome, DecoderConfig, OllamaCodec, RequestOptions, StopReason,
};
use proptest::prelude::*;
use serde_json::{Value, json};

const F: &str = "ollama";

fn decode(name: &str) -> DecodeOutcome {
    let body = fixture(F, name);
    let (_, streamed) = decode_checked(&OllamaCodec, &body);
    let streamed = streamed.unwrap();
    // The whole-body decoder reads a captured stream too.
    let whole = OllamaCodec
        .decode_response(&body, DecoderConfig::default())
        .unwrap();
    assert_eq!(streamed, whole, "{name}");
    streamed
}

#[test]
fn reports_snapshot() {
    for name in fixture_names(F) {
        let out = decode(&name);
        insta::assert_json_snapshot!(format!("ollama_decode_{name}"), out.report());
    }
}

#[test]
fn calls_thinking_and_usage() {
    let out = decode("tool_calls.ndjson");
    let m = &out.message;
    assert_eq!(m.status, MessageStatus::Complete);
    assert_eq!(m.content[0].r#type, ContentType::Thinking);
    assert_eq!(
        m.content[0].content,
        "The user wants the weather in Tokyo & Paris."
    );
    assert_eq!(m.tool_calls[0].call_id.as_deref(), Some("call_k3m9x2pq"));
    assert_eq!(m.tool_calls[1].arguments_as_map()["unit"], "<celsius>");
    assert!(!m.tool_calls[0].metadata.contains_key("synthesized_id"));
    assert_eq!(out.stop_reason, Some(StopReason::ToolCalls));
    assert_eq!(out.raw_stop_reason.as_deref(), Some("stop"));
    assert_eq!(out.usage, Some(TokenUsage::new(180, 43)));
    assert_eq!(m.executable_tool_calls().count(), 2);
}

#[test]
fn calls_in_the_done_line_without_ids() {
    let out = decode("calls_in_done.ndjson");
    let m = &out.message;
    assert_eq!(m.text().as_deref(), Some("Let me check."));
    assert_eq!(m.tool_calls.len(), 2);
    let (a, b) = (&m.tool_calls[0], &m.tool_calls[1]);
    assert_ne!(a.call_id, b.call_id);
    assert_eq!(a.metadata["synthesized_id"], true);
    assert_eq!(b.arguments_as_map()["location"], "Oslo, NO");
    assert_eq!(m.executable_tool_calls().count(), 2);
}

#[test]
fn errors_length_and_cut_offs() {
    let out = decode("error_line.ndjson");
    assert_eq!(out.message.status, MessageStatus::Cancelled);
    assert!(out.error.unwrap().message.contains("unexpected EOF"));
    let out = decode("length.ndjson");
    assert_eq!(out.message.status, MessageStatus::Length);
    assert_eq!(out.stop_reason, Some(StopReason::MaxTokens));
    let out = decode("cut.ndjson");
    assert_eq!(out.message.status, MessageStatus::Cancelled);
    assert!(!out.message.is_tool_call());
    assert_eq!(out.report().incomplete_tool_calls.len(), 1);
}

#[test]
fn wrong_and_hostile_input() {
    let c = OllamaCodec;
    let (_, out) = decode_chunked(
        &c,
        b"{\"type\":\"message_start\"}\n",
        &[],
        DecoderConfig::default(),
    );
    assert!(
        matches!(out, Err(DecodeError::WrongFormat { .. })),
        "{out:?}"
    );
    let (_, out) = decode_chunked(&c, b"", &[], DecoderConfig::default());
    assert!(matches!(out, Err(DecodeError::Malformed { .. })));
    let (_, out) = decode_chunked(&c, b"not json", &[], DecoderConfig::default());
    assert!(matches!(out, Err(DecodeError::Malformed { .. })), "{out:?}");
    let cfg = DecoderConfig {
        max_argument_bytes: 8,
        ..Default::default()
    };
    let (_, out) = decode_chunked(&c, &fixture(F, "tool_calls.ndjson"), &[3], cfg);
    assert_eq!(
        out.unwrap_err(),
        DecodeError::ArgumentsTooLarge { limit: 8 }
    );
    let cfg = DecoderConfig {
        max_line_bytes: 64,
        ..Default::default()
    };
    let (_, out) = decode_chunked(&c, &fixture(F, "tool_calls.ndjson"), &[], cfg);
    assert_eq!(out.unwrap_err(), DecodeError::LineTooLong { limit: 64 });
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn any_chunking_gives_the_same_result(sizes in proptest::collection::vec(1usize..48, 1..12)) {
        for name in fixture_names(F) {
            let body = fixture(F, &name);
            let whole = decode_chunked(&OllamaCodec, &body, &[], DecoderConfig::default());
            let chunked = decode_chunked(&OllamaCodec, &body, &sizes, DecoderConfig::default());
            prop_assert_eq!(&whole, &chunked, "{}", name);
        }
    }
}

fn body(conv: &llmchain::conversation::Conversation) -> Value {
    let mut extra = serde_json::Map::new();
    extra.insert("think".into(), json!(true));
    let opts = RequestOptions {
        model: "qwen3:8b".into(),
        stream: true,
        temperature: Some(0.2),
        extra,
        ..Default::default()
    };
    serde_json::from_slice(&OllamaCodec.encode(conv, &opts).unwrap()).unwrap()
}

#[test]
fn encode_snapshot_and_rules() {
    let b = body(&rich_conversation());
    insta::assert_json_snapshot!("ollama_encode_rich", b);
    assert_eq!(b["think"], true);
    assert_eq!(b["stream"], true);
    let msgs = b["messages"].as_array().unwrap();
    assert_eq!(
        msgs[0],
        json!({"role": "system", "content": "You are a careful assistant."})
    );
    assert_eq!(msgs[2]["thinking"], "Two tools are needed.");
    assert_eq!(
        msgs[2]["tool_calls"][0]["function"]["arguments"],
        json!({"city": "Paris", "unit": "celsius"})
    );
    assert_eq!(msgs[2]["tool_calls"][1]["function"]["arguments"], json!({}));
    assert_eq!(msgs[3]["role"], "tool");
    assert_eq!(msgs[3]["tool_name"], "screenshot");
    assert_eq!(msgs[4]["tool_name"], "get_weather");
    assert_eq!(msgs[4]["content"], "Error: weather service unavailable");
    // The tool's image follows all tool messages, as a user message.
    assert_eq!(msgs[5]["role"], "user");
    assert_eq!(msgs[5]["images"], json!(["iVBORw0KGgo="]));
    assert_eq!(msgs[6]["content"], "Thanks. And Oslo?");
    assert!(msgs[7]["tool_calls"][0].get("id").is_none());
    assert!(msgs[8].get("tool_call_id").is_none());
    let text = serde_json::to_string(&b).unwrap();
    for virtual_field in [
        "processed_content",
        "display_text",
        "never sent",
        "synthesized_id",
    ] {
        assert!(!text.contains(virtual_field), "{virtual_field} leaked");
    }
}

#[test]
fn registry_and_decode_body() {
    let reg = llmchain::provider::Format::OLLAMA.codec();
    assert_eq!(reg.format(), llmchain::provider::Format::OLLAMA);
    for name in fixture_names(F) {
        let body = fixture(F, &name);
        let (_, want) = decode_chunked(&OllamaCodec, &body, &[], DecoderConfig::default());
        for size in [0, 1, 13] {
            let got = reg.decode_body(&body, size, DecoderConfig::default());
            assert_eq!(got, want, "{name} at {size}");
        }
    }
}

//! OpenAI Responses codec: every fixture decodes the same for every chunking, quirk
//! assertions, report snapshots, and encoded-body snapshots.

mod codec_support;

use codec_support::*;
use llmchain::message::{ContentType, MessageStatus};
use llmchain::provider::{Codec, DecodeError, DecoderConfig, Format, StopReason};
use proptest::prelude::*;
use serde_json::{Value, json};

const DIR: &str = "openai_responses";

fn responses() -> &'static dyn Codec {
    Format::OPENAI_RESPONSES.codec()
}

fn decode(name: &str) -> llmchain::provider::DecodeOutcome {
    let body = read(DIR, name);
    responses()
        .decode_body(&body, 0, DecoderConfig::default())
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn every_fixture_whole_and_one_byte_agree_and_match_snapshot() {
    for (name, path) in fixtures(DIR) {
        let body = std::fs::read(&path).unwrap();
        let whole = responses()
            .decode_body(&body, 0, DecoderConfig::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        if responses().is_stream_body(&body) {
            let (a, ea) = stream_with_cuts(responses(), &body, &[]);
            let (b, eb) = stream_with_cuts(responses(), &body, &one_byte_cuts(&body));
            assert_eq!(a.as_ref().unwrap(), &whole, "{name}");
            assert_eq!(b.as_ref().unwrap(), &whole, "{name}: 1-byte chunks");
            assert_eq!(ea, eb, "{name}: events");
        }
        insta::assert_json_snapshot!(format!("responses_report_{name}"), whole.report());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn every_fixture_decodes_identically_for_random_chunkings(
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..40),
    ) {
        for (name, path) in fixtures(DIR) {
            let body = std::fs::read(&path).unwrap();
            if !responses().is_stream_body(&body) { continue; }
            let cuts: Vec<usize> = cuts.iter().map(|c| c.index(body.len() + 1)).collect();
            let (a, ea) = stream_with_cuts(responses(), &body, &[]);
            let (b, eb) = stream_with_cuts(responses(), &body, &cuts);
            prop_assert_eq!(a, b, "{}", name);
            prop_assert_eq!(ea, eb, "{}", name);
        }
    }
}

#[test]
fn call_id_versus_item_id_and_reasoning_items() {
    let o = decode("reasoning_function_call.sse");
    assert_eq!(o.message.status, MessageStatus::Complete);
    assert_eq!(o.stop_reason, Some(StopReason::ToolCalls));
    let c = &o.message.tool_calls[0];
    assert!(c.is_complete());
    assert_eq!(c.call_id.as_deref(), Some("call_AB6AaRZ1FYZB2RwS6A5vbdqn"));
    assert_eq!(
        c.metadata["item_id"],
        json!("fc_68b5a1c9a0b1c2d3e4f5a6b7c8d9e0f1")
    );
    assert_eq!(
        Value::Object(c.arguments_as_map()),
        json!({"a":12,"b":7,"op":"add"})
    );
    let thinking = &o.message.content[0];
    assert_eq!(thinking.r#type, ContentType::Thinking);
    assert_eq!(
        thinking.content,
        "**Adding numbers**\n\nUse the calculator."
    );
    assert_eq!(
        thinking.options["item_id"],
        json!("rs_68b5a1c7e8f9a0b1c2d3e4f5a6b7c8d9")
    );
    assert_eq!(
        thinking.options["encrypted_content"],
        json!("gAAAAABotbKx3vQm-Fake-Encrypted-Blob==")
    );
    let u = o.usage.unwrap();
    assert_eq!((u.input_tokens, u.output_tokens), (81, 150));
}

#[test]
fn interleaved_parallel_calls_by_item_id() {
    let r = decode("parallel_calls_no_event_lines.sse").report();
    assert_eq!(r.tool_calls.len(), 2);
    assert_eq!(r.tool_calls[0].arguments["city"], "Paris");
    assert_eq!(r.tool_calls[1].arguments["city"], "Tokyo");
}

#[test]
fn text_and_end_turn() {
    let o = decode("text.sse");
    assert_eq!(o.stop_reason, Some(StopReason::EndTurn));
    assert_eq!(o.report().text, "The answer is 19.");
}

#[test]
fn incomplete_error_and_failed_leave_calls_unexecutable() {
    let o = decode("incomplete_max_output_tokens.sse");
    assert_eq!(o.message.status, MessageStatus::Length);
    assert_eq!(o.stop_reason, Some(StopReason::MaxTokens));
    assert_eq!(o.raw_stop_reason.as_deref(), Some("max_output_tokens"));
    assert_eq!(o.message.executable_tool_calls().count(), 0);

    let o = decode("error_event.sse");
    assert_eq!(o.message.status, MessageStatus::Cancelled);
    assert_eq!(o.error.as_ref().unwrap().kind, "server_error");
    assert_eq!(o.report().incomplete_tool_calls.len(), 1);

    let o = decode("failed.sse");
    assert_eq!(o.stop_reason, Some(StopReason::Error));
    assert_eq!(o.error.unwrap().kind, "rate_limit_exceeded");
}

#[test]
fn non_streaming_bodies() {
    let o = decode("response.json");
    assert_eq!(o.stop_reason, Some(StopReason::ToolCalls));
    let c = &o.message.tool_calls[0];
    assert_eq!(c.call_id.as_deref(), Some("call_unLAR8MvFNptuiZK6K6HCy5k"));
    assert_eq!(
        c.metadata["item_id"],
        json!("fc_67ca09c6bedc8190a7abfec07b1a1332")
    );
    let r = decode("response_reasoning_text.json").report();
    assert_eq!(r.text, "12 + 7 = 19.");
    assert_eq!(
        r.reasoning.as_deref(),
        Some("**Adding numbers**\n\nUse the calculator.")
    );
}

#[test]
fn wrong_format_and_malformed_bodies_are_errors() {
    let cfg = DecoderConfig::default();
    let chat = read("openai_chat", "single_call.sse");
    assert!(matches!(
        responses().decode_body(&chat, 5, cfg),
        Err(DecodeError::WrongFormat { .. })
    ));
    let chat_json = read("openai_chat", "response.json");
    assert!(matches!(
        responses().decode_body(&chat_json, 0, cfg),
        Err(DecodeError::WrongFormat { .. })
    ));
    let r = responses().decode_body(b"event: x\ndata: [1,\n\n", 0, cfg);
    assert!(matches!(r, Err(DecodeError::Malformed { .. })), "{r:?}");
    let anthropic = b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\n";
    assert!(matches!(
        responses().decode_body(anthropic, 0, cfg),
        Err(DecodeError::WrongFormat { .. })
    ));
}

#[test]
fn encoded_bodies_snapshot() {
    let mut conv: llmchain::conversation::Conversation = serde_json::from_value(json!({
        "version": 1,
        "system": "You are a calculator.",
        "tools": [{"name":"calculator","description":"Do arithmetic.",
                   "parameters_schema":{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"},"op":{"type":"string"}},"required":["a","b","op"]},
                   "strict": true}],
        "tool_choice": {"name": "calculator"},
        "parallel_tool_calls": false,
        "messages": [
            {"role":"user","content":"12 + 7?"},
            {"role":"user","content":[{"type":"image_url","content":"https://example.com/sum.png","options":{"detail":"low"}}]}
        ]
    }))
    .unwrap();
    let decoded = decode("reasoning_function_call.sse").message;
    conv.messages.push(decoded);
    conv.messages.push(
        serde_json::from_value(json!({"role":"tool","tool_results":[
            {"type":"function","tool_call_id":"call_AB6AaRZ1FYZB2RwS6A5vbdqn","name":"calculator",
             "content":[{"type":"text","content":"19"},{"type":"image","content":"iVBORw0KGgo=","options":{"media":"image/png"}}],
             "processed_content":{"value":19}}]}))
        .unwrap(),
    );
    let opts = llmchain::provider::RequestOptions {
        model: "o4-mini".into(),
        stream: true,
        max_tokens: Some(1024),
        ..Default::default()
    };
    let body = responses().encode(&conv, &opts).unwrap();
    let v: Value = serde_json::from_slice(&body).unwrap();
    insta::assert_json_snapshot!("responses_encoded_conversation", v);
    let input = v["input"].as_array().unwrap();
    let call = input.iter().find(|i| i["type"] == "function_call").unwrap();
    assert_eq!(call["call_id"], "call_AB6AaRZ1FYZB2RwS6A5vbdqn");
    assert_eq!(call["id"], "fc_68b5a1c9a0b1c2d3e4f5a6b7c8d9e0f1");
    let out = input
        .iter()
        .find(|i| i["type"] == "function_call_output")
        .unwrap();
    assert_eq!(out["call_id"], "call_AB6AaRZ1FYZB2RwS6A5vbdqn");
    assert_eq!(out["output"][1]["type"], "input_image");
    assert_eq!(
        v["tool_choice"],
        json!({"type":"function","name":"calculator"})
    );
    assert!(
        !String::from_utf8(body)
            .unwrap()
            .contains("processed_content")
    );
}

#[test]
fn hosted_tool_items_are_kept_whole_never_called_and_replayed() {
    // The hosted shell streams an object as `delta`; a citation arrives as its own
    // event kind: neither breaks the stream.
    let out = decode("hosted_tools.sse");
    let m = &out.message;
    assert_eq!(m.status, llmchain::message::MessageStatus::Complete);
    assert_eq!(
        m.tool_calls.len(),
        1,
        "only the function call is a client call"
    );
    assert_eq!(m.tool_calls[0].name.as_deref(), Some("get_forecast"));
    assert_eq!(m.text().as_deref(), Some("It is 18°C in Paris. "));
    let opaque: Vec<&Value> = m
        .content
        .iter()
        .filter(|p| p.r#type == llmchain::message::ContentType::Unsupported)
        .map(|p| &p.options["item"])
        .collect();
    assert_eq!(opaque.len(), 2);
    assert_eq!(opaque[0]["type"], "web_search_call");
    assert_eq!(opaque[0]["status"], "completed");
    assert_eq!(opaque[1]["type"], "shell_call");

    // The next request replays them before the call, as they came.
    let mut conv = llmchain::conversation::Conversation::new();
    conv.messages
        .push(llmchain::message::Message::user("weather?"));
    conv.messages.push(m.clone());
    let opts = llmchain::provider::RequestOptions {
        model: "gpt-5".into(),
        ..Default::default()
    };
    let body: Value = serde_json::from_slice(&responses().encode(&conv, &opts).unwrap()).unwrap();
    let input = body["input"].as_array().unwrap();
    let types: Vec<&str> = input.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "message",
            "web_search_call",
            "shell_call",
            "message",
            "function_call"
        ]
    );
    assert_eq!(&input[1], opaque[0]);
    assert_eq!(&input[2], opaque[1]);

    // The same items in a whole (non-streaming) response.
    let events = String::from_utf8(read(DIR, "hosted_tools.sse")).unwrap();
    let completed = events
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .find(|d| d.contains("\"response.completed\""))
        .unwrap();
    let whole: Value = serde_json::from_str(completed).unwrap();
    let body = serde_json::to_vec(&whole["response"]).unwrap();
    let out = responses()
        .decode_body(&body, 0, DecoderConfig::default())
        .unwrap();
    assert_eq!(out.message.tool_calls.len(), 1);
    assert_eq!(
        out.message
            .content
            .iter()
            .filter(|p| p.r#type == llmchain::message::ContentType::Unsupported)
            .count(),
        2
    );
}

//! Anthropic codec: fixtures decoded under every chunking, and request encoding.

mod codec_support;

use codec_support::*;
use llmchain::message::{ContentType, MessageStatus, TokenUsage};
use llmchain::provider::{
    AnthropicCodec, Codec, DecodeError, DecoderConfig, RequestOptions, StopReason,
};
use proptest::prelude::*;
use serde_json::{Value, json};

const F: &str = "anthropic";

fn decode(name: &str) -> llmchain::provider::DecodeOutcome {
    let body = fixture(F, name);
    if name.ends_with(".json") {
        let whole = AnthropicCodec
            .decode_response(&body, DecoderConfig::default())
            .unwrap();
        // The stream decoder falls back to the whole-body decoder for non-SSE bodies.
        let (_, streamed) = decode_checked(&AnthropicCodec, &body);
        assert_eq!(streamed.unwrap(), whole);
        whole
    } else {
        decode_checked(&AnthropicCodec, &body).1.unwrap()
    }
}

#[test]
fn reports_snapshot() {
    for name in fixture_names(F) {
        let out = decode(&name);
        insta::assert_json_snapshot!(format!("anthropic_decode_{name}"), out.report());
    }
}

#[test]
fn tool_use_stream() {
    let out = decode("tool_use.sse");
    let m = &out.message;
    assert_eq!(m.status, MessageStatus::Complete);
    assert_eq!(m.tool_calls.len(), 1);
    let c = &m.tool_calls[0];
    assert!(c.is_complete());
    assert_eq!(c.call_id.as_deref(), Some("toolu_01T1x1fJ34qAmk2tNTrN7Up6"));
    let args = c.arguments_as_map();
    assert_eq!(args["location"], "San Francisco, CA");
    assert_eq!(args["note"], "café \"quoted\" 😀 é\n");
    assert_eq!(args["unit"], "fahrenheit");
    assert_eq!(out.stop_reason, Some(StopReason::ToolCalls));
    assert_eq!(out.raw_stop_reason.as_deref(), Some("tool_use"));
    assert_eq!(out.usage, Some(TokenUsage::new(472, 89)));
    assert_eq!(m.usage(), Some(TokenUsage::new(472, 89)));
    assert!(m.is_tool_call());
}

#[test]
fn thinking_signature_and_shared_block_index() {
    let out = decode("thinking_parallel.sse");
    let m = &out.message;
    assert_eq!(m.content[0].r#type, ContentType::Thinking);
    assert_eq!(
        m.content[0].signature(),
        Some("EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds")
    );
    assert_eq!(m.content[1].as_text(), Some("Checking both."));
    // Blocks 2 and 3 are calls 0 and 1, even with interleaved deltas.
    assert_eq!(m.tool_calls[0].arguments_as_map()["city"], "Paris");
    assert_eq!(m.tool_calls[1].name.as_deref(), Some("get_time"));
    assert!(m.tool_calls[1].arguments_as_map().is_empty());
    assert_eq!(m.executable_tool_calls().count(), 2);
    // Cache reads and writes count as input, and are kept apart too.
    assert_eq!(
        out.usage,
        Some(TokenUsage::new(420, 120).with_cache(Some(300), Some(20)))
    );
    let (events, _) = decode_checked(&AnthropicCodec, &fixture(F, "thinking_parallel.sse"));
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("ReasoningSignature { index: 0"))
    );
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("ToolCallStarted { index: 1, call_id: Some(\"toolu_01B\")"))
    );
}

#[test]
fn whole_input_in_block_start() {
    let out = decode("input_in_start.sse");
    let m = &out.message;
    assert_eq!(
        m.tool_calls[0].arguments_as_map(),
        json!({"query": "rust \"serde\"", "limit": 5})
            .as_object()
            .unwrap()
            .clone()
    );
    assert!(m.tool_calls[1].arguments_as_map().is_empty());
    assert_eq!(m.executable_tool_calls().count(), 2);
}

#[test]
fn cut_offs_are_never_executable() {
    let out = decode("max_tokens_cut.sse");
    assert_eq!(out.message.status, MessageStatus::Length);
    assert_eq!(out.stop_reason, Some(StopReason::MaxTokens));
    assert!(!out.message.is_tool_call());
    let r = out.report();
    assert!(r.tool_calls.is_empty());
    assert_eq!(
        r.incomplete_tool_calls[0].raw_arguments,
        "{\"path\": \"a.txt\", \"content\": \"lorem ip"
    );

    let out = decode("overloaded_error.sse");
    assert_eq!(out.message.status, MessageStatus::Cancelled);
    assert_eq!(out.error.as_ref().unwrap().kind, "overloaded_error");
    assert_eq!(out.stop_reason, Some(StopReason::Error));
    assert!(!out.message.is_tool_call());

    let out = decode("bare_end.sse");
    assert_eq!(out.message.status, MessageStatus::Cancelled);
    assert_eq!(out.message.text().as_deref(), Some("Let me look."));
    assert_eq!(out.report().incomplete_tool_calls.len(), 2);
}

#[test]
fn redacted_thinking_and_refusal() {
    let out = decode("redacted_thinking.sse");
    assert_eq!(out.stop_reason, Some(StopReason::ContentFilter));
    let p = &out.message.content[0];
    assert_eq!(p.r#type, ContentType::Thinking);
    assert!(
        p.options["redacted"]
            .as_str()
            .unwrap()
            .starts_with("EmwKAhgB")
    );
}

#[test]
fn whole_responses() {
    let out = decode("message.json");
    assert_eq!(out.message.tool_calls.len(), 2);
    assert_eq!(out.message.content[0].signature(), Some("sig_abc"));
    assert_eq!(
        out.usage,
        Some(TokenUsage::new(1512, 71).with_cache(Some(1000), None))
    );
    let out = decode("error.json");
    assert_eq!(out.error.unwrap().message, "Overloaded");
    let out = decode("pause_turn.json");
    assert_eq!(out.stop_reason, Some(StopReason::Other));
    assert!(
        out.message.tool_calls.is_empty(),
        "server tools are not client calls"
    );
}

#[test]
fn hostile_and_wrong_input() {
    let c = AnthropicCodec;
    let cfg = DecoderConfig {
        max_argument_bytes: 16,
        ..Default::default()
    };
    let body = fixture(F, "tool_use.sse");
    let (_, out) = decode_chunked(&c, &body, &[7], cfg);
    assert_eq!(
        out.unwrap_err(),
        DecodeError::ArgumentsTooLarge { limit: 16 }
    );
    // An OpenAI chunk is not an Anthropic event.
    let openai = b"data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[]}\n\ndata: [DONE]\n\n";
    let (_, out) = decode_chunked(&c, openai, &[], DecoderConfig::default());
    assert!(
        matches!(out, Err(DecodeError::WrongFormat { .. })),
        "{out:?}"
    );
    let (_, out) = decode_chunked(&c, b"", &[], DecoderConfig::default());
    assert!(matches!(out, Err(DecodeError::Malformed { .. })));
    let (_, out) = decode_chunked(&c, b"data: {nope\n\n", &[], DecoderConfig::default());
    assert!(matches!(out, Err(DecodeError::Malformed { .. })));
    // A field given twice is named as such, not as "an event without a string `type`".
    let twice = b"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n";
    let (_, out) = decode_chunked(&c, twice, &[], DecoderConfig::default());
    let err = out.unwrap_err().to_string();
    assert!(
        err.contains("an event that breaks the format: duplicate field `index`"),
        "{err}"
    );
    assert!(
        c.decode_response(
            b"{\"object\":\"chat.completion\"}",
            DecoderConfig::default()
        )
        .is_err()
    );
}

#[test]
fn crlf_framing_gives_the_same_result() {
    for name in fixture_names(F).into_iter().filter(|n| n.ends_with(".sse")) {
        let body = fixture(F, &name);
        let crlf: Vec<u8> = String::from_utf8(body.clone())
            .unwrap()
            .replace('\n', "\r\n")
            .into_bytes();
        let a = decode_chunked(&AnthropicCodec, &body, &[], DecoderConfig::default());
        let b = decode_chunked(&AnthropicCodec, &crlf, &[3, 1, 5], DecoderConfig::default());
        assert_eq!(a, b, "{name}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn any_chunking_gives_the_same_result(sizes in proptest::collection::vec(1usize..48, 1..12)) {
        for name in fixture_names(F) {
            let body = fixture(F, &name);
            let whole = decode_chunked(&AnthropicCodec, &body, &[], DecoderConfig::default());
            let chunked = decode_chunked(&AnthropicCodec, &body, &sizes, DecoderConfig::default());
            prop_assert_eq!(&whole, &chunked, "{}", name);
        }
    }
}

fn body(conv: &llmchain::conversation::Conversation) -> Value {
    let opts = RequestOptions {
        model: "claude-sonnet-4-5".into(),
        stream: true,
        ..Default::default()
    };
    serde_json::from_slice(&AnthropicCodec.encode(conv, &opts).unwrap()).unwrap()
}

#[test]
fn encode_snapshot_and_rules() {
    let conv = rich_conversation();
    let b = body(&conv);
    insta::assert_json_snapshot!("anthropic_encode_rich", b);
    assert_eq!(b["system"], "You are a careful assistant.");
    assert_eq!(b["max_tokens"], 4096);
    assert_eq!(
        b["tool_choice"],
        json!({"type": "any", "disable_parallel_tool_use": true})
    );
    assert_eq!(b["tools"][0]["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!(b["tools"][0]["strict"], true);
    let msgs = b["messages"].as_array().unwrap();
    // assistant: thinking (signed) + text + tool_use with object input.
    assert_eq!(msgs[1]["content"][0]["type"], "thinking");
    assert_eq!(msgs[1]["content"][0]["signature"], "sig-123");
    assert_eq!(msgs[1]["content"][3]["input"], json!({}));
    // All results first in ONE user message, then the user's text.
    let user = msgs[2]["content"].as_array().unwrap();
    assert_eq!(msgs[2]["role"], "user");
    assert_eq!(user[0]["type"], "tool_result");
    assert_eq!(user[0]["is_error"], false);
    assert_eq!(user[0]["content"][1]["type"], "image");
    assert_eq!(user[1]["is_error"], true);
    assert_eq!(user[2]["type"], "text");
    let text = serde_json::to_string(&b).unwrap();
    for virtual_field in [
        "processed_content",
        "display_text",
        "never sent",
        "synthesized_id",
        "execution_status",
    ] {
        assert!(!text.contains(virtual_field), "{virtual_field} leaked");
    }
}

#[test]
fn tool_choice_mapping() {
    use llmchain::conversation::{ToolChoice, ToolChoiceMode};
    let mut conv = rich_conversation();
    for (tc, par, want) in [
        (
            ToolChoice::Mode(ToolChoiceMode::Auto),
            None,
            json!({"type": "auto"}),
        ),
        (
            ToolChoice::Mode(ToolChoiceMode::None),
            Some(false),
            json!({"type": "none"}),
        ),
        (
            ToolChoice::Tool {
                name: "get_weather".into(),
            },
            None,
            json!({"type": "tool", "name": "get_weather"}),
        ),
        (
            ToolChoice::Unset,
            Some(false),
            json!({"type": "auto", "disable_parallel_tool_use": true}),
        ),
        (ToolChoice::Unset, None, Value::Null),
    ] {
        conv.tool_choice = tc;
        conv.parallel_tool_calls = par;
        assert_eq!(body(&conv)["tool_choice"], want);
    }
}

#[test]
fn decoded_message_round_trips_into_a_request() {
    let out = decode("thinking_parallel.sse");
    let mut conv = llmchain::conversation::Conversation::new();
    conv.messages.push(llmchain::message::Message::user("hi"));
    conv.messages.push(out.message);
    let b = body(&conv);
    let content = &b["messages"][1]["content"];
    assert_eq!(content[0]["type"], "thinking");
    assert_eq!(content[2]["input"], json!({"city": "Paris"}));
    assert_eq!(content[3]["input"], json!({}));
}

#[test]
fn registry_and_decode_body() {
    let reg = llmchain::provider::Format::ANTHROPIC.codec();
    assert_eq!(reg.format(), llmchain::provider::Format::ANTHROPIC);
    for name in fixture_names(F) {
        let body = fixture(F, &name);
        let (_, want) = decode_chunked(&AnthropicCodec, &body, &[], DecoderConfig::default());
        for size in [0, 1, 13] {
            let got = reg.decode_body(&body, size, DecoderConfig::default());
            assert_eq!(got, want, "{name} at {size}");
        }
    }
}

#[test]
fn provider_side_blocks_are_kept_whole_and_never_called() {
    let out = decode("server_tools.sse");
    let m = &out.message;
    // Only the client tool is a call.
    assert_eq!(m.tool_calls.len(), 1);
    assert_eq!(m.tool_calls[0].name.as_deref(), Some("get_forecast"));
    assert_eq!(m.executable_tool_calls().count(), 1);
    // The server tool's use (with the input its deltas streamed) and its result are
    // opaque parts, in order, between the texts.
    let kinds: Vec<_> = m.content.iter().map(|p| p.r#type).collect();
    assert_eq!(
        kinds,
        [
            ContentType::Text,
            ContentType::Unsupported,
            ContentType::Unsupported,
            ContentType::Text
        ]
    );
    assert_eq!(
        m.content[1].options["block"],
        json!({"type": "server_tool_use", "id": "srvtoolu_014hJH82Qum7Td6UV8gDXThB",
               "name": "web_search", "input": {"query": "weather Paris today"}})
    );
    assert_eq!(m.content[1].options["provider"], "anthropic");
    assert!(m.content[1].content.is_empty());
    assert_eq!(
        m.content[2].options["block"]["type"],
        "web_search_tool_result"
    );
    assert_eq!(m.content[3].as_text(), Some("It is 18°C with light rain. "));

    // Replayed to Anthropic as they came, before the client call.
    let mut conv = llmchain::conversation::Conversation::new();
    conv.messages
        .push(llmchain::message::Message::user("weather?"));
    conv.messages.push(m.clone());
    let body = body(&conv);
    let blocks = body["messages"][1]["content"].as_array().unwrap();
    let types: Vec<&str> = blocks.iter().map(|b| b["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "text",
            "server_tool_use",
            "web_search_tool_result",
            "text",
            "tool_use"
        ]
    );
    assert_eq!(blocks[1], m.content[1].options["block"]);
    assert_eq!(blocks[2], m.content[2].options["block"]);
}

#[test]
fn a_spliced_stream_is_an_error_and_a_repeated_start_is_not() {
    let start = |id: &str| {
        format!(
            "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"id\":\"{id}\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{{\"input_tokens\":5,\"output_tokens\":1}}}}}}\n\n"
        )
    };
    let call = |index: u32, id: &str| {
        format!(
            "event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":{index},\"content_block\":{{\"type\":\"tool_use\",\"id\":\"{id}\",\"name\":\"delete_file\",\"input\":{{}}}}}}\n\n\
             event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":{index},\"delta\":{{\"type\":\"input_json_delta\",\"partial_json\":\"{{\\\"path\\\": \\\"a\\\"}}\"}}}}\n\n\
             event: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":{index}}}\n\n"
        )
    };
    let end = "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":9}}\n\n\
               event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

    // A second message inside the first: refused whole, at any chunking.
    let spliced = format!(
        "{}{}{}{}{end}",
        start("msg_A"),
        call(0, "toolu_A"),
        start("msg_B"),
        call(1, "toolu_B")
    );
    for size in [1, 7, spliced.len()] {
        let mut d = AnthropicCodec.stream_decoder(DecoderConfig::default());
        let mut result = Ok(());
        for chunk in spliced.as_bytes().chunks(size) {
            result = d.feed(chunk, &mut |_| {});
            if result.is_err() {
                break;
            }
        }
        let err = result
            .and_then(|()| d.finish(&mut |_| {}).map(|_| ()))
            .unwrap_err();
        match &err {
            DecodeError::Spliced { first, second, .. } => {
                assert_eq!((first.as_str(), second.as_str()), ("msg_A", "msg_B"));
            }
            other => panic!("{other:?}"),
        }
        assert!(err.to_string().contains("spliced"), "{err}");
    }

    // The same message announced twice is harmless.
    let repeated = format!(
        "{}{}{}{end}",
        start("msg_A"),
        start("msg_A"),
        call(0, "toolu_A")
    );
    let (_, out) = decode_checked(&AnthropicCodec, repeated.as_bytes());
    let out = out.unwrap();
    assert_eq!(out.message.status, MessageStatus::Complete);
    assert_eq!(out.message.tool_calls.len(), 1);
}

#[test]
fn cache_control_shorthand_is_sent_as_ephemeral() {
    let conv: llmchain::conversation::Conversation = serde_json::from_value(json!({
        "version": 1,
        "tools": [{"name": "f", "description": "F.", "parameters_schema": {"type": "object"},
                   "options": {"cache_control": true}}],
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "content": "a long document", "options": {"cache_control": true}},
                {"type": "text", "content": "kept 1h", "options": {"cache_control": {"type": "ephemeral", "ttl": "1h"}}},
                {"type": "text", "content": "not cached", "options": {"cache_control": false}},
                {"type": "text", "content": "spelled", "options": {"cache_control": "ephemeral"}}
            ]}
        ]
    }))
    .unwrap();
    let b = body(&conv);
    let blocks = &b["messages"][0]["content"];
    assert_eq!(blocks[0]["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!(
        blocks[1]["cache_control"],
        json!({"type": "ephemeral", "ttl": "1h"})
    );
    assert!(blocks[2].get("cache_control").is_none());
    assert_eq!(blocks[3]["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!(b["tools"][0]["cache_control"], json!({"type": "ephemeral"}));
}

//! OpenAI Chat codec: every fixture decodes the same for every chunking, quirk by quirk
//! assertions, report snapshots, and encoded-body snapshots.

mod codec_support;

use codec_support::*;
use llmchain::message::{MessageStatus, ToolCallStatus};
use llmchain::provider::{Codec, DecodeError, DecoderConfig, Format, StopReason};
use proptest::prelude::*;
use serde_json::{Value, json};

const DIR: &str = "openai_chat";

fn chat() -> &'static dyn Codec {
    Format::OPENAI_CHAT.codec()
}

fn decode(name: &str) -> llmchain::provider::DecodeOutcome {
    let body = read(DIR, name);
    chat()
        .decode_body(&body, 0, DecoderConfig::default())
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn every_fixture_whole_and_one_byte_agree_and_match_snapshot() {
    for (name, path) in fixtures(DIR) {
        let body = std::fs::read(&path).unwrap();
        let whole = chat()
            .decode_body(&body, 0, DecoderConfig::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        if chat().is_stream_body(&body) {
            let (a, ea) = stream_with_cuts(chat(), &body, &[]);
            let (b, eb) = stream_with_cuts(chat(), &body, &one_byte_cuts(&body));
            assert_eq!(a.as_ref().unwrap(), &whole, "{name}");
            assert_eq!(b.as_ref().unwrap(), &whole, "{name}: 1-byte chunks");
            assert_eq!(ea, eb, "{name}: events");
        }
        insta::assert_json_snapshot!(format!("chat_report_{name}"), whole.report());
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
            if !chat().is_stream_body(&body) { continue; }
            let cuts: Vec<usize> = cuts.iter().map(|c| c.index(body.len() + 1)).collect();
            let (a, ea) = stream_with_cuts(chat(), &body, &[]);
            let (b, eb) = stream_with_cuts(chat(), &body, &cuts);
            prop_assert_eq!(a, b, "{}", name);
            prop_assert_eq!(ea, eb, "{}", name);
        }
    }
}

#[test]
fn single_call_with_usage_chunk() {
    let o = decode("single_call.sse");
    assert_eq!(o.message.status, MessageStatus::Complete);
    assert_eq!(o.stop_reason, Some(StopReason::ToolCalls));
    assert_eq!(o.raw_stop_reason.as_deref(), Some("tool_calls"));
    let c = &o.message.tool_calls[0];
    assert_eq!(c.status, ToolCallStatus::Complete);
    assert_eq!(c.call_id.as_deref(), Some("call_c91SqDXlYFuETYv8mUHzz6pp"));
    assert_eq!(
        Value::Object(c.arguments_as_map()),
        json!({"city":"Edinburgh","country":"UK","units":"c"})
    );
    let u = o.usage.unwrap();
    assert_eq!((u.input_tokens, u.output_tokens), (76, 24));
}

#[test]
fn obfuscated_chunks_decode_like_plain_ones() {
    // OpenAI's `stream_options.include_obfuscation` (on by default) closes every chunk
    // with a random `obfuscation` string, here after a null `usage`: the stream decodes
    // as it does without them, whole (runs of fragments in bulk) or a byte at a time.
    let plain = read(DIR, "parallel_calls.sse");
    let obfuscated = read(DIR, "obfuscated_parallel_calls.sse");
    assert_ne!(plain, obfuscated);
    let expect = stream_with_cuts(chat(), &plain, &[]);
    assert!(expect.0.as_ref().unwrap().message.tool_calls.len() == 2);
    assert_eq!(stream_with_cuts(chat(), &obfuscated, &[]), expect);
    assert_eq!(
        stream_with_cuts(chat(), &obfuscated, &one_byte_cuts(&obfuscated)),
        expect
    );
}

#[test]
fn parallel_calls_by_index() {
    let r = decode("parallel_calls.sse").report();
    assert_eq!(r.tool_calls.len(), 2);
    assert_eq!(r.tool_calls[1].arguments["city"], "New York City");
}

#[test]
fn mistral_whole_calls_without_index() {
    let o = decode("mistral_whole_calls.sse");
    let ids: Vec<_> = o
        .message
        .tool_calls
        .iter()
        .map(|c| c.call_id.clone().unwrap())
        .collect();
    assert_eq!(ids, ["gSIMJiOkT", "Xb7QpL2mZ"]);
    assert!(o.message.tool_calls.iter().all(|c| c.is_complete()));
    assert_eq!(o.usage.unwrap().input_tokens, 124);
}

#[test]
fn deepseek_reasoning_is_kept_apart() {
    let r = decode("deepseek_reasoning.sse").report();
    assert_eq!(r.text, "");
    assert_eq!(
        r.reasoning.as_deref(),
        Some("The user wants the weather in Hangzhou; call get_weather.")
    );
    assert_eq!(r.tool_calls[0].arguments["location"], "Hangzhou");
    assert_eq!(r.usage.unwrap().output_tokens, 83);
}

#[test]
fn llamacpp_function_id_repeated_name_and_object_arguments() {
    let r = decode("llamacpp_object_args.sse").report();
    assert_eq!(r.tool_calls.len(), 2, "{r:?}");
    assert_eq!(r.tool_calls[0].name, "read_file");
    assert_eq!(r.tool_calls[0].arguments["path"], "/etc/hosts");
    assert_eq!(r.tool_calls[1].arguments["recursive"], false);
}

#[test]
fn vllm_empty_ids_and_a_new_id_at_an_open_index() {
    let r = decode("vllm_empty_ids_reused_index.sse").report();
    assert_eq!(r.tool_calls.len(), 2);
    assert_eq!(
        r.tool_calls[0].call_id.as_deref(),
        Some("chatcmpl-tool-3a9f0c7d1e2b4f6a8c5d")
    );
    assert_eq!(r.tool_calls[0].arguments["tz"], "Europe/Paris");
    assert_eq!(r.tool_calls[1].arguments["tz"], "Asia/Tokyo");
}

#[test]
fn gateway_index_starting_at_one() {
    let o = decode("gateway_index_starts_at_1.sse");
    assert_eq!(o.message.tool_calls.len(), 1);
    assert_eq!(o.message.tool_calls[0].index, Some(0));
    let r = o.report();
    assert_eq!(r.text, "Let me look that up.");
    assert_eq!(r.tool_calls[0].arguments["query"], "rust sse");
}

#[test]
fn repeated_ids_are_the_same_call() {
    let r = decode("repeated_ids.sse").report();
    assert_eq!(r.tool_calls.len(), 2);
    assert_eq!(
        r.tool_calls[0].arguments,
        json!({"a":12,"b":7}).as_object().unwrap().clone()
    );
    assert_eq!(r.tool_calls[1].name, "neg");
    assert_eq!(r.tool_calls[1].call_id.as_deref(), Some("1"));
}

#[test]
fn midstream_error_leaves_calls_incomplete() {
    let o = decode("openrouter_comments_midstream_error.sse");
    assert_eq!(o.message.status, MessageStatus::Cancelled);
    assert_eq!(o.stop_reason, Some(StopReason::Error));
    let r = o.report();
    assert!(r.tool_calls.is_empty());
    assert_eq!(r.incomplete_tool_calls.len(), 1);
    assert_eq!(r.error.unwrap().kind, "502");
    assert_eq!(o.message.executable_tool_calls().count(), 0);
}

#[test]
fn length_and_truncation_are_never_executable() {
    let o = decode("length_mid_arguments.sse");
    assert_eq!(o.message.status, MessageStatus::Length);
    assert_eq!(o.stop_reason, Some(StopReason::MaxTokens));
    assert_eq!(o.message.executable_tool_calls().count(), 0);
    assert_eq!(o.report().incomplete_tool_calls.len(), 1);

    let o = decode("truncated_body.sse");
    assert_eq!(o.message.status, MessageStatus::Cancelled);
    assert_eq!(o.stop_reason, None);
    let r = o.report();
    assert_eq!(r.incomplete_tool_calls[0].raw_arguments, "{\"city\":\"Os");
}

#[test]
fn crlf_no_space_and_escapes_split_across_fragments() {
    let r = decode("crlf_no_space_escapes.sse").report();
    assert_eq!(
        r.tool_calls[0].arguments["text"],
        "café \"quoted\" line1\nline2 back\\slash emoji 😀 中 直接 ünï"
    );
}

#[test]
fn empty_arguments_mean_an_empty_object() {
    let r = decode("no_argument_tools.sse").report();
    assert_eq!(r.tool_calls.len(), 2);
    assert!(r.tool_calls.iter().all(|c| c.arguments.is_empty()));
}

#[test]
fn invalid_arguments_are_reported_not_executed() {
    let o = decode("invalid_arguments.sse");
    assert_eq!(o.invalid_tool_calls.len(), 1);
    assert_eq!(o.message.executable_tool_calls().count(), 0);
}

#[test]
fn non_streaming_bodies() {
    let r = decode("response.json").report();
    assert_eq!(r.tool_calls[0].arguments["location"], "Boston, MA");
    let r = decode("mistral_response.json").report();
    assert_eq!(r.tool_calls[0].call_id.as_deref(), Some("gSIMJiOkT"));
    let r = decode("deepseek_response.json").report();
    assert_eq!(r.reasoning.as_deref(), Some("Need the weather tool."));
    let o = decode("error_response.json");
    assert_eq!(o.error.unwrap().kind, "invalid_request_error");
    assert_eq!(o.stop_reason, Some(StopReason::Error));
}

#[test]
fn wrong_format_and_malformed_bodies_are_errors() {
    let cfg = DecoderConfig::default();
    let anthropic = b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\n";
    assert!(matches!(
        chat().decode_body(anthropic, 0, cfg),
        Err(DecodeError::WrongFormat { .. })
    ));
    let responses = read("openai_responses", "text.sse");
    assert!(matches!(
        chat().decode_body(&responses, 7, cfg),
        Err(DecodeError::WrongFormat { .. })
    ));
    assert!(matches!(
        chat().decode_body(b"data: {not json\n\n", 0, cfg),
        Err(DecodeError::Malformed { .. })
    ));
    assert!(matches!(
        chat().decode_body(b"{\"object\":\"response\",\"output\":[]}", 0, cfg),
        Err(DecodeError::WrongFormat { .. })
    ));
    assert!(matches!(
        chat().decode_body(b"{\"choices\":", 0, cfg),
        Err(DecodeError::Malformed { .. })
    ));
    assert!(matches!(
        chat().decode_body(b"hello there", 0, cfg),
        Err(DecodeError::WrongFormat { .. })
    ));
}

#[test]
fn argument_cap_is_enforced() {
    let body = read(DIR, "single_call.sse");
    let cfg = DecoderConfig {
        max_argument_bytes: 16,
        ..DecoderConfig::default()
    };
    assert_eq!(
        chat().decode_body(&body, 3, cfg),
        Err(DecodeError::ArgumentsTooLarge { limit: 16 })
    );
    let cfg = DecoderConfig {
        max_line_bytes: 100,
        ..DecoderConfig::default()
    };
    assert_eq!(
        chat().decode_body(&body, 0, cfg),
        Err(DecodeError::LineTooLong { limit: 100 })
    );
}

#[test]
fn encoded_bodies_snapshot() {
    let conv = sample_conversation();
    let opts = llmchain::provider::RequestOptions {
        model: "gpt-4o".into(),
        stream: true,
        ..Default::default()
    };
    let body = chat().encode(&conv, &opts).unwrap();
    let v: Value = serde_json::from_slice(&body).unwrap();
    insta::assert_json_snapshot!("chat_encoded_conversation", v);
    // Structural checks beside the snapshot.
    let msgs = v["messages"].as_array().unwrap();
    assert_eq!(msgs[0]["role"], "system");
    let assistant = msgs.iter().find(|m| m["tool_calls"].is_array()).unwrap();
    for c in assistant["tool_calls"].as_array().unwrap() {
        let a = c["function"]["arguments"].as_str().unwrap();
        assert!(
            serde_json::from_str::<serde_json::Map<String, Value>>(a).is_ok(),
            "{a}"
        );
    }
    let pos = msgs
        .iter()
        .position(|m| m["tool_calls"].is_array())
        .unwrap();
    assert_eq!(msgs[pos + 1]["role"], "tool");
    assert_eq!(msgs[pos + 2]["role"], "tool");
    assert!(
        msgs[pos + 2]["content"]
            .as_str()
            .unwrap()
            .starts_with("Error: ")
    );
    assert_eq!(msgs[pos + 3]["role"], "user");
    assert_eq!(msgs[pos + 3]["content"][1]["type"], "image_url");
    let text = String::from_utf8(body).unwrap();
    assert!(!text.contains("processed_content") && !text.contains("is_error"));
}

pub fn sample_conversation() -> llmchain::conversation::Conversation {
    serde_json::from_value(json!({
        "version": 1,
        "system": "You are a weather bot.",
        "tools": [
            {"name": "get_weather", "description": "Get the weather.",
             "parameters_schema": {"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string"}},"required":["city"]},
             "strict": true},
            {"name": "render_chart", "description": "Render a chart.",
             "parameters_schema": {"type":"object","properties":{"series":{"type":"array","items":{"type":"number"}}}}}
        ],
        "tool_choice": "auto",
        "parallel_tool_calls": true,
        "messages": [
            {"role":"user","content":[{"type":"text","content":"Weather in Paris and a chart?"},
                                      {"type":"image","content":"iVBORw0KGgo=","options":{"media":"image/png"}}]},
            {"role":"assistant","status":"complete","content":[{"type":"thinking","content":"Two tools needed."},{"type":"text","content":"Checking."}],
             "tool_calls":[
                {"type":"function","status":"complete","call_id":"call_1","name":"get_weather","arguments":{"city":"Paris"},"metadata":{"execution_status":"completed"}},
                {"type":"function","status":"complete","call_id":"call_2","name":"render_chart","arguments":{"series":[1,2.5,3]}}]},
            {"role":"tool","tool_results":[
                {"type":"function","tool_call_id":"call_1","name":"get_weather","content":[{"type":"text","content":"18C"}],
                 "processed_content":{"temp_c":18},"is_error":false},
                {"type":"function","tool_call_id":"call_2","name":"render_chart","content":[{"type":"text","content":"chart failed: secret panic? no"},{"type":"image","content":"R0lGODlh","options":{"media":"image/gif"}}],
                 "is_error":true}]},
            {"role":"assistant","content":"It is 18C in Paris."}
        ]
    }))
    .unwrap()
}

#[test]
fn calls_without_ids_get_synthetic_ids_shown_as_null() {
    let o = decode("vllm_missing_ids.sse");
    let c = &o.message.tool_calls[0];
    assert!(c.is_complete());
    assert!(c.call_id.as_deref().unwrap().starts_with("call_"));
    assert_eq!(c.metadata["synthetic_call_id"], json!(true));
    let r = o.report();
    assert_eq!(r.tool_calls[0].call_id, None);
    assert_eq!(r.tool_calls[0].arguments["tz"], "UTC");
    // Deterministic: the same body gives the same id.
    assert_eq!(
        decode("vllm_missing_ids.sse").message.tool_calls[0].call_id,
        c.call_id
    );
}

/// Several text blocks of one result (an MCP server's) reach a one-string wire
/// separated, never glued ("Resource 3:Resource 3: This is…").
#[test]
fn text_blocks_of_a_result_stay_apart() {
    let conv: llmchain::conversation::Conversation = serde_json::from_value(json!({
        "version": 1,
        "messages": [
            {"role": "user", "content": "read it"},
            {"role": "assistant", "status": "complete", "tool_calls": [
                {"type": "function", "status": "complete", "call_id": "c1", "name": "read", "arguments": {}}]},
            {"role": "tool", "tool_results": [{"type": "function", "tool_call_id": "c1", "name": "read",
                "content": [{"type": "text", "content": "Resource 3:"},
                            {"type": "text", "content": "Resource 3: This is a text resource."}]}]}
        ]
    }))
    .unwrap();
    for format in [
        Format::OPENAI_CHAT,
        Format::OPENAI_RESPONSES,
        Format::GEMINI,
        Format::OLLAMA,
    ] {
        let body = format
            .codec()
            .encode(&conv, &llmchain::provider::RequestOptions::default())
            .unwrap();
        let text = String::from_utf8(body).unwrap();
        assert!(
            !text.contains("Resource 3:Resource 3"),
            "{format:?}: {text}"
        );
        assert!(
            text.contains(r"Resource 3:\n\nResource 3: This"),
            "{format:?}: {text}"
        );
    }
}

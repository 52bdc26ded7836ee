//! Gemini codec: fixtures decoded under every chunking, schema rewrite, request encoding.

mod codec_support;

use codec_support::*;
use llmchain::message::{ContentType, MessageStatus, TokenUsage};
use llmchain::provider::{
    Codec, DecodeError, DecodeOutcome, DecoderConfig, GeminiCodec, RequestOptions, StopReason,
};
use proptest::prelude::*;
use serde_json::{Value, json};

const F: &str = "gemini";

fn decode(name: &str) -> DecodeOutcome {
    let body = fixture(F, name);
    let (_, streamed) = decode_checked(&GeminiCodec, &body);
    let streamed = streamed.unwrap();
    if name.ends_with(".json") {
        let whole = GeminiCodec
            .decode_response(&body, DecoderConfig::default())
            .unwrap();
        assert_eq!(streamed, whole);
    }
    streamed
}

#[test]
fn reports_snapshot() {
    for name in fixture_names(F) {
        let out = decode(&name);
        insta::assert_json_snapshot!(format!("gemini_decode_{name}"), out.report());
    }
}

#[test]
fn parallel_calls_with_one_name_stay_separate() {
    let out = decode("parallel_calls.sse");
    let m = &out.message;
    assert_eq!(m.status, MessageStatus::Complete);
    assert_eq!(m.tool_calls.len(), 2);
    let ids: Vec<_> = m
        .tool_calls
        .iter()
        .map(|c| c.call_id.clone().unwrap())
        .collect();
    assert_ne!(ids[0], ids[1]);
    assert!(
        ids[0].starts_with("call_") && ids[0].ends_with("_0"),
        "{ids:?}"
    );
    assert_eq!(m.tool_calls[0].metadata["synthesized_id"], true);
    assert_eq!(m.tool_calls[1].arguments_as_map()["city"], "Tokyo");
    assert_eq!(out.stop_reason, Some(StopReason::ToolCalls));
    assert_eq!(out.raw_stop_reason.as_deref(), Some("STOP"));
    // Thoughts count as output, and are kept apart too.
    assert_eq!(
        out.usage,
        Some(TokenUsage::new(64, 71).with_reasoning(Some(40)))
    );
    assert_eq!(m.executable_tool_calls().count(), 2);
}

#[test]
fn gemini3_thoughts_and_signatures() {
    let out = decode("gemini3_thought_calls.sse");
    let m = &out.message;
    assert_eq!(m.content[0].r#type, ContentType::Thinking);
    assert!(m.content[0].content.contains("Zürich"));
    assert_eq!(
        m.tool_calls[0].metadata["thought_signature"],
        "EskgCsYgAdHtim9f4W1i0QcIFhNl+/="
    );
    assert!(!m.tool_calls[1].metadata.contains_key("thought_signature"));
    // The final empty text part keeps its signature.
    let last = m.content.last().unwrap();
    assert_eq!(last.r#type, ContentType::Text);
    assert_eq!(last.options["thought_signature"], "CiQB0e2Kb9xyz+end=");
    assert_eq!(out.stop_reason, Some(StopReason::ToolCalls));
    // Calls came in different events, yet both are executable.
    assert_eq!(m.executable_tool_calls().count(), 2);
}

#[test]
fn stops_and_errors() {
    let out = decode("max_tokens.sse");
    assert_eq!(out.message.status, MessageStatus::Length);
    assert!(!out.message.is_tool_call());
    let out = decode("error_midstream.sse");
    assert_eq!(out.message.status, MessageStatus::Cancelled);
    assert_eq!(out.error.as_ref().unwrap().kind, "UNAVAILABLE");
    assert_eq!(out.message.text().as_deref(), Some("Working on"));
    let out = decode("safety.json");
    assert_eq!(out.stop_reason, Some(StopReason::ContentFilter));
    let out = decode("malformed_call.json");
    assert_eq!(out.stop_reason, Some(StopReason::Error));
    assert_eq!(
        out.raw_stop_reason.as_deref(),
        Some("MALFORMED_FUNCTION_CALL")
    );
    let out = decode("blocked_prompt.json");
    assert_eq!(out.stop_reason, Some(StopReason::ContentFilter));
    assert_eq!(out.raw_stop_reason.as_deref(), Some("PROHIBITED_CONTENT"));
    let out = decode("error.json");
    assert_eq!(out.error.unwrap().kind, "INVALID_ARGUMENT");
    let out = decode("no_args_call.sse");
    let c = &out.message.tool_calls[0];
    assert!(
        c.is_complete(),
        "an empty id counts as none, missing args mean {{}}"
    );
    assert_eq!(c.call_id.as_deref(), Some("call_0"));
    assert!(c.arguments_as_map().is_empty());
}

#[test]
fn whole_responses_and_arrays() {
    let out = decode("response.json");
    let m = &out.message;
    assert_eq!(m.content[0].signature(), Some("sig-thought-1"));
    assert_eq!(
        m.tool_calls[0].metadata["thought_signature"],
        "EskgCsYgAdHtim9f"
    );
    assert_eq!(m.tool_calls[1].call_id.as_deref(), Some("fc-given-1"));
    assert!(!m.tool_calls[1].metadata.contains_key("synthesized_id"));
    assert_eq!(
        out.usage,
        Some(TokenUsage::new(29, 908).with_reasoning(Some(893)))
    );
    let out = decode("array_stream.json");
    assert_eq!(out.message.text().as_deref(), Some("Sure: "));
    assert_eq!(out.message.tool_calls[0].arguments_as_map()["city"], "Oslo");
}

#[test]
fn wrong_and_hostile_input() {
    let c = GeminiCodec;
    let (_, out) = decode_chunked(
        &c,
        b"data: {\"type\":\"message_start\"}\n\n",
        &[],
        DecoderConfig::default(),
    );
    assert!(
        matches!(out, Err(DecodeError::WrongFormat { .. })),
        "{out:?}"
    );
    let (_, out) = decode_chunked(&c, b"data: [1,2]\n\n", &[], DecoderConfig::default());
    assert!(
        matches!(out, Err(DecodeError::WrongFormat { .. })),
        "{out:?}"
    );
    let cfg = DecoderConfig {
        max_argument_bytes: 10,
        ..Default::default()
    };
    let (_, out) = decode_chunked(&c, &fixture(F, "parallel_calls.sse"), &[5], cfg);
    assert_eq!(
        out.unwrap_err(),
        DecodeError::ArgumentsTooLarge { limit: 10 }
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn any_chunking_gives_the_same_result(sizes in proptest::collection::vec(1usize..48, 1..12)) {
        for name in fixture_names(F) {
            let body = fixture(F, &name);
            let whole = decode_chunked(&GeminiCodec, &body, &[], DecoderConfig::default());
            let chunked = decode_chunked(&GeminiCodec, &body, &sizes, DecoderConfig::default());
            prop_assert_eq!(&whole, &chunked, "{}", name);
        }
    }
}

fn body(conv: &llmchain::conversation::Conversation, model: &str) -> Value {
    let opts = RequestOptions {
        model: model.into(),
        stream: true,
        max_tokens: Some(1024),
        ..Default::default()
    };
    serde_json::from_slice(&GeminiCodec.encode(conv, &opts).unwrap()).unwrap()
}

#[test]
fn encode_snapshots_and_rules() {
    let conv = rich_conversation();
    let b = body(&conv, "gemini-2.5-flash");
    insta::assert_json_snapshot!("gemini_encode_rich_2_5", b);
    let b3 = body(&conv, "gemini-3-pro-preview");
    insta::assert_json_snapshot!("gemini_encode_rich_3", b3);

    assert_eq!(
        b["systemInstruction"]["parts"][0]["text"],
        "You are a careful assistant."
    );
    let decl = &b["tools"][0]["functionDeclarations"];
    // A schema with a `$ref` goes as JSON Schema, as it is (never inlined), but for its
    // `$schema` marker.
    assert!(decl[0].get("parameters").is_none());
    let mut sent = conv.tools[0].parameters_schema.clone();
    sent.as_object_mut().unwrap().remove("$schema");
    assert_eq!(decl[0]["parametersJsonSchema"], sent);
    assert!(decl[1].get("parameters").is_none());
    assert!(decl[1].get("parametersJsonSchema").is_none());
    assert_eq!(b["toolConfig"]["functionCallingConfig"]["mode"], "ANY");
    let contents = b["contents"].as_array().unwrap();
    assert_eq!(contents[1]["role"], "model");
    let model_parts = contents[1]["parts"].as_array().unwrap();
    assert_eq!(model_parts[0]["thought"], true);
    assert_eq!(
        model_parts[2]["functionCall"]["args"],
        json!({"city": "Paris", "unit": "celsius"})
    );
    assert_eq!(model_parts[2]["thoughtSignature"], "gem-sig-1");
    assert_eq!(model_parts[3]["functionCall"]["args"], json!({}));
    // Results in call order (call_1 first although answered second), errors as `error`.
    let user = contents[2]["parts"].as_array().unwrap();
    assert_eq!(contents[2]["role"], "user");
    assert_eq!(user[0]["functionResponse"]["name"], "get_weather");
    assert_eq!(
        user[0]["functionResponse"]["response"],
        json!({"error": "weather service unavailable"})
    );
    assert_eq!(user[1]["functionResponse"]["name"], "screenshot");
    assert_eq!(
        user[1]["functionResponse"]["response"],
        json!({"output": "Screenshot taken."})
    );
    // Gemini 2.x: the image follows the responses; the user's text after that.
    assert_eq!(user[2]["inlineData"]["mimeType"], "image/png");
    assert_eq!(user[3]["text"], "Thanks. And Oslo?");
    // Gemini 3: the image goes inside the result.
    let user3 = b3["contents"][2]["parts"].as_array().unwrap();
    assert_eq!(
        user3[1]["functionResponse"]["parts"][0]["inlineData"]["data"],
        "iVBORw0KGgo="
    );
    // A synthesised id is never echoed; a wire id is.
    assert!(contents[3]["parts"][0]["functionCall"].get("id").is_none());
    assert!(
        contents[4]["parts"][0]["functionResponse"]
            .get("id")
            .is_none()
    );
    assert_eq!(user[0]["functionResponse"]["id"], "call_1");
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

/// Level i references level i+1 twice: 2^levels copies if inlined.
fn doubling(levels: usize) -> Value {
    let mut defs = serde_json::Map::new();
    for i in 0..levels {
        let next = format!("#/$defs/L{}", i + 1);
        defs.insert(
            format!("L{i}"),
            json!({"type": "object", "properties": {"a": {"$ref": next}, "b": {"$ref": next}}}),
        );
    }
    defs.insert(format!("L{levels}"), json!({"type": "string"}));
    json!({"type": "object", "properties": {"root": {"$ref": "#/$defs/L0"}}, "$defs": defs})
}

#[test]
fn schemas_with_refs_go_as_json_schema_and_never_grow() {
    // Round 5: an 18-level chain of double references was a 16 MB body; 28 levels ran
    // the machine out of memory. Now the schema goes as it is.
    let schema = doubling(28);
    let schema_len = serde_json::to_vec(&schema).unwrap().len();
    let mut conv: llmchain::conversation::Conversation = serde_json::from_value(json!({
        "tools": [{"name": "deep", "description": "d", "parameters_schema": schema},
                  {"name": "flat", "parameters_schema": {"type": "object",
                     "properties": {"n": {"type": ["integer", "null"]}}, "additionalProperties": false}}],
        "messages": [{"role": "user", "content": "go"}]
    }))
    .unwrap();
    let b = body(&conv, "gemini-2.5-flash");
    let len = serde_json::to_vec(&b).unwrap().len();
    assert!(
        len < schema_len + 1024,
        "{len} bytes for a {schema_len}-byte schema"
    );
    let decl = &b["tools"][0]["functionDeclarations"];
    assert_eq!(
        decl[0]["parametersJsonSchema"],
        conv.tools[0].parameters_schema
    );
    // A schema without references is still rewritten for `parameters`.
    assert_eq!(
        decl[1]["parameters"],
        json!({"type": "object", "properties": {"n": {"type": "integer", "nullable": true}}})
    );

    // A typed answer alone: `responseJsonSchema` with references, `responseSchema` without.
    conv.tools.clear();
    conv.response_format = Some(llmchain::conversation::ResponseFormat::new(
        "answer",
        doubling(28),
    ));
    let b = body(&conv, "gemini-2.5-flash");
    assert!(serde_json::to_vec(&b).unwrap().len() < schema_len + 1024);
    assert_eq!(b["generationConfig"]["responseJsonSchema"], doubling(28));
    assert!(b["generationConfig"].get("responseSchema").is_none());
    conv.response_format = Some(llmchain::conversation::ResponseFormat::new(
        "answer",
        json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
    ));
    let b = body(&conv, "gemini-2.5-flash");
    assert_eq!(
        b["generationConfig"]["responseSchema"],
        json!({"type": "object", "properties": {"n": {"type": "integer"}}})
    );
    assert!(b["generationConfig"].get("responseJsonSchema").is_none());

    // The rewrite itself, asked directly, refuses within its budget.
    assert!(llmchain::provider::gemini_schema(&doubling(28)).is_err());
}

#[test]
fn decoded_calls_round_trip_with_signatures() {
    let out = decode("gemini3_thought_calls.sse");
    let mut conv = llmchain::conversation::Conversation::new();
    conv.messages.push(llmchain::message::Message::user(
        "weather and time in Zürich",
    ));
    let calls = out.message.tool_calls.clone();
    conv.messages.push(out.message);
    conv.messages.push(llmchain::message::Message::tool(vec![
        llmchain::message::ToolResult::text(calls[1].call_id.clone().unwrap(), "14:00"),
        llmchain::message::ToolResult::text(calls[0].call_id.clone().unwrap(), "12C"),
    ]));
    let b = body(&conv, "gemini-3-pro-preview");
    let parts = b["contents"][1]["parts"].as_array().unwrap();
    // Unsigned thought text is not replayed; the signed parts keep their order.
    assert_eq!(parts.len(), 3);
    assert_eq!(
        parts[0]["thoughtSignature"],
        "EskgCsYgAdHtim9f4W1i0QcIFhNl+/="
    );
    assert!(parts[0]["functionCall"].get("id").is_none());
    assert!(parts[1].get("thoughtSignature").is_none());
    assert_eq!(
        parts[2],
        json!({"text": "", "thoughtSignature": "CiQB0e2Kb9xyz+end="})
    );
    let responses = b["contents"][2]["parts"].as_array().unwrap();
    assert_eq!(responses[0]["functionResponse"]["name"], "get_weather");
    assert_eq!(responses[1]["functionResponse"]["name"], "get_time");
}

#[test]
fn registry_and_decode_body() {
    let reg = llmchain::provider::Format::GEMINI.codec();
    assert_eq!(reg.format(), llmchain::provider::Format::GEMINI);
    for name in fixture_names(F) {
        let body = fixture(F, &name);
        let (_, want) = decode_chunked(&GeminiCodec, &body, &[], DecoderConfig::default());
        for size in [0, 1, 13] {
            let got = reg.decode_body(&body, size, DecoderConfig::default());
            assert_eq!(got, want, "{name} at {size}");
        }
    }
}

//! Fixture files, decoding in chunks of given sizes, the "any chunking gives the same
//! result" check, and a conversation using every feature (for the encoders).

use std::path::PathBuf;

use llmchain::conversation::{Conversation, ToolChoice, ToolDefinition};
use llmchain::message::{ContentPart, Message, ToolCall, ToolResult};
use llmchain::provider::{Codec, DecodeError, DecodeOutcome, DecoderConfig};
use serde_json::json;

/// The bytes of `tests/fixtures/<format>/<name>`.
pub(crate) fn fixture(format: &str, name: &str) -> Vec<u8> {
    let p: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "tests",
        "fixtures",
        format,
        name,
    ]
    .iter()
    .collect();
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Every fixture file name of `format`, sorted.
pub(crate) fn fixture_names(format: &str) -> Vec<String> {
    let dir: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "fixtures", format]
        .iter()
        .collect();
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// What a decode produced: the events (rendered with `Debug`, so owned) and the outcome.
pub(crate) type Decoded = (Vec<String>, Result<DecodeOutcome, DecodeError>);

/// Streams `body` through a fresh decoder in chunks of the given sizes (cycled; the
/// whole body when empty).
pub(crate) fn decode_chunked(
    codec: &dyn Codec,
    body: &[u8],
    sizes: &[usize],
    config: DecoderConfig,
) -> Decoded {
    let mut events = Vec::new();
    let mut d = codec.stream_decoder(config);
    let mut on = |e: llmchain::provider::StreamEvent<'_>| events.push(format!("{e:?}"));
    let mut rest = body;
    let mut i = 0;
    while !rest.is_empty() {
        let n = if sizes.is_empty() {
            rest.len()
        } else {
            sizes[i % sizes.len()].clamp(1, rest.len())
        };
        i += 1;
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        if let Err(e) = d.feed(chunk, &mut on) {
            return (events, Err(e));
        }
    }
    let out = d.finish(&mut on);
    (events, out)
}

/// Decodes `body` whole, then in 1-byte chunks, and asserts both agree.
pub(crate) fn decode_checked(codec: &dyn Codec, body: &[u8]) -> Decoded {
    let whole = decode_chunked(codec, body, &[], DecoderConfig::default());
    let bytes = decode_chunked(codec, body, &[1], DecoderConfig::default());
    assert_eq!(whole, bytes, "1-byte chunking differs");
    whole
}

/// The rich conversation every encoder snapshot uses.
pub(crate) fn rich_conversation() -> Conversation {
    let mut conv: Conversation = serde_json::from_value(json!({
        "version": 1,
        "system": "You are a careful assistant.",
        "tools": [
            {"name": "get_weather", "description": "Get the current weather for a city.",
             "parameters_schema": {"$schema": "https://json-schema.org/draft/2020-12/schema",
               "type": "object",
               "properties": {"city": {"type": "string"},
                              "unit": {"$ref": "#/$defs/Unit"},
                              "days": {"type": ["integer", "null"]}},
               "required": ["city"], "additionalProperties": false,
               "$defs": {"Unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}},
             "strict": true,
             "options": {"cache_control": {"type": "ephemeral"}}},
            {"name": "screenshot", "description": "Take a screenshot."}
        ],
        "tool_choice": "required",
        "parallel_tool_calls": false,
        "messages": []
    }))
    .unwrap();
    let calls = vec![
        ToolCall::function(
            "call_1",
            "get_weather",
            json!({"city": "Paris", "unit": "celsius"}),
        )
        .unwrap(),
        // Raw text that is an object: sent as an object, never a string.
        ToolCall {
            call_id: Some("call_2".into()),
            name: Some("screenshot".into()),
            arguments: Some("{}".into()),
            ..Default::default()
        },
    ];
    let mut thinking =
        ContentPart::thinking("Two tools are needed.").with_option("signature", "sig-123");
    thinking.options.insert("x".into(), json!(1));
    let mut assistant =
        Message::assistant_with_calls(vec![thinking, ContentPart::text("Checking.")], calls);
    assistant.tool_calls[0]
        .metadata
        .insert("thought_signature".into(), json!("gem-sig-1"));
    let results = Message::tool(vec![
        // Out of call order on purpose: Gemini must reorder, Anthropic keep all first.
        ToolResult::success(
            "call_2",
            vec![
                ContentPart::text("Screenshot taken."),
                ContentPart::image("iVBORw0KGgo=", "image/png"),
            ],
        )
        .with_option("cache_control", json!({"type": "ephemeral"}))
        .with_processed_content(json!({"never": "sent"}))
        .with_display_text("never sent"),
        ToolResult::error("call_1", "weather service unavailable").with_name("get_weather"),
    ]);
    // A Gemini-style call whose id the decoder made up: the id is never echoed.
    let mut synth =
        ToolCall::function("call_0a1b2c3d_0", "get_weather", json!({"city": "Oslo"})).unwrap();
    synth.metadata.insert("synthesized_id".into(), json!(true));
    conv.messages = vec![
        Message::user(vec![
            ContentPart::text("Weather in Paris? Also a screenshot."),
            ContentPart::image_url("https://example.com/map.png"),
        ]),
        assistant,
        results,
        Message::user("Thanks. And Oslo?"),
        Message::assistant_with_calls("", vec![synth]),
        Message::tool(vec![ToolResult::text("call_0a1b2c3d_0", "{\"temp_c\": 3}")]),
    ];
    conv.tool_choice = ToolChoice::Mode(llmchain::conversation::ToolChoiceMode::Required);
    let _: &ToolDefinition = &conv.tools[0];
    conv
}

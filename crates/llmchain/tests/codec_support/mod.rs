//! Helpers shared by the codec integration tests: decode a body with any chunking and
//! summarise the events so chunkings can be compared.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use llmchain::provider::{Codec, DecodeOutcome, DecoderConfig, StreamEvent};

/// What the events of a decode add up to (independent of chunking).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct EventSummary {
    pub text: BTreeMap<usize, String>,
    pub reasoning: BTreeMap<usize, String>,
    pub started: Vec<(u32, Option<String>, String)>,
    pub arguments: BTreeMap<u32, String>,
    pub finished: Vec<u32>,
    pub stops: Vec<String>,
    pub errors: Vec<(String, String)>,
    pub usage_events: usize,
}

impl EventSummary {
    pub fn add(&mut self, e: StreamEvent<'_>) {
        match e {
            StreamEvent::TextDelta { index, text } => {
                self.text.entry(index).or_default().push_str(&text)
            }
            StreamEvent::ReasoningDelta { index, text } => {
                self.reasoning.entry(index).or_default().push_str(&text)
            }
            StreamEvent::ReasoningSignature { .. } => {}
            StreamEvent::ToolCallStarted {
                index,
                call_id,
                name,
            } => self
                .started
                .push((index, call_id.map(|c| c.into_owned()), name.into_owned())),
            StreamEvent::ToolCallArguments { index, fragment } => {
                self.arguments.entry(index).or_default().push_str(&fragment)
            }
            StreamEvent::ToolCallFinished { index } => self.finished.push(index),
            StreamEvent::Usage(_) => self.usage_events += 1,
            StreamEvent::Stop { reason, raw } => self.stops.push(format!("{reason:?}:{raw}")),
            StreamEvent::Error { kind, message } => {
                self.errors.push((kind.into_owned(), message.into_owned()))
            }
        }
    }
}

/// Streams `body` through the codec's decoder cut at `cuts` (sorted byte offsets).
pub fn stream_with_cuts(
    codec: &dyn Codec,
    body: &[u8],
    cuts: &[usize],
) -> (Result<DecodeOutcome, String>, EventSummary) {
    let mut dec = codec.stream_decoder(DecoderConfig::default());
    let mut summary = EventSummary::default();
    let mut last = 0;
    let mut bounds: Vec<usize> = cuts.iter().copied().filter(|&c| c <= body.len()).collect();
    bounds.sort_unstable();
    bounds.push(body.len());
    for b in bounds {
        if let Err(e) = dec.feed(&body[last..b], &mut |e| summary.add(e)) {
            return (Err(e.to_string()), summary);
        }
        last = b;
    }
    let out = dec
        .finish(&mut |e| summary.add(e))
        .map_err(|e| e.to_string());
    (out, summary)
}

pub fn one_byte_cuts(body: &[u8]) -> Vec<usize> {
    (1..body.len()).collect()
}

pub fn fixtures(dir: &str) -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir);
    let mut v: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), p))
        .collect();
    v.sort();
    v
}

pub fn read(dir: &str, name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(dir)
            .join(name),
    )
    .unwrap()
}

// ---- helpers of the Anthropic/Gemini/Ollama tests ----

use llmchain::conversation::{Conversation, ToolChoice, ToolDefinition};
use llmchain::message::{ContentPart, Message, ToolCall, ToolResult};
use llmchain::provider::DecodeError;
use serde_json::json;

/// The bytes of `tests/fixtures/<format>/<name>`.
pub fn fixture(format: &str, name: &str) -> Vec<u8> {
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
pub fn fixture_names(format: &str) -> Vec<String> {
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
pub type Decoded = (Vec<String>, Result<DecodeOutcome, DecodeError>);

/// Streams `body` through a fresh decoder in chunks of the given sizes (cycled; the
/// whole body when empty).
pub fn decode_chunked(
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
pub fn decode_checked(codec: &dyn Codec, body: &[u8]) -> Decoded {
    let whole = decode_chunked(codec, body, &[], DecoderConfig::default());
    let bytes = decode_chunked(codec, body, &[1], DecoderConfig::default());
    assert_eq!(whole, bytes, "1-byte chunking differs");
    whole
}

/// The rich conversation every encoder snapshot uses.
pub fn rich_conversation() -> Conversation {
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

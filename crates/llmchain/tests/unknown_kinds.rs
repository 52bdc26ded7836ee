//! Forward-compatible decoding: every decoder fed events, items, blocks, parts and
//! fields of kinds it does not know, holding every JSON type, reads the text and the
//! calls it does know exactly as without them, and never mistakes them for calls.

use llmchain::message::{ContentType, MessageStatus};
use llmchain::provider::{DecodeOutcome, DecoderConfig, Format, StopReason};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

mod codec_support;
use codec_support::fixture;

/// What must not change: the text, the calls (id, name, arguments), the status and
/// the stop reason.
type Known = (
    Option<String>,
    Vec<(Option<String>, Option<String>, Map<String, Value>)>,
    MessageStatus,
    Option<StopReason>,
);

fn known(out: &DecodeOutcome) -> Known {
    let m = &out.message;
    let calls = m
        .tool_calls
        .iter()
        .map(|c| (c.call_id.clone(), c.name.clone(), c.arguments_as_map()))
        .collect();
    (m.text(), calls, m.status, out.stop_reason)
}

fn decode(format: Format, body: &[u8]) -> DecodeOutcome {
    format
        .codec()
        .decode_body(body, 0, DecoderConfig::default())
        .unwrap_or_else(|e| panic!("{e}\n{}", String::from_utf8_lossy(body)))
}

/// Any JSON value: every type, nested.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        ".{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Fields with names the format's own fields may have (so every known field is tried
/// with every JSON type) or no format has.
fn any_fields(names: &'static [&'static str]) -> impl Strategy<Value = Map<String, Value>> {
    let name = prop_oneof![
        prop::sample::select(names).prop_map(str::to_owned),
        "zz_[a-z]{1,6}",
    ];
    prop::collection::btree_map(name, any_json(), 0..5).prop_map(|m| m.into_iter().collect())
}

/// `base` with `extra` events put between its events (SSE), at the given places.
fn sse_with(base: &[u8], extra: &[(usize, Value)]) -> Vec<u8> {
    let text = String::from_utf8(base.to_vec())
        .unwrap()
        .replace("\r\n", "\n");
    let events: Vec<&str> = text
        .split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .collect();
    let mut out = String::new();
    for (i, e) in events.iter().enumerate() {
        for (_, v) in extra.iter().filter(|(at, _)| at % (events.len() + 1) == i) {
            out.push_str(&format!("data: {v}\n\n"));
        }
        out.push_str(e);
        out.push_str("\n\n");
    }
    for (_, v) in extra
        .iter()
        .filter(|(at, _)| at % (events.len() + 1) == events.len())
    {
        out.push_str(&format!("data: {v}\n\n"));
    }
    out.into_bytes()
}

/// `base` with `extra` lines put between its lines (NDJSON).
fn ndjson_with(base: &[u8], extra: &[(usize, Value)]) -> Vec<u8> {
    let text = String::from_utf8(base.to_vec()).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        for (_, v) in extra.iter().filter(|(at, _)| at % lines.len() == i) {
            out.push_str(&format!("{v}\n"));
        }
        out.push_str(l);
        out.push('\n');
    }
    out.into_bytes()
}

fn with_type(ty: &str, mut fields: Map<String, Value>) -> Value {
    fields.insert("type".into(), Value::String(ty.into()));
    Value::Object(fields)
}

const ANTHROPIC_FIELDS: &[&str] = &[
    "index",
    "delta",
    "content_block",
    "message",
    "usage",
    "error",
    "text",
    "id",
    "name",
    "input",
    "partial_json",
    "stop_reason",
];

fn anthropic_extra() -> impl Strategy<Value = Value> {
    prop_oneof![
        // An event of a kind added later.
        ("zz_[a-z_]{0,8}", any_fields(ANTHROPIC_FIELDS)).prop_map(|(t, f)| with_type(&t, f)),
        // A block of a kind added later, at an index of its own.
        (900u64..999, "zz_[a-z_]{0,8}", any_fields(ANTHROPIC_FIELDS)).prop_map(|(i, t, f)| {
            json!({"type": "content_block_start", "index": i, "content_block": with_type(&t, f)})
        }),
        // A delta of a kind added later, for a block of the message.
        (0u64..3, "zz_[a-z_]{0,8}", any_fields(ANTHROPIC_FIELDS)).prop_map(|(i, t, f)| {
            json!({"type": "content_block_delta", "index": i, "delta": with_type(&t, f)})
        }),
    ]
}

const RESPONSES_FIELDS: &[&str] = &[
    "item_id",
    "delta",
    "arguments",
    "item",
    "response",
    "message",
    "code",
    "error",
    "output_index",
    "name",
    "call_id",
    "id",
    "content",
    "summary",
];

fn responses_extra() -> impl Strategy<Value = Value> {
    prop_oneof![
        ("response\\.zz_[a-z_.]{0,8}", any_fields(RESPONSES_FIELDS))
            .prop_map(|(t, f)| with_type(&t, f)),
        ("zz_[a-z_]{0,8}", any_fields(RESPONSES_FIELDS)).prop_map(|(t, f)| with_type(&t, f)),
        // An output item of a kind added later (a hosted tool's call).
        (
            prop::sample::select(&["response.output_item.added", "response.output_item.done"][..]),
            "zz_[a-z_]{0,8}_call",
            any_fields(RESPONSES_FIELDS),
        )
            .prop_map(
                |(ev, t, f)| json!({"type": ev, "output_index": 9, "item": with_type(&t, f)})
            ),
    ]
}

const CHAT_FIELDS: &[&str] = &["zz_annotations", "zz_audio", "zz_logprobs"];

fn chat_extra() -> impl Strategy<Value = Value> {
    (
        any_fields(CHAT_FIELDS),
        any_fields(CHAT_FIELDS),
        any_fields(CHAT_FIELDS),
    )
        .prop_map(|(top, choice, delta)| {
            let mut choice = choice;
            choice.insert("index".into(), json!(0));
            choice.insert("delta".into(), Value::Object(delta));
            let mut top = top;
            top.insert("object".into(), json!("chat.completion.chunk"));
            top.insert("choices".into(), json!([choice]));
            Value::Object(top)
        })
}

fn gemini_extra() -> impl Strategy<Value = Value> {
    (
        "zz[A-Z][a-z]{0,8}",
        any_json(),
        any_fields(&["zzGrounding"]),
    )
        .prop_map(|(kind, value, top)| {
            let mut top = top;
            top.insert(
                "candidates".into(),
                json!([{"content": {"parts": [{kind: value}], "role": "model"}, "index": 0}]),
            );
            Value::Object(top)
        })
}

fn ollama_extra() -> impl Strategy<Value = Value> {
    (any_fields(&["zz_images"]), any_fields(&["zz_stats"])).prop_map(|(message, top)| {
        let mut message = message;
        message.insert("role".into(), json!("assistant"));
        message.insert("content".into(), json!(""));
        let mut top = top;
        top.insert("model".into(), json!("qwen3"));
        top.insert("message".into(), Value::Object(message));
        top.insert("done".into(), json!(false));
        Value::Object(top)
    })
}

/// Decodes `base` and `base` with `extra`, and checks that the known part agrees and
/// nothing unknown became a call.
fn check(format: Format, base: &[u8], with: Vec<u8>) {
    let want = decode(format, base);
    let got = decode(format, &with);
    assert_eq!(
        known(&got),
        known(&want),
        "{}",
        String::from_utf8_lossy(&with)
    );
    assert_eq!(got.message.tool_calls.len(), want.message.tool_calls.len());
    // Whatever else was kept is opaque, never text.
    for p in &got.message.content {
        assert!(
            matches!(
                p.r#type,
                ContentType::Text | ContentType::Thinking | ContentType::Unsupported
            ),
            "{p:?}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn anthropic_reads_around_unknown_kinds(
        extra in prop::collection::vec((0usize..64, anthropic_extra()), 1..6),
    ) {
        let base = fixture("anthropic", "thinking_parallel.sse");
        check(Format::ANTHROPIC, &base, sse_with(&base, &extra));
    }

    #[test]
    fn responses_reads_around_unknown_kinds(
        extra in prop::collection::vec((0usize..64, responses_extra()), 1..6),
    ) {
        let base = fixture("openai_responses", "reasoning_function_call.sse");
        check(Format::OPENAI_RESPONSES, &base, sse_with(&base, &extra));
    }

    #[test]
    fn openai_chat_reads_around_unknown_fields(
        extra in prop::collection::vec((0usize..64, chat_extra()), 1..6),
    ) {
        let base = fixture("openai_chat", "parallel_calls.sse");
        check(Format::OPENAI_CHAT, &base, sse_with(&base, &extra));
    }

    #[test]
    fn gemini_reads_around_unknown_parts(
        extra in prop::collection::vec((0usize..64, gemini_extra()), 1..6),
    ) {
        let base = fixture("gemini", "parallel_calls.sse");
        check(Format::GEMINI, &base, sse_with(&base, &extra));
    }

    #[test]
    fn ollama_reads_around_unknown_fields(
        extra in prop::collection::vec((0usize..64, ollama_extra()), 1..6),
    ) {
        let base = fixture("ollama", "tool_calls.ndjson");
        check(Format::OLLAMA, &base, ndjson_with(&base, &extra));
    }
}

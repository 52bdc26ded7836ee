//! Another project's Bedrock streams decode as that project says they do: the AI SDK's
//! ConverseStream fixtures (decoded frames, framed again here with AWS's padding) and
//! Converse bodies, fed in every chunking; AWS's own event-stream test frames; and the
//! AI SDK's recorded Azure stream and Microsoft's content-filtered one (OpenAI Chat).

use llmchain::message::{MessageStatus, TokenUsage};
use llmchain::provider::framing::{EventStreamFramer, encode_frame};
use llmchain::provider::{DecodeOutcome, DecoderConfig, Format, StopReason};
use serde_json::{Value, json};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The `.chunks.txt` lines as event-stream bytes.
fn frames(name: &str) -> Vec<u8> {
    let text = String::from_utf8(fixture(&format!("bedrock_converse/{name}"))).unwrap();
    let mut out = Vec::new();
    for (i, line) in text.lines().filter(|l| !l.trim().is_empty()).enumerate() {
        let v: Value = serde_json::from_str(line).unwrap();
        let (kind, payload) = v.as_object().unwrap().iter().next().unwrap();
        let mut payload = payload.clone();
        payload["p"] = json!("abcdefghijklmnopqrstuvwxyz"[..(i % 20) + 3]);
        let exception = kind.ends_with("Exception");
        out.extend(encode_frame(
            &[
                (
                    if exception {
                        ":exception-type"
                    } else {
                        ":event-type"
                    },
                    kind,
                ),
                (":content-type", "application/json"),
                (
                    ":message-type",
                    if exception { "exception" } else { "event" },
                ),
            ],
            payload.to_string().as_bytes(),
        ));
    }
    out
}

/// Decoded whole and in chunks of 1, 3, 17 and 251 bytes: all the same.
fn decode(body: &[u8]) -> DecodeOutcome {
    let codec = Format::BEDROCK_CONVERSE.codec();
    let whole = codec
        .decode_body(body, 0, DecoderConfig::default())
        .unwrap();
    for size in [1, 3, 17, 251] {
        let chunked = codec
            .decode_body(body, size, DecoderConfig::default())
            .unwrap();
        assert_eq!(chunked, whole, "chunks of {size}");
    }
    whole
}

fn calls(o: &DecodeOutcome) -> Vec<(String, String, Value)> {
    o.message
        .tool_calls
        .iter()
        .map(|c| {
            (
                c.call_id.clone().unwrap(),
                c.name.clone().unwrap(),
                Value::Object(c.arguments_as_map()),
            )
        })
        .collect()
}

#[test]
fn parallel_tool_calls_after_text_all_arrive() {
    let o = decode(&frames(
        "amazon-bedrock-json-tool-text-then-weather-then-json.1.chunks.txt",
    ));
    assert_eq!(
        o.message.text().as_deref(),
        Some("2 + 2 equals 4. Now let me check the weather for you.")
    );
    assert_eq!(
        calls(&o),
        [
            (
                "weather-tool-1".into(),
                "weather".into(),
                json!({"location": "San Francisco"})
            ),
            (
                "weather-tool-2".into(),
                "weather".into(),
                json!({"location": "London"})
            ),
        ]
    );
    assert_eq!(o.stop_reason, Some(StopReason::ToolCalls));
    assert_eq!(o.usage, Some(TokenUsage::new(500, 100)));
    assert_eq!(o.message.status, MessageStatus::Complete);
}

#[test]
fn text_blocks_without_a_start_and_three_tools() {
    let o = decode(&frames("amazon-bedrock-json-with-tools.1.chunks.txt"));
    let c = calls(&o);
    assert_eq!(c.len(), 3);
    assert_eq!(c[0], ("tool-1".into(), "tool-a".into(), json!({"a": "1"})));
    assert_eq!(c[1], ("tool-2".into(), "tool-b".into(), json!({"b": "2"})));
    assert_eq!(
        c[2],
        (
            "json-tool-id".into(),
            "json".into(),
            json!({"final": "result"})
        )
    );
    let text: Vec<&str> = o
        .message
        .content
        .iter()
        .map(|p| p.content.as_str())
        .collect();
    assert_eq!(text, ["Multiple tools.", "Final JSON."]);
}

#[test]
fn a_tool_with_no_arguments_gets_an_empty_object() {
    let o = decode(&frames("amazon-bedrock-tool-no-args.chunks.txt"));
    assert_eq!(
        calls(&o),
        [("tool-use-id".into(), "updateIssueList".into(), json!({}))]
    );
    assert_eq!(o.usage, Some(TokenUsage::new(100, 25)));
    let o = decode(&frames("amazon-bedrock-tool-call.1.chunks.txt"));
    assert_eq!(
        calls(&o),
        [(
            "tool-use-id".into(),
            "test-tool".into(),
            json!({"value": "Sparkle Day"})
        )]
    );
}

#[test]
fn reasoning_keeps_its_signature_and_usage_after_the_stop_counts() {
    let o = decode(&frames("amazon-bedrock-reasoning.chunks.txt"));
    let thinking = o
        .message
        .content
        .iter()
        .find(|p| p.r#type == llmchain::message::ContentType::Thinking)
        .unwrap();
    assert!(thinking.content.starts_with("Let me count the r's in"));
    assert!(thinking.signature().unwrap().starts_with("Ep0CCkgICxAB"));
    let o = decode(&frames("amazon-bedrock-text.chunks.txt"));
    assert!(o.message.text().unwrap().ends_with("'s in \"strawberry.\""));
    assert_eq!(o.stop_reason, Some(StopReason::EndTurn));
    assert_eq!(o.usage, Some(TokenUsage::new(22, 55)));
}

#[test]
fn converse_bodies_decode() {
    let codec = Format::BEDROCK_CONVERSE.codec();
    let o = codec
        .decode_body(
            &fixture("bedrock_converse/amazon-bedrock-tool-call.1.json"),
            0,
            DecoderConfig::default(),
        )
        .unwrap();
    assert_eq!(
        calls(&o),
        [(
            "tool-use-id".into(),
            "bash".into(),
            json!({"command": "ls -l"})
        )]
    );
    assert_eq!(o.usage, Some(TokenUsage::new(10, 20)));
    let o = codec
        .decode_body(
            &fixture("bedrock_converse/amazon-bedrock-json-with-tools.1.json"),
            0,
            DecoderConfig::default(),
        )
        .unwrap();
    assert!(!o.message.tool_calls.is_empty());
}

#[test]
fn an_exception_frame_is_a_typed_provider_error() {
    let mut body = frames("amazon-bedrock-text.chunks.txt");
    let cut = body.len() - 300;
    body.truncate(cut);
    // Whole frames only, then the exception.
    let mut framer = EventStreamFramer::new("bedrock_converse", 1 << 20);
    framer.feed(&body.clone(), &mut |_| Ok(())).unwrap();
    body.truncate(body.len() - framer.pending());
    body.extend(encode_frame(
        &[
            (":exception-type", "throttlingException"),
            (":content-type", "application/json"),
            (":message-type", "exception"),
        ],
        br#"{"message":"Too many requests, please wait before trying again."}"#,
    ));
    let o = decode(&body);
    let e = o.error.expect("a provider error");
    assert_eq!(e.kind, "throttlingException");
    assert!(e.message.contains("Too many requests"));
    assert_eq!(o.message.status, MessageStatus::Cancelled);
    assert!(o.message.text().unwrap().starts_with("Let me count"));
}

#[test]
fn aws_event_stream_test_frames() {
    let dir = "bedrock_converse/eventstream";
    for name in [
        "valid_no_headers",
        "valid_empty_payload",
        "valid_with_all_headers_and_payload",
    ] {
        let bytes = fixture(&format!("{dir}/{name}"));
        for size in [1, 5, bytes.len()] {
            let mut f = EventStreamFramer::new("bedrock_converse", 1 << 20);
            let mut n = 0;
            for c in bytes.chunks(size) {
                f.feed(c, &mut |_| {
                    n += 1;
                    Ok(())
                })
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            }
            assert_eq!((n, f.pending()), (1, 0), "{name}");
        }
    }
    for name in [
        "invalid_prelude_checksum",
        "invalid_message_checksum",
        "invalid_headers_length",
        "invalid_header_value_type",
        "invalid_header_name_length",
        "invalid_header_name_length_too_long",
        "invalid_header_string_value_length",
        "invalid_header_string_length_cut_off",
    ] {
        let bytes = fixture(&format!("{dir}/{name}"));
        let mut f = EventStreamFramer::new("bedrock_converse", 1 << 20);
        let r = f.feed(&bytes, &mut |_| Ok(()));
        assert!(
            r.is_err() || f.pending() > 0,
            "{name} was read as a good frame"
        );
    }
}

#[test]
fn azure_streams_decode_with_their_filter_annotations() {
    let codec = Format::OPENAI_CHAT.codec();
    let o = codec
        .decode_body(
            &fixture("openai_chat/azure_model_router.sse"),
            7,
            DecoderConfig::default(),
        )
        .unwrap();
    assert_eq!(o.stop_reason, Some(StopReason::EndTurn));
    assert!(!o.message.text().unwrap_or_default().is_empty());
    assert_eq!(
        o.usage.map(|u| (u.input_tokens, u.output_tokens)),
        Some((15, 78))
    );
    let o = codec
        .decode_body(
            &fixture("openai_chat/azure_async_filter_blocked.sse"),
            5,
            DecoderConfig::default(),
        )
        .unwrap();
    assert_eq!(o.stop_reason, Some(StopReason::ContentFilter));
}

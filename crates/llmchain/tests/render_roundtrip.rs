//! Every format's response renderer, read back by that format's real decoder: what a
//! script says must be what the decoder finds, for several chunkings. This is what lets
//! `ScriptedModel`, the demo and the test servers speak every wire.

use llmchain::message::{ContentType, MessageStatus, ToolCallStatus, parts_to_string};
use llmchain::provider::render::{RENDERABLE, ResponseScript, ScriptStop, render_stream};
use llmchain::provider::{DecodeOutcome, DecoderConfig, Format, StopReason};
use serde_json::json;

fn decode(format: Format, script: &ResponseScript) -> Vec<DecodeOutcome> {
    let body = render_stream(format, script).unwrap();
    let codec = format.codec();
    [0usize, 1, 7, 64]
        .into_iter()
        .map(|n| {
            codec
                .decode_body(&body, n, DecoderConfig::default())
                .unwrap_or_else(|e| panic!("{format}, chunk {n}: {e}"))
        })
        .collect()
}

fn full_script() -> ResponseScript {
    ResponseScript::default()
        .with_reasoning("The user wants the weather in Zürich — two tools.")
        .with_text("Let me check ✓")
        .with_call(
            "call_a1",
            "get_weather",
            r#"{"city": "Zürich", "unit": "celsius"}"#,
        )
        .with_call("call_b2", "get_time", r#"{"tz": "Europe/Zurich"}"#)
        .with_usage(42, 17)
}

#[test]
fn every_format_has_a_renderer() {
    assert_eq!(RENDERABLE, Format::ALL);
}

#[test]
fn a_full_response_reads_back_identically_in_every_format() {
    for &format in Format::ALL {
        let outcomes = decode(format, &full_script());
        for o in &outcomes {
            assert_eq!(o, &outcomes[0], "{format}: chunking changed the outcome");
        }
        let o = &outcomes[0];
        let m = &o.message;
        assert_eq!(m.status, MessageStatus::Complete, "{format}");
        assert_eq!(o.stop_reason, Some(StopReason::ToolCalls), "{format}");
        assert_eq!(
            parts_to_string(&m.content, ContentType::Text).as_deref(),
            Some("Let me check ✓"),
            "{format}"
        );
        assert_eq!(
            parts_to_string(&m.content, ContentType::Thinking).as_deref(),
            Some("The user wants the weather in Zürich — two tools."),
            "{format}"
        );
        let calls: Vec<_> = m
            .tool_calls
            .iter()
            .map(|c| (c.name.clone().unwrap(), c.arguments_as_map()))
            .collect();
        assert_eq!(
            calls,
            vec![
                (
                    "get_weather".to_string(),
                    json!({"city": "Zürich", "unit": "celsius"})
                        .as_object()
                        .unwrap()
                        .clone()
                ),
                (
                    "get_time".to_string(),
                    json!({"tz": "Europe/Zurich"}).as_object().unwrap().clone()
                ),
            ],
            "{format}"
        );
        assert!(
            m.tool_calls
                .iter()
                .all(|c| c.status == ToolCallStatus::Complete && c.call_id.is_some()),
            "{format}"
        );
        // Gemini has no call ids on the wire: the decoder synthesises them.
        if format != Format::GEMINI {
            let ids: Vec<_> = m.tool_calls.iter().map(|c| c.call_id.as_deref()).collect();
            assert_eq!(ids, vec![Some("call_a1"), Some("call_b2")], "{format}");
        } else {
            // The signature Gemini sends with the first call comes back verbatim.
            assert!(
                m.tool_calls[0]
                    .metadata
                    .values()
                    .any(|v| v == "c2NyaXB0ZWQtc2lnbmF0dXJl"),
                "{:?}",
                m.tool_calls[0].metadata
            );
        }
        let usage = o.usage.unwrap();
        assert_eq!(
            (usage.input_tokens, usage.output_tokens),
            (42, 17),
            "{format}"
        );
    }
}

#[test]
fn text_only_ends_the_turn() {
    for &format in Format::ALL {
        let o = &decode(format, &ResponseScript::text("Hello there."))[0];
        assert_eq!(o.message.status, MessageStatus::Complete, "{format}");
        assert_eq!(o.stop_reason, Some(StopReason::EndTurn), "{format}");
        assert_eq!(
            o.message.text().as_deref(),
            Some("Hello there."),
            "{format}"
        );
        assert!(o.message.tool_calls.is_empty(), "{format}");
    }
}

#[test]
fn a_max_tokens_cut_never_yields_an_executable_call() {
    let script = ResponseScript::tool_call("call_1", "get_time", r#"{"tz": "UTC"}"#)
        .with_call(
            "call_2",
            "write_file",
            r#"{"path": "a.txt", "content": "a long text"}"#,
        )
        .with_stop(ScriptStop::MaxTokens);
    for &format in Format::ALL {
        let o = &decode(format, &script)[0];
        assert_eq!(o.message.status, MessageStatus::Length, "{format}");
        assert_eq!(o.stop_reason, Some(StopReason::MaxTokens), "{format}");
        assert_eq!(
            o.message.executable_tool_calls().count(),
            0,
            "{format}: {:?}",
            o.message.tool_calls
        );
    }
}

#[test]
fn an_error_mid_stream_is_reported_and_nothing_runs() {
    let script = ResponseScript::tool_call("call_1", "get_time", r#"{"tz": "UTC"}"#).with_stop(
        ScriptStop::Error {
            kind: "overloaded_error".into(),
            message: "Overloaded, try again".into(),
        },
    );
    for &format in Format::ALL {
        let o = &decode(format, &script)[0];
        let err = o
            .error
            .as_ref()
            .unwrap_or_else(|| panic!("{format}: no error"));
        assert_eq!(err.message, "Overloaded, try again", "{format}");
        assert_ne!(o.message.status, MessageStatus::Complete, "{format}");
        assert_eq!(o.message.executable_tool_calls().count(), 0, "{format}");
    }
}

#[test]
fn a_truncated_body_is_cancelled() {
    let script = ResponseScript::tool_call("call_1", "get_time", r#"{"tz": "UTC"}"#)
        .with_stop(ScriptStop::Truncated);
    for &format in Format::ALL {
        let o = &decode(format, &script)[0];
        assert_eq!(o.message.status, MessageStatus::Cancelled, "{format}");
        assert_eq!(o.message.executable_tool_calls().count(), 0, "{format}");
    }
}

#[test]
fn whole_call_wires_refuse_arguments_that_are_not_an_object() {
    let script = ResponseScript::tool_call("c", "w", r#"{"path": "a.txt""#);
    for format in [Format::GEMINI, Format::OLLAMA] {
        let err = render_stream(format, &script).unwrap_err();
        assert!(err.to_string().contains("not a JSON object"), "{err}");
    }
    // Fragment wires carry it, and the decoder reports the call as invalid.
    for format in [
        Format::OPENAI_CHAT,
        Format::OPENAI_RESPONSES,
        Format::ANTHROPIC,
    ] {
        let o = &decode(format, &script)[0];
        assert_eq!(o.invalid_tool_calls.len(), 1, "{format}");
    }
}

//! `gen_ai.response.id` and `.model`: what each decoder keeps of the response's id and
//! the answering model, for every recorded body (streamed in 1-byte chunks too, which
//! `decode_checked` compares with the whole).

mod codec_support;

use codec_support::*;
use llmchain::provider::{DecodeOutcome, DecoderConfig, Format};

const FORMATS: [(&str, Format); 5] = [
    ("openai_chat", Format::OPENAI_CHAT),
    ("openai_responses", Format::OPENAI_RESPONSES),
    ("anthropic", Format::ANTHROPIC),
    ("gemini", Format::GEMINI),
    ("ollama", Format::OLLAMA),
];

fn meta(o: &DecodeOutcome) -> String {
    format!(
        "id={} model={}",
        o.response_id.as_deref().unwrap_or("-"),
        o.response_model.as_deref().unwrap_or("-")
    )
}

#[test]
fn every_fixture_keeps_the_response_id_and_model() {
    let mut table = String::new();
    for (dir, format) in FORMATS {
        for name in fixture_names(dir) {
            let body = fixture(dir, &name);
            let decoded = if name.ends_with(".json") {
                format
                    .codec()
                    .decode_response(&body, DecoderConfig::default())
            } else {
                decode_checked(format.codec(), &body).1
            };
            let line = match decoded {
                Ok(o) => meta(&o),
                Err(e) => format!("error: {e}"),
            };
            table.push_str(&format!("{dir}/{name}: {line}\n"));
        }
    }
    insta::assert_snapshot!(table);
}

#[test]
fn a_whole_body_keeps_them_as_its_stream_does() {
    for (dir, format, name) in [
        ("openai_chat", Format::OPENAI_CHAT, "response.json"),
        (
            "openai_responses",
            Format::OPENAI_RESPONSES,
            "response.json",
        ),
        ("anthropic", Format::ANTHROPIC, "message.json"),
        ("gemini", Format::GEMINI, "response.json"),
        ("ollama", Format::OLLAMA, "response.json"),
    ] {
        let o = format
            .codec()
            .decode_response(&fixture(dir, name), DecoderConfig::default())
            .unwrap();
        assert!(o.response_model.is_some(), "{dir}/{name}: {}", meta(&o));
    }
}

#[test]
fn azures_empty_first_chunk_does_not_hide_the_real_id() {
    // Azure opens with `"id":"","model":""` (prompt filter results): the next chunk's
    // values are the ones kept.
    let body = fixture("openai_chat", "azure_model_router.sse");
    let o = decode_checked(Format::OPENAI_CHAT.codec(), &body)
        .1
        .unwrap();
    assert_eq!(
        o.response_id.as_deref(),
        Some("chatcmpl-CYPS1lijGoK8gd9lYzY3r9Sx50nbt")
    );
    assert!(o.response_model.as_deref().is_some_and(|m| !m.is_empty()));
}

#[test]
fn odd_values_are_ignored_or_bounded_never_an_error() {
    let chat = Format::OPENAI_CHAT.codec();
    let long = "m".repeat(10_000);
    for (body, id, model) in [
        // A numeric id: not a string, not kept; the chunk still decodes.
        (
            r#"data: {"id":7,"model":"x","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}

data: [DONE]

"#
            .to_owned(),
            None,
            None,
        ),
        // Cut to 256 bytes.
        (
            format!(
                r#"data: {{"id":"a","model":"{long}","choices":[{{"index":0,"delta":{{"content":"hi"}},"finish_reason":"stop"}}]}}

data: [DONE]

"#
            ),
            Some("a"),
            Some(256),
        ),
    ] {
        let o = decode_checked(chat, body.as_bytes()).1.unwrap();
        assert_eq!(o.message.content[0].content, "hi");
        assert_eq!(o.response_id.as_deref(), id);
        assert_eq!(o.response_model.as_ref().map(String::len), model);
    }
}

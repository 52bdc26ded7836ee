//! Every kind of content on every wire (the table in `docs/content-placement.md`): a
//! part goes where the API takes it, or as text standing in for it; never dropped
//! without a word, never in a form the API rejects. Each body is snapshotted, run
//! through the rules of the real API (`http_support::content_rules`), and sent through
//! the HTTP client to a local server that enforces them.

mod http_support;

use std::collections::BTreeMap;

use base64::Engine as _;
use http_support::content_rules;
use http_support::{Reply, Server, WIRES, call, encode};
use llmchain::chain::{ChatModel, collect_stream};
use llmchain::conversation::Conversation;
use llmchain::http::{HttpModel, HttpModelConfig};
use llmchain::message::{ContentPart, Message, ToolResult};
use llmchain::provider::Format;
use llmchain::provider::render::{ResponseScript, render_stream};
use serde_json::{Value, json};

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A kind of content as MCP servers return it, and what of it must reach the request
/// (its data, URL or text, or the placeholder that names it).
struct Case {
    kind: &'static str,
    part: ContentPart,
    /// What the body holds: one of these.
    marks: Vec<String>,
}

fn cases() -> Vec<Case> {
    let png = b64(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR");
    let svg = b64(b"<svg xmlns='http://www.w3.org/2000/svg'/>");
    let pdf = b64(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF");
    let gz = b64(b"\x1f\x8b\x08\0\0\0\0\0\0\x03\x03\0\0\0\0\0\0\0\0\0");
    let csv = b64(b"name,age\nAda,36\n");
    let placeholder = |what: &str, media: &str| format!("[{what} not sent: {media}");
    vec![
        Case {
            kind: "text",
            part: ContentPart::text("18 degrees, light rain"),
            marks: vec!["18 degrees, light rain".into()],
        },
        Case {
            kind: "image_png",
            part: ContentPart::image(&png, "image/png"),
            marks: vec![png.clone(), placeholder("image", "image/png")],
        },
        Case {
            kind: "image_svg",
            part: ContentPart::image(&svg, "image/svg+xml"),
            marks: vec![svg.clone(), placeholder("image", "image/svg+xml")],
        },
        Case {
            kind: "image_url",
            part: ContentPart::image_url("https://example.com/map.png"),
            marks: vec!["https://example.com/map.png".into()],
        },
        Case {
            kind: "pdf",
            part: ContentPart::file(&pdf, "application/pdf").with_option("filename", "report.pdf"),
            marks: vec![pdf.clone(), placeholder("file", "application/pdf")],
        },
        Case {
            kind: "binary_file",
            part: ContentPart::file(&gz, "application/gzip")
                .with_option("uri", "file:///data/archive.gz"),
            marks: vec![placeholder("file", "application/gzip")],
        },
        Case {
            kind: "text_file",
            part: ContentPart::file(&csv, "text/csv").with_option("uri", "file:///data/people.csv"),
            marks: vec!["name,age\\nAda,36".into()],
        },
        Case {
            kind: "file_url",
            part: ContentPart::file_url("https://example.com/report.pdf"),
            marks: vec!["https://example.com/report.pdf".into()],
        },
        Case {
            kind: "resource_link",
            part: ContentPart::text("[resource people: file:///data/people.csv]")
                .with_option("uri", "file:///data/people.csv"),
            marks: vec!["[resource people: file:///data/people.csv]".into()],
        },
    ]
}

/// user → a call → its result holding `part` after a line of text.
fn in_result(part: &ContentPart, structured: Option<Value>) -> Conversation {
    let mut c = Conversation::new();
    c.messages.push(Message::user("Fetch it."));
    c.messages.push(Message::assistant_with_calls(
        "",
        vec![call("call_1", "fetch", json!({"what": "it"}))],
    ));
    let mut r = ToolResult::success("call_1", vec![ContentPart::text("Fetched:"), part.clone()])
        .with_name("fetch");
    r.processed_content = structured;
    c.messages.push(Message::tool(vec![r]));
    c
}

/// A user message holding `part` after a line of text.
fn in_user_message(part: &ContentPart) -> Conversation {
    let mut c = Conversation::new();
    c.messages.push(Message::user(vec![
        ContentPart::text("Look:"),
        part.clone(),
    ]));
    c
}

/// The part of a body that holds the conversation.
fn messages(format: Format, body: &Value) -> Value {
    match format.as_str() {
        "openai_responses" => body["input"].clone(),
        "gemini" => body["contents"].clone(),
        _ => body["messages"].clone(),
    }
}

#[test]
fn every_kind_on_every_wire_is_placed_accepted_and_never_dropped() {
    for format in WIRES {
        let mut table = BTreeMap::new();
        for case in cases() {
            for (place, conv) in [
                ("tool_result", in_result(&case.part, None)),
                ("user_message", in_user_message(&case.part)),
            ] {
                let body = encode(format, &conv);
                let cell = format!("{format:?} / {} in a {place}", case.kind);
                content_rules::check(format, &body)
                    .unwrap_or_else(|e| panic!("{cell}: the API would reject it: {e}"));
                let text = body.to_string();
                assert!(
                    case.marks.iter().any(|m| text.contains(m.as_str())),
                    "{cell}: dropped (none of {:?} in {text})",
                    case.marks
                );
                table.insert(format!("{place}.{}", case.kind), messages(format, &body));
            }
        }
        // Structured content: the text the server gave goes; the structure stays in
        // `processed_content`, which is never sent.
        let conv = in_result(
            &ContentPart::text("{\"temp\":18}"),
            Some(json!({"temp": 18, "secret_field": "kept local"})),
        );
        let body = encode(format, &conv);
        content_rules::check(format, &body).unwrap();
        let text = body.to_string();
        assert!(
            text.contains("temp") && !text.contains("secret_field"),
            "{text}"
        );
        table.insert("tool_result.structured".into(), messages(format, &body));
        insta::assert_json_snapshot!(format!("placement_{}", format.as_str()), table);
    }
}

/// The same requests, sent by the HTTP client to local servers that enforce the real
/// APIs' content rules: all accepted.
#[tokio::test]
async fn servers_with_the_real_rules_accept_every_request() {
    for format in WIRES {
        let script = ResponseScript::text("ok").with_usage(1, 1);
        let reply = render_stream(format, &script).unwrap();
        let cases = cases();
        let replies: Vec<Reply> = cases
            .iter()
            .flat_map(|_| [0, 1])
            .map(|_| {
                if format == Format::OLLAMA {
                    Reply::ndjson(reply.clone())
                } else {
                    Reply::sse(reply.clone())
                }
            })
            .collect();
        let server =
            Server::start_with(replies, Some(http_support::content_validator(format))).await;
        let model = HttpModel::new(
            HttpModelConfig::new(format, "m")
                .unwrap()
                .api_key("test-key")
                .base_url(&server.base),
        )
        .unwrap();
        for case in &cases {
            for conv in [in_result(&case.part, None), in_user_message(&case.part)] {
                let out = collect_stream(model.stream(&conv), |_| {}).await;
                assert!(out.is_ok(), "{format:?} / {}: {out:?}", case.kind);
            }
        }
        assert_eq!(server.seen().len(), cases.len() * 2);
    }
}

/// The validators are not a formality: the forms the encoders used to send are refused.
#[test]
fn the_rules_refuse_what_the_apis_refuse() {
    let gz_document = json!({"messages": [{"role": "user", "content": [
        {"type": "document", "source": {"type": "base64", "media_type": "application/gzip", "data": "H4sI"}}]}]});
    assert!(
        content_rules::anthropic(&gz_document)
            .unwrap_err()
            .contains("application/pdf")
    );
    let cache_true = json!({"messages": [{"role": "user", "content": [
        {"type": "text", "text": "hi", "cache_control": true}]}]});
    assert!(content_rules::anthropic(&cache_true).is_err());
    let empty_tool = json!({"messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": ""}]}]}]});
    assert!(
        content_rules::anthropic(&empty_tool)
            .unwrap_err()
            .contains("non-empty")
    );
    let gz_file = json!({"messages": [{"role": "user", "content": [
        {"type": "file", "file": {"filename": "a.gz", "file_data": "data:application/gzip;base64,H4sI"}}]}]});
    assert!(
        content_rules::openai_chat(&gz_file)
            .unwrap_err()
            .contains("PDF")
    );
    let tool_image = json!({"messages": [{"role": "tool", "tool_call_id": "c", "content": [
        {"type": "image_url", "image_url": {"url": "https://x/a.png"}}]}]});
    assert!(content_rules::openai_chat(&tool_image).is_err());
    let gz_inline = json!({"contents": [{"role": "user", "parts": [
        {"inlineData": {"mimeType": "application/gzip", "data": "H4sI"}}]}]});
    assert!(
        content_rules::gemini(&gz_inline)
            .unwrap_err()
            .contains("MIME")
    );
    let prefixed = json!({"messages": [{"role": "user", "content": "", "images": ["data:image/png;base64,iVBO"]}]});
    assert!(content_rules::ollama(&prefixed).is_err());
}

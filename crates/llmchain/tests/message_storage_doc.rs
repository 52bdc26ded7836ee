//! Every ```json block of `docs/storage-format.md` loads as the type its fence names.
//!
//! Fence info: `json <kind> [exact]`, where kind is `conversation`, `message`,
//! `messages` (several messages, one after another), `tool_call`, `tool_result`,
//! `content_part` or `tool_definition`; `exact` means writing the loaded value gives the
//! same JSON back. `json rejected <path>` is a conversation that must fail to load with an
//! error at `<path>`.

use llmchain::conversation::{Conversation, ToolDefinition};
use llmchain::message::{ContentPart, Message, ToolCall, ToolResult};
use llmchain::storage_format::{self, StorageFormatError};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

const DOC: &str = include_str!("../../../docs/storage-format.md");

struct Block {
    line: usize,
    info: Vec<String>,
    body: String,
}

fn json_blocks() -> Vec<Block> {
    let mut out = Vec::new();
    let mut lines = DOC.lines().enumerate();
    while let Some((n, line)) = lines.next() {
        let Some(info) = line.strip_prefix("```json") else {
            continue;
        };
        let info: Vec<String> = info.split_whitespace().map(str::to_owned).collect();
        let mut body = String::new();
        for (_, l) in lines.by_ref() {
            if l.starts_with("```") {
                break;
            }
            body.push_str(l);
            body.push('\n');
        }
        out.push(Block {
            line: n + 1,
            info,
            body,
        });
    }
    out
}

/// Loads one document, checks that writing and loading it again is stable, and (for
/// `exact` blocks) that writing gives the document back.
fn check<T: DeserializeOwned + Serialize>(text: &str, exact: bool, at: usize) {
    let value: T =
        storage_format::from_str(text).unwrap_or_else(|e| panic!("block at line {at}: {e}"));
    let written = serde_json::to_value(&value).unwrap();
    let again: T = storage_format::from_str(&written.to_string()).unwrap();
    assert_eq!(serde_json::to_value(&again).unwrap(), written, "line {at}");
    if exact {
        let original: Value = serde_json::from_str(text).unwrap();
        assert_eq!(
            written, original,
            "block at line {at} is not written back exactly"
        );
    }
}

#[test]
fn every_example_in_the_storage_format_doc_loads() {
    let blocks = json_blocks();
    assert!(blocks.len() >= 15, "found only {} blocks", blocks.len());
    let mut kinds = std::collections::BTreeSet::new();
    for b in &blocks {
        let kind = b.info.first().map(String::as_str).unwrap_or("");
        kinds.insert(kind.to_owned());
        let exact = b.info.iter().any(|w| w == "exact");
        match kind {
            "conversation" => check::<Conversation>(&b.body, exact, b.line),
            "message" => check::<Message>(&b.body, exact, b.line),
            "tool_call" => check::<ToolCall>(&b.body, exact, b.line),
            "tool_result" => check::<ToolResult>(&b.body, exact, b.line),
            "content_part" => check::<ContentPart>(&b.body, exact, b.line),
            "tool_definition" => check::<ToolDefinition>(&b.body, exact, b.line),
            "messages" => {
                let mut n = 0;
                for v in serde_json::Deserializer::from_str(&b.body).into_iter::<Value>() {
                    let v = v.unwrap_or_else(|e| panic!("block at line {}: {e}", b.line));
                    check::<Message>(&v.to_string(), exact, b.line);
                    n += 1;
                }
                assert!(n >= 2, "block at line {}", b.line);
            }
            "rejected" => {
                let path = b.info.get(1).expect("rejected blocks name the error path");
                let err: StorageFormatError = storage_format::from_str::<Conversation>(&b.body)
                    .expect_err(&format!("block at line {} must be rejected", b.line));
                assert_eq!(&err.path, path, "line {}: {err}", b.line);
                // The error table in the doc quotes the messages.
                assert!(
                    DOC.contains(&err.to_string()[..err.to_string().len().min(60)]) || {
                        // Only the first three rows are quoted in full.
                        !["version", "messages[0].role"].contains(&path.as_str())
                    },
                    "the doc does not quote: {err}"
                );
            }
            other => panic!("block at line {}: unknown kind {other:?}", b.line),
        }
    }
    for k in [
        "conversation",
        "message",
        "messages",
        "tool_call",
        "tool_result",
        "content_part",
        "tool_definition",
        "rejected",
    ] {
        assert!(kinds.contains(k), "the doc has no {k} example");
    }
}

/// The two-line example is in docs/storage-format.md, and they load as the message model says.
#[test]
fn the_spec_example_is_documented() {
    let spec_block = json_blocks()
        .into_iter()
        .find(|b| b.body.contains("\"Checking.\"") && b.info[0] == "messages")
        .expect("the storage-format example");
    let msgs: Vec<Message> = serde_json::Deserializer::from_str(&spec_block.body)
        .into_iter::<Value>()
        .map(|v| storage_format::from_str(&v.unwrap().to_string()).unwrap())
        .collect();
    assert_eq!(msgs[0].tool_calls[0].execution_status(), "completed");
    assert!(msgs[0].is_tool_call());
    let r = &msgs[1].tool_results[0];
    assert_eq!(r.content_text(), "18C");
    assert_eq!(r.processed_content, Some(serde_json::json!({"temp_c": 18})));
    assert!(!r.is_error());
}

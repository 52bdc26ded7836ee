//! The reference MCP server `@modelcontextprotocol/server-everything` (npm): its image,
//! resource, blob and structured-content tools through our client, and each result
//! through every provider wire, checked against the real APIs' content rules. Needs
//! `LLMCHAIN_TEST_NPM_BIN` (`.ci/third-party`); prints `SKIPPED` and passes without it.

#[path = "../../llmchain/tests/http_support/content_rules.rs"]
#[allow(dead_code)]
mod content_rules;

use std::time::Duration;

use llmchain::conversation::Conversation;
use llmchain::message::{ContentType, Message, ToolCall, ToolResult};
use llmchain::provider::{Format, RequestOptions};
use llmchain::tool::ToolContext;
use llmchain_mcp::{McpClient, McpOptions, ServerSpec};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_content_reaches_every_wire_in_a_form_it_takes() {
    let Ok(npm) = std::env::var("LLMCHAIN_TEST_NPM_BIN") else {
        eprintln!(
            "SKIPPED server_everything_content_reaches_every_wire_in_a_form_it_takes: LLMCHAIN_TEST_NPM_BIN is not set (eval \"$(.ci/third-party)\")"
        );
        return;
    };
    let client = McpClient::connect(
        ServerSpec::stdio(format!("{npm}/mcp-server-everything"), Vec::<String>::new()),
        McpOptions {
            timeout: Duration::from_secs(30),
            handshake_timeout: Duration::from_secs(60),
            ..McpOptions::default()
        },
    )
    .await
    .unwrap();
    let tools = client.tools().await.unwrap();
    let run = |name: &str, args: Value| {
        let t = tools
            .iter()
            .find(|t| t.tool.name() == name)
            .unwrap_or_else(|| panic!("no {name}"))
            .tool
            .clone();
        let id = format!("call_{name}");
        async move { t.execute(args, ToolContext::new(id)).await }
    };
    let results: Vec<ToolResult> = vec![
        run("get-tiny-image", json!({})).await,
        run("get-resource-reference", json!({"resourceType": "Text", "resourceId": 3})).await,
        run("get-resource-reference", json!({"resourceType": "Blob", "resourceId": 2})).await,
        run(
            "gzip-file-as-resource",
            json!({"name": "notes.txt.gz", "data": "data:text/plain;base64,U2hpcCBvbiBGcmlkYXku", "outputType": "resource"}),
        )
        .await,
        run("get-structured-content", json!({"location": "Chicago"})).await,
    ];
    for r in &results {
        assert!(!r.is_error(), "{r:?}");
    }
    // What came: the image, the text resource, the blob resources, the structure.
    assert!(
        results[0]
            .content
            .iter()
            .any(|p| p.r#type == ContentType::Image)
    );
    assert!(
        results[1].content_text().contains("Resource 3"),
        "{:?}",
        results[1]
    );
    assert!(
        results[3]
            .content
            .iter()
            .any(|p| p.r#type == ContentType::File && p.media() == Some("application/gzip"))
    );
    assert!(
        results[4]
            .processed_content
            .as_ref()
            .is_some_and(|v| v["temperature"].is_number())
    );

    let mut conv = Conversation::new();
    conv.messages.push(Message::user("Show me everything."));
    let calls = results
        .iter()
        .map(|r| {
            ToolCall::function(
                r.tool_call_id.clone(),
                r.name.clone().unwrap_or_default(),
                "{}",
            )
            .unwrap()
        })
        .collect();
    conv.messages.push(Message::assistant_with_calls("", calls));
    conv.messages.push(Message::tool(results.clone()));
    for format in [
        Format::OPENAI_CHAT,
        Format::OPENAI_RESPONSES,
        Format::ANTHROPIC,
        Format::GEMINI,
        Format::OLLAMA,
    ] {
        let opts = RequestOptions {
            model: "m".into(),
            ..Default::default()
        };
        let body: Value =
            serde_json::from_slice(&format.codec().encode(&conv, &opts).unwrap()).unwrap();
        content_rules::check(format, &body)
            .unwrap_or_else(|e| panic!("{format:?}: the API would reject it: {e}"));
        let text = body.to_string();
        // Nothing dropped: the gzip blob is there as a placeholder that names it.
        assert!(
            text.contains("[file not sent: application/gzip"),
            "{format:?}: {text}"
        );
        assert!(text.contains("Resource 3"), "{format:?}");
    }
}

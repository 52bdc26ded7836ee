//! An MCP tool in a chain. The program plays both sides: run with `serve` it is an MCP
//! server (rmcp, stdio) exposing a `shout` tool; run without arguments it starts itself
//! as that server, lists its tools as llmchain tools and lets the model call one.
//!
//! `OPENAI_API_KEY=sk-... cargo run -p llmchain-mcp --example mcp_tool` (or any
//! compatible server: `OPENAI_BASE_URL`; `.ci/examples` uses `scripts/mock_openai.py`).

use std::sync::Arc;

use llmchain::chain::{LLMChain, Mode};
use llmchain::http::{HttpModel, HttpModelConfig};
use llmchain::message::Message;
use llmchain::provider::Format;
use llmchain::tool::Tool;
use llmchain_mcp::{McpClient, McpOptions, ServerSpec, serve_stdio};
use serde_json::json;

fn shout() -> Result<Tool, llmchain::tool::ToolError> {
    Tool::builder("shout")
        .description("Upper-cases a text.")
        .schema(json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}))
        .idempotent(true)
        .handler(|args, _| async move { args["text"].as_str().unwrap_or_default().to_uppercase() })
        .build()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().nth(1).as_deref() == Some("serve") {
        serve_stdio([shout()?]).await?;
        return Ok(());
    }

    let me = std::env::current_exe()?;
    let client = McpClient::connect(
        ServerSpec::stdio(me.to_string_lossy(), ["serve"]),
        McpOptions::default(),
    )
    .await?;
    let tools = client.tools().await?;
    for t in &tools {
        println!(
            "MCP tool {} (idempotent: {}, hints: {:?})",
            t.tool.name(),
            t.tool.idempotent(),
            t.hints.labels()
        );
    }

    let model = HttpModel::new(HttpModelConfig::from_env(
        Format::OPENAI_CHAT,
        "gpt-4.1-mini",
    )?)?;
    let mut chain = LLMChain::new(Arc::new(model));
    for t in tools {
        chain.add_tool(t.tool);
    }
    chain
        .add_message(Message::user("Shout 'hello mcp'"))
        .await?;
    chain.run(Mode::while_needs_response()).await?;
    for m in chain.messages() {
        for r in &m.tool_results {
            println!("tool result: {}", r.content_text());
        }
    }
    println!(
        "assistant: {}",
        chain
            .last_message()
            .and_then(|m| m.text())
            .unwrap_or_default()
    );
    Ok(())
}

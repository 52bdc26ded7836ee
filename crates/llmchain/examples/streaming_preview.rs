//! Live argument preview: a tool call's arguments as they stream in, fragment by fragment
//! (`StreamEvent::ToolCallArguments`), read by the incremental reader
//! (`provider::preview::ArgumentPreview`) so the partial value is known before the call
//! is complete.
//!
//! `OPENAI_API_KEY=sk-... cargo run -p llmchain --example streaming_preview` (or any
//! compatible server: `OPENAI_BASE_URL`; `.ci/examples` uses `scripts/mock_openai.py`).

use std::io::Write;
use std::sync::{Arc, Mutex};

use llmchain::chain::{Callbacks, LLMChain, Mode};
use llmchain::http::{HttpModel, HttpModelConfig};
use llmchain::message::Message;
use llmchain::provider::preview::ArgumentPreview;
use llmchain::provider::{Format, StreamEvent};
use llmchain::tool::Tool;
use serde_json::json;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let write_file = Tool::builder("write_file")
        .description("Writes a file.")
        .schema(json!({"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}))
        .handler(|args, _| async move {
            let n = args["content"].as_str().map(str::len).unwrap_or(0);
            format!("wrote {n} bytes to {}", args["path"].as_str().unwrap_or("?"))
        })
        .build()?;

    let model = HttpModel::new(HttpModelConfig::from_env(
        Format::OPENAI_CHAT,
        "gpt-4.1-mini",
    )?)?;
    // The partial arguments, read as they arrive (O(fragment) each).
    let preview = Arc::new(Mutex::new(ArgumentPreview::new()));
    let reader = preview.clone();

    let callbacks = Callbacks::new()
        .on_llm_new_delta(move |e: &StreamEvent<'_>| match e {
            StreamEvent::ToolCallStarted { name, .. } => {
                print!("\n[preview] {name}(");
                let _ = std::io::stdout().flush();
            }
            StreamEvent::ToolCallArguments { fragment, .. } => {
                print!("{fragment}");
                let _ = std::io::stdout().flush();
                let mut p = reader.lock().unwrap();
                p.feed(fragment);
                // What is known so far, e.g. the path before the content is written.
                if let Some(path) = p.preview().and_then(|v| v.get("path").cloned()) {
                    eprint!(" [path so far: {path}]");
                }
            }
            StreamEvent::ToolCallFinished { .. } => println!(")  <- complete"),
            StreamEvent::TextDelta { text, .. } => print!("{text}"),
            _ => {}
        })
        .on_tool_execution_completed(|_, r| println!("[result] {}", r.content_text()));

    let mut chain = LLMChain::new(Arc::new(model))
        .with_tool(write_file)
        .with_callbacks(callbacks);
    chain
        .add_message(Message::user("Write me a poem file."))
        .await?;
    chain.run(Mode::while_needs_response()).await?;
    println!();
    Ok(())
}

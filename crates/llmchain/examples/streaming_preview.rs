//! Live argument preview: print a tool call's arguments as they stream in, fragment by
//! fragment (`StreamEvent::ToolCallArguments`), before the call is complete.
//!
//! `cargo run -p llmchain --example streaming_preview`

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use llmchain::chain::{Callbacks, LLMChain, Mode, ScriptedModel};
use llmchain::message::Message;
use llmchain::provider::render::ResponseScript;
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

    let model = ScriptedModel::new(Format::OpenAiChat)
        .chunk_size(7)
        .chunk_delay(Duration::from_millis(5))
        .respond(ResponseScript::tool_call(
            "call_1",
            "write_file",
            r#"{"path": "poem.txt", "content": "Roses are red,\nstreams arrive in parts,\nthe preview shows them\nbefore the call starts."}"#,
        ))?
        .respond(ResponseScript::text("Done."))?;

    let callbacks = Callbacks::new()
        .on_llm_new_delta(|e: &StreamEvent<'_>| match e {
            StreamEvent::ToolCallStarted { name, .. } => {
                print!("\n[preview] {name}(");
                let _ = std::io::stdout().flush();
            }
            StreamEvent::ToolCallArguments { fragment, .. } => {
                print!("{fragment}");
                let _ = std::io::stdout().flush();
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

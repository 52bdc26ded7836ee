//! Human review across processes: the first run pauses before a destructive call
//! (`ReviewDecision::Interrupt`) and saves `chain.state()` to a file; a second
//! invocation loads it, applies the human's decision and finishes.
//!
//! ```text
//! cargo run -p llmchain --example review_pause_resume -- pause  /tmp/state.json
//! cargo run -p llmchain --example review_pause_resume -- resume /tmp/state.json approve
//! ```
//! (`resume ... reject` refuses the call instead.) The model is OpenAI's (`OPENAI_API_KEY`,
//! or a compatible server at `OPENAI_BASE_URL`; `.ci/examples` uses
//! `scripts/mock_openai.py`).

use std::sync::Arc;

use llmchain::chain::{ChainState, HumanDecision, LLMChain, Mode, ReviewDecision, RunOutcome};
use llmchain::http::{HttpModel, HttpModelConfig};
use llmchain::message::{Message, ToolCall};
use llmchain::provider::Format;
use llmchain::tool::Tool;
use serde_json::json;

fn delete_tool() -> Result<Tool, llmchain::tool::ToolError> {
    Tool::builder("delete_file")
        .description("Deletes a file.")
        .schema(json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}))
        .handler(|args, _| async move { format!("deleted {}", args["path"].as_str().unwrap_or("?")) })
        .build()
}

/// OpenAI's Chat Completions, from OPENAI_API_KEY and OPENAI_BASE_URL.
fn openai() -> Result<HttpModel, llmchain::model::ModelError> {
    HttpModel::new(HttpModelConfig::from_env(
        Format::OPENAI_CHAT,
        "gpt-4.1-mini",
    )?)
}

fn review(call: &ToolCall) -> ReviewDecision {
    if call.name.as_deref() == Some("delete_file") {
        ReviewDecision::Interrupt
    } else {
        ReviewDecision::Approve
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["pause", path] => {
            let model = openai()?;
            let mut chain = LLMChain::new(Arc::new(model))
                .with_tool(delete_tool()?)
                .with_review(review);
            chain.add_message(Message::user("Clean up old.log")).await?;
            match chain.run(Mode::while_needs_response()).await? {
                RunOutcome::ReviewRequired(p) => {
                    for c in p.awaiting() {
                        println!("paused: {} ({}) needs a human decision", c.name, c.call_id);
                    }
                    std::fs::write(path, serde_json::to_string_pretty(chain.state())?)?;
                    println!("state saved to {path}");
                }
                other => println!("unexpected: {other:?}"),
            }
        }
        ["resume", path, decision] => {
            let state: ChainState = serde_json::from_str(&std::fs::read_to_string(path)?)?;
            let model = openai()?;
            let mut chain = LLMChain::from_state(Arc::new(model), state)
                .with_tool(delete_tool()?)
                .with_review(review);
            let ids: Vec<String> = chain
                .pending_review()
                .map(|p| p.awaiting().map(|c| c.call_id.clone()).collect())
                .unwrap_or_default();
            let human = match *decision {
                "approve" => HumanDecision::Approve,
                _ => HumanDecision::Deny {
                    reason: Some("Keep the log.".into()),
                },
            };
            let decisions = ids.into_iter().map(|id| (id, human.clone())).collect();
            let outcome = chain
                .resume(decisions, Mode::while_needs_response())
                .await?;
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
            println!("outcome: {outcome:?}");
        }
        _ => {
            eprintln!("usage: review_pause_resume pause FILE | resume FILE approve|reject");
            std::process::exit(2);
        }
    }
    Ok(())
}

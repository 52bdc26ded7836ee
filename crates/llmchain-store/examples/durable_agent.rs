//! A durable agent: its conversation stored in SQLite as it goes, a tool that must not
//! run twice, an approval decided from the call's arguments, and the conversation taken
//! up again by another process.
//!
//! ```text
//! cargo run -p llmchain-store --example durable_agent -- start agent.db "Email bob@example.com that the build is green"
//! cargo run -p llmchain-store --example durable_agent -- resume agent.db CONVERSATION_ID "Tell mallory@evil.test too"
//! ```
//!
//! `OPENAI_API_KEY` (and `OPENAI_BASE_URL` for any compatible server) come from the
//! environment. Kill the first process at any moment: `resume` finds every message and
//! every call's status as they were, and a `send_email` caught mid-run is answered
//! "outcome unknown" instead of being sent again (the tool is not idempotent).

use std::sync::Arc;
use std::time::Duration;

use llmchain::chain::{LLMChain, Mode, ReviewDecision};
use llmchain::http::{HttpModel, HttpModelConfig};
use llmchain::message::{Message, ToolCall};
use llmchain::provider::Format;
use llmchain::tool::Tool;
use llmchain_store::{
    Claim, Drive, LeasedRun, NewConversation, NotBuilt, RunState, SqliteStore, Store,
};
use serde_json::json;

type Error = Box<dyn std::error::Error>;

/// A tool with an effect in the world: running it twice sends two emails.
fn send_email() -> Result<Tool, Error> {
    Ok(Tool::builder("send_email")
        .description("Sends an email.")
        .schema(json!({"type": "object",
            "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
            "required": ["to", "body"]}))
        .idempotent(false)
        .handler(|args, _ctx| async move {
            let to = args["to"].as_str().unwrap_or_default().to_owned();
            format!("sent to {to}")
        })
        .build()?)
}

/// The approval hook: an email may go to example.com only. It reads the call's
/// arguments as a map (`arguments_as_map`), whatever the provider streamed.
fn review(call: &ToolCall) -> ReviewDecision {
    let args = call.arguments_as_map();
    match args.get("to").and_then(|v| v.as_str()) {
        Some(to) if to.ends_with("@example.com") => ReviewDecision::Approve,
        Some(to) => ReviewDecision::Deny {
            reason: format!("{to} is outside example.com: not sent"),
        },
        None => ReviewDecision::Reject {
            reason: "give the address in `to`".into(),
        },
    }
}

fn model() -> Result<HttpModel, Error> {
    Ok(HttpModel::new(HttpModelConfig::from_env(
        Format::OPENAI_CHAT,
        "gpt-4.1-mini",
    )?)?)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: durable_agent start DB PROMPT | resume DB CONVERSATION_ID [PROMPT]";
    let (command, db) = match (args.first(), args.get(1)) {
        (Some(c), Some(db)) => (c.as_str(), db.as_str()),
        _ => return Err(usage.into()),
    };
    let store = Arc::new(SqliteStore::open(db).await?);
    let (id, prompt) = match command {
        "start" => {
            let prompt = args.get(2).ok_or(usage)?;
            // The conversation is created with its header (system prompt, tools).
            let header = LLMChain::new(model()?)
                .with_system("You send short emails for the user.")
                .with_tool(send_email()?)
                .conversation()
                .clone();
            let id = store
                .create_conversation(NewConversation::from_conversation(header).with_title(prompt))
                .await?;
            println!("conversation {id}");
            (id, Some(prompt.clone()))
        }
        "resume" => (args.get(2).ok_or(usage)?.clone(), args.get(3).cloned()),
        _ => return Err(usage.into()),
    };
    // Every stored run goes through a lease: one process at a time holds the
    // conversation's run, every write is fenced by the lease (a process that lost it
    // writes nothing more), a call left `executing` by a killed process is answered
    // "outcome unknown", and how the run ended is recorded.
    let held = LeasedRun::claim(
        store.clone(),
        Claim::Conversation {
            id: id.clone(),
            state: RunState {
                mode: Mode::while_needs_response().name().into(),
                ..Default::default()
            },
        },
        "durable_agent",
        Duration::from_secs(30),
    )
    .await?;
    // The chain over the conversation as the store holds it (in any process), built
    // while the lease is kept; a chain that cannot be built fails the run, on record.
    let started = held
        .start(|run, state| async move {
            println!(
                "conversation {}: {} messages",
                run.conversation_id,
                state.conversation.messages.len()
            );
            let built = || -> Result<LLMChain, Box<dyn std::error::Error>> {
                Ok(LLMChain::from_state(model()?, state)
                    .with_tool(send_email()?)
                    .with_review(review))
            };
            built().map_err(|e| NotBuilt::permanent(e.to_string()))
        })
        .await;
    let (held, chain) =
        started.map_err(|ended| format!("the run did not start: {:?}", ended.end))?;
    let mut drive = Drive::new();
    if let Some(prompt) = prompt {
        drive = drive.message(Message::user(prompt));
    }
    let ended = held.drive(chain, Mode::while_needs_response(), drive).await;
    if let Some(e) = ended.error {
        return Err(e.into());
    }
    println!("the run ended: {:?}", ended.end);
    let chain = ended
        .chain
        .ok_or("the run ended before its chain was built")?;
    for m in chain.messages() {
        for r in &m.tool_results {
            println!("tool result {}: {}", r.tool_call_id, r.content_text());
        }
    }
    let answer = chain
        .last_message()
        .and_then(Message::text)
        .unwrap_or_default();
    println!("answer: {answer}");
    Ok(())
}

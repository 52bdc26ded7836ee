//! `llmchain demo`: an offline agent conversation on the embedded defaults.
//!
//! A scripted model speaks a real provider wire format (Anthropic by default, any with
//! `--wire`) through the real decoder; the tools are real (calculator, clock, a file
//! reader confined to a scratch directory).
//! Along the way one call fails, one is refused and then corrected, and one goes
//! through review.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use llmchain::chain::{Callbacks, LLMChain, Mode, ReviewDecision, ScriptedModel};
use llmchain::message::{Message, ToolCall};
use llmchain::provider::render::ResponseScript;
use llmchain::provider::{Format, StreamEvent};

use llmchain_store::{Drive, NewConversation, RunEnd, Store};

use crate::error::{CliError, CliResult};
use crate::stdout::{out, outln};
use crate::tools;

/// Arguments of `llmchain demo`.
#[derive(Debug, clap::Args)]
pub(crate) struct DemoArgs {
    /// Wire format the scripted model speaks: anthropic, openai (openai_chat),
    /// openai_responses, gemini or ollama.
    #[arg(long, default_value = "anthropic")]
    pub wire: String,
    /// Milliseconds between streamed chunks (0 for none).
    #[arg(long, default_value_t = 2)]
    pub delay_ms: u64,
    /// Database URL: sqlite://PATH or postgres://… (default: $LLMCHAIN_DATABASE_URL, else
    /// the default SQLite file in the user's data directory).
    #[arg(long)]
    pub db: Option<String>,
}

const NOTES: &str = "Release notes 0.1\n- Streaming tool calls never garble.\n- Tool errors never crash a loop.\n- Conversations survive a crash.\n";

fn script() -> Vec<ResponseScript> {
    vec![
        ResponseScript::default()
            .with_reasoning("Three things: arithmetic, the time, and a file. I can do all at once.")
            .with_text("I'll compute that, check the clock and read your notes.")
            .with_call("toolu_01", "calculator", r#"{"expr": "(17 * 23) + 4"}"#)
            .with_call("toolu_02", "clock", "{}")
            .with_call("toolu_03", "read_file", r#"{"path": "notes.md"}"#)
            .with_usage(412, 96),
        ResponseScript::default()
            .with_text(
                "The calculator wants `expression`, and the notes are in notes.txt. Retrying.",
            )
            .with_call(
                "toolu_04",
                "calculator",
                r#"{"expression": "(17 * 23) + 4"}"#,
            )
            .with_call("toolu_05", "read_file", r#"{"path": "notes.txt"}"#)
            .with_usage(655, 71),
        ResponseScript::text(
            "(17 × 23) + 4 = 395. I read the clock for you above. Your release notes promise three \
             things: streaming tool calls that never garble, tool errors that never crash a loop, \
             and conversations that survive a crash.",
        )
        .with_usage(802, 54),
    ]
}

/// Runs the demo.
pub(crate) fn run(args: DemoArgs) -> CliResult {
    let format: Format = args.wire.parse().map_err(|_| {
        CliError::usage(format!(
            "unknown --wire '{}': expected anthropic, openai (openai_chat), openai_responses, gemini or ollama",
            args.wire
        ))
    })?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::io("cannot start the async runtime", e))?;
    rt.block_on(demo(format, Duration::from_millis(args.delay_ms), args.db))
}

async fn demo(format: Format, delay: Duration, db: Option<String>) -> CliResult {
    let scratch = tempfile::Builder::new()
        .prefix("llmchain-demo-")
        .tempdir()
        .map_err(|e| CliError::io("cannot create a scratch directory", e))?;
    std::fs::write(scratch.path().join("notes.txt"), NOTES)
        .map_err(|e| CliError::io("cannot write the demo notes", e))?;

    let mut model = ScriptedModel::new(format).chunk_size(9);
    if !delay.is_zero() {
        model = model.chunk_delay(delay);
    }
    for turn in script() {
        model = model
            .respond(turn)
            .map_err(|e| CliError::runtime(e.to_string()))?;
    }

    let tty = std::io::stdout().is_terminal();
    // 0: at a line start; 1: printing reasoning; 2: printing text.
    let state = Arc::new(AtomicU8::new(0));
    let (ls1, ls2) = (state.clone(), state.clone());
    let callbacks = Callbacks::new()
        .on_llm_new_delta(move |ev| {
            let (text, dim) = match ev {
                StreamEvent::TextDelta { text, .. } => (text, false),
                StreamEvent::ReasoningDelta { text, .. } => (text, true),
                _ => return,
            };
            let want = if dim { 1 } else { 2 };
            let was = ls1.swap(want, Ordering::Relaxed);
            if was != want {
                if was != 0 {
                    outln!();
                }
                out!("{}", if dim { "thinking: " } else { "assistant: " });
            }
            if dim && tty {
                out!("\x1b[2m{text}\x1b[0m");
            } else {
                out!("{text}");
            }
        })
        .on_llm_new_message(move |_| {
            if ls2.swap(0, Ordering::Relaxed) != 0 {
                outln!();
            }
        })
        .on_tool_call_review(|call, decision| {
            if call.name.as_deref() != Some("read_file") {
                return;
            }
            outln!(
                "  ? review {}: {}",
                describe(call),
                match decision {
                    ReviewDecision::Approve => "approved (inside the scratch directory)",
                    ReviewDecision::Deny { .. } => "denied (outside the scratch directory)",
                    ReviewDecision::Edit { .. } => "edited",
                    ReviewDecision::Reject { .. } => "rejected",
                    ReviewDecision::Interrupt => "waiting for a human",
                    _ => "decided",
                }
            )
        })
        .on_tool_execution_started(|call| outln!("  → {}", describe(call)))
        .on_tool_execution_completed(|call, r| {
            outln!(
                "  ✓ {}: {}",
                call.name.as_deref().unwrap_or("?"),
                condensed(&r.content_text())
            )
        })
        .on_tool_execution_failed(|call, r| {
            let kind = if r.is_refusal() { "refused" } else { "failed" };
            outln!(
                "  ✗ {} {kind}: {}",
                call.name.as_deref().unwrap_or("?"),
                condensed(&r.content_text())
            )
        });

    let chain = LLMChain::new(Arc::new(model))
        .with_system("You are a helpful assistant with a calculator, a clock and a file reader.")
        .with_tool(tools::calculator())
        .with_tool(tools::clock())
        .with_tool(tools::read_file(scratch.path()))
        .with_review(|call: &ToolCall| {
            // Only file reads are reviewed: approve paths without `..` or a leading `/`.
            let path = call.arguments_as_map();
            let path = path.get("path").and_then(|p| p.as_str()).unwrap_or("");
            if path.starts_with('/') || path.contains("..") {
                ReviewDecision::Deny {
                    reason: "Reading outside the working directory is not allowed.".into(),
                }
            } else {
                ReviewDecision::Approve
            }
        })
        .with_callbacks(callbacks);

    // The conversation is stored as it goes: every message and every tool status.
    let (store, location) = crate::store_access::open_store(db).await?;
    let store = Arc::new(store);
    let header = chain.conversation().clone();
    let conversation_id = store
        .create_conversation(NewConversation::from_conversation(header).with_title("llmchain demo"))
        .await
        .map_err(CliError::store)?;

    // Like every stored run, the demo's goes through a lease (`LeasedRun`): its writes
    // are fenced by it, a second process would be told who holds the conversation, and
    // how the run ended is recorded.
    let held = crate::interactive_run::claim(
        store.clone(),
        &conversation_id,
        Mode::while_needs_response().name(),
        serde_json::Map::new(),
    )
    .await?;
    let question = "Please compute (17 * 23) + 4, tell me the time, and summarise my notes file.";
    outln!("user: {question}");
    let ended = held
        .drive(
            chain,
            Mode::while_needs_response(),
            Drive::new().message(Message::user(question)),
        )
        .await;
    if let Some(e) = &ended.error {
        return Err(CliError::runtime(format!("the demo run failed: {e}")).typed(e.error_type()));
    }
    let chain = match (ended.end, ended.chain) {
        (RunEnd::Done, Some(chain)) => chain,
        (end, _) => {
            return Err(CliError::runtime(format!("the demo ended early: {end:?}")));
        }
    };
    let usage = crate::usage::summary(&crate::usage::total(chain.messages()));
    outln!();
    outln!(
        "{} messages, {} model calls, {} (scripted {} wire format).",
        chain.messages().len(),
        chain
            .messages()
            .iter()
            .filter(|m| m.role == llmchain::message::Role::Assistant)
            .count(),
        usage,
        format
    );
    outln!("Conversation {conversation_id} stored in {location}");
    outln!("See it with: llmchain conversations show {conversation_id}");
    Ok(())
}

fn describe(call: &ToolCall) -> String {
    format!(
        "{}({})",
        call.name.as_deref().unwrap_or("?"),
        serde_json::Value::Object(call.arguments_as_map())
    )
}

/// The first line and any "did you mean" hint, on one line, at most 120 characters.
fn condensed(s: &str) -> String {
    let mut out: String = s.lines().next().unwrap_or("").to_owned();
    if let Some(hint) = s.lines().skip(1).find(|l| l.contains("did you mean")) {
        out.push(' ');
        out.push_str(hint.trim());
    }
    if out.chars().count() > 120 {
        out = out.chars().take(117).collect::<String>() + "...";
    }
    out
}

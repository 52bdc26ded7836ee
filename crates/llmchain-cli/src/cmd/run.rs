//! `llmchain run`: a real agent run against a provider over HTTP.
//!
//! Assistant text streams to stdout as its bytes arrive; reasoning, tool activity, the
//! spinner and the usage summary go to stderr, so `llmchain run ... > answer.txt` keeps
//! only the answer.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use llmchain::chain::{Callbacks, ChainError, LLMChain, Mode, ModelError, RunOutcome};
use llmchain::message::{Message, Role, ToolCall};
use llmchain::provider::http::{HttpModel, HttpModelConfig, base_url_env_var, key_env_vars};
use llmchain::provider::{Format, StreamEvent};

use crate::error::{CliError, CliResult};
use crate::tools;

/// Arguments of `llmchain run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Provider: openai (Chat Completions, also any compatible server),
    /// openai_responses, anthropic, gemini or ollama.
    #[arg(long, default_value = "openai")]
    pub provider: String,
    /// Model id (default: a current model of the provider).
    #[arg(long)]
    pub model: Option<String>,
    /// Base URL (overrides OPENAI_BASE_URL, ANTHROPIC_BASE_URL, GEMINI_BASE_URL, OLLAMA_HOST).
    #[arg(long)]
    pub base_url: Option<String>,
    /// System prompt.
    #[arg(long)]
    pub system: Option<String>,
    /// The prompt.
    pub prompt: String,
}

fn parse_provider(p: &str) -> Result<Format, CliError> {
    Ok(match p {
        "openai" | "openai_chat" => Format::OpenAiChat,
        "openai_responses" => Format::OpenAiResponses,
        "anthropic" => Format::Anthropic,
        "gemini" => Format::Gemini,
        "ollama" => Format::Ollama,
        other => {
            return Err(CliError::Usage(format!(
                "unknown --provider '{other}': expected openai, openai_responses, anthropic, gemini or ollama"
            )));
        }
    })
}

fn default_model(format: Format) -> &'static str {
    match format {
        Format::OpenAiChat => "gpt-4.1",
        Format::OpenAiResponses => "gpt-5",
        Format::Anthropic => "claude-sonnet-4-5",
        Format::Gemini => "gemini-2.5-flash",
        Format::Ollama => "llama3.2",
    }
}

/// Runs `llmchain run`.
pub fn run(args: RunArgs) -> CliResult {
    let format = parse_provider(&args.provider)?;
    if args.prompt.trim().is_empty() {
        return Err(CliError::Usage("the prompt is empty".into()));
    }
    let model_id = args
        .model
        .clone()
        .unwrap_or_else(|| default_model(format).to_owned());
    let base_override = args.base_url.clone();
    let config = HttpModelConfig::from_lookup(format, model_id, |k| {
        if k == base_url_env_var(format) && base_override.is_some() {
            return base_override.clone();
        }
        std::env::var(k).ok()
    })
    .map_err(|e| CliError::Runtime(one_line(&e.to_string())))?;
    let model = HttpModel::new(config).map_err(|e| CliError::Runtime(one_line(&e.to_string())))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Runtime(format!("cannot start the async runtime: {e}")))?;
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::Runtime(format!("cannot read the current directory: {e}")))?;
    rt.block_on(agent(model, format, args.system, args.prompt, cwd))
}

/// A spinner on stderr while waiting for the model (only when stderr is a terminal).
#[derive(Clone)]
struct Spinner(Arc<Mutex<Option<ProgressBar>>>, bool);

impl Spinner {
    fn new() -> Self {
        Spinner(Arc::new(Mutex::new(None)), std::io::stderr().is_terminal())
    }

    fn start(&self, msg: &str) {
        if !self.1 {
            return;
        }
        let pb = ProgressBar::new_spinner();
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg}") {
            pb.set_style(style);
        }
        pb.set_message(msg.to_owned());
        pb.enable_steady_tick(Duration::from_millis(80));
        if let Some(old) = self.0.lock().unwrap_or_else(|p| p.into_inner()).replace(pb) {
            old.finish_and_clear();
        }
    }

    fn stop(&self) {
        if let Some(pb) = self.0.lock().unwrap_or_else(|p| p.into_inner()).take() {
            pb.finish_and_clear();
        }
    }
}

async fn agent(
    model: HttpModel,
    format: Format,
    system: Option<String>,
    prompt: String,
    cwd: std::path::PathBuf,
) -> CliResult {
    let spinner = Spinner::new();
    // Text printed since the last line break on stdout.
    let mid_line = Arc::new(AtomicBool::new(false));
    let (s1, s2, s3) = (spinner.clone(), spinner.clone(), spinner.clone());
    let (m1, m2) = (mid_line.clone(), mid_line.clone());
    let callbacks = Callbacks::new()
        .on_llm_new_delta(move |ev| {
            s1.stop();
            match ev {
                StreamEvent::TextDelta { text, .. } => {
                    print!("{text}");
                    let _ = std::io::stdout().flush();
                    m1.store(!text.ends_with('\n'), Ordering::Relaxed);
                }
                StreamEvent::ReasoningDelta { text, .. } => {
                    eprint!("{text}");
                }
                _ => {}
            }
        })
        .on_llm_new_message(move |_| {
            if m2.swap(false, Ordering::Relaxed) {
                println!();
            }
        })
        .on_tool_execution_started(|call| eprintln!("  → {}", describe(call)))
        .on_tool_execution_completed(|call, r| {
            eprintln!("  ✓ {}: {}", name(call), first_line(&r.content_text()))
        })
        .on_tool_execution_failed(|call, r| {
            eprintln!("  ✗ {}: {}", name(call), first_line(&r.content_text()))
        })
        .on_tool_response_created(move |_| s2.start("waiting for the model…"))
        .on_llm_error(move |_| s3.stop());
    let mut chain = LLMChain::new(Arc::new(model))
        .with_tool(tools::calculator())
        .with_tool(tools::clock())
        .with_tool(tools::read_file(cwd))
        .with_callbacks(callbacks);
    if let Some(s) = system {
        chain = chain.with_system(s);
    }
    chain
        .add_message(Message::user(prompt))
        .await
        .map_err(|e| CliError::Runtime(e.to_string()))?;
    spinner.start("waiting for the model…");
    let result = chain.run(Mode::while_needs_response()).await;
    spinner.stop();
    if mid_line.swap(false, Ordering::Relaxed) {
        println!();
    }
    let outcome = result.map_err(|e| CliError::Runtime(explain(&e, format)))?;
    if outcome != RunOutcome::Done {
        return Err(CliError::Runtime(format!(
            "the run ended early: {outcome:?}"
        )));
    }
    let calls = chain
        .messages()
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .count();
    let (input, output) = chain
        .messages()
        .iter()
        .filter_map(Message::usage)
        .fold((0, 0), |(i, o), u| {
            (i + u.input_tokens, o + u.output_tokens)
        });
    eprintln!("usage: {input} input / {output} output tokens in {calls} model call(s)");
    Ok(())
}

/// A one-line error that says what to set.
fn explain(e: &ChainError, format: Format) -> String {
    let model_error = match e {
        ChainError::Model(m) | ChainError::AllFallbacksFailed(m) => Some(m),
        _ => None,
    };
    let hint = match model_error {
        Some(ModelError::Connect { .. }) | Some(ModelError::Timeout { .. }) => format!(
            " (is the server running? set --base-url or {})",
            base_url_env_var(format)
        ),
        Some(ModelError::Http {
            status: 401 | 403, ..
        }) => {
            let vars = key_env_vars(format);
            if vars.is_empty() {
                String::new()
            } else {
                format!(" (check {})", vars.join(" or "))
            }
        }
        Some(ModelError::Http { status: 404, .. }) => " (check --model)".into(),
        _ => String::new(),
    };
    one_line(&format!("{e}{hint}"))
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn name(call: &ToolCall) -> &str {
    call.name.as_deref().unwrap_or("?")
}

fn describe(call: &ToolCall) -> String {
    format!(
        "{}({})",
        name(call),
        serde_json::Value::Object(call.arguments_as_map())
    )
}

fn first_line(s: &str) -> String {
    let line = s.lines().next().unwrap_or("");
    if line.chars().count() > 120 {
        line.chars().take(117).collect::<String>() + "..."
    } else {
        line.to_owned()
    }
}

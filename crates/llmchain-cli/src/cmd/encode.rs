//! `llmchain encode --format F [--model M] CONVERSATION.json`: prints the request body
//! for a conversation file (the storage format's conversation, docs/storage-format.md).
//!
//! A conversation whose calls and results do not pair up is refused with exit 2 and the
//! JSON path of the first problem (`Conversation::inconsistencies`); argument text that
//! is not a JSON object is sent as `{}`, as the chain sends it, with a warning.

use llmchain::conversation::{Conversation, Severity};
use llmchain::provider::RequestOptions;

use super::input::{codec_for, read_input};
use crate::error::{CliError, CliResult};
use crate::shown;

/// Arguments of `llmchain encode`.
#[derive(Debug, clap::Args)]
pub(crate) struct EncodeArgs {
    /// The wire format, by name or alias (openai_chat, openai_responses, anthropic, gemini,
    /// ollama, bedrock_converse, and any registered; an unknown name lists them).
    #[arg(long)]
    pub format: String,
    /// The model id [default: the one `llmchain run` uses for the format].
    #[arg(long)]
    pub model: Option<String>,
    /// Ask for a streamed response.
    #[arg(long)]
    pub stream: bool,
    /// The conversation file; `-` reads stdin.
    pub conversation: String,
}

/// Refuses a conversation whose calls and results do not pair up (every provider
/// rejects such a request), naming each place by its JSON path; warns about what is sent
/// in another form than stored.
fn check(conv: &Conversation, file: &str) -> CliResult {
    let (refused, altered): (Vec<_>, Vec<_>) = conv
        .inconsistencies()
        .into_iter()
        .partition(|i| i.severity == Severity::Refused);
    for i in &altered {
        eprintln!(
            "llmchain: warning: {file}: {}",
            shown::inline(&i.to_string(), 300)
        );
    }
    let Some(first) = refused.first() else {
        return Ok(());
    };
    let more = match refused.len() {
        1 => String::new(),
        n => format!(" (and {} more)", n - 1),
    };
    Err(CliError::usage(format!(
        "{file} cannot be sent: {}{more}",
        shown::inline(&first.to_string(), 300)
    )))
}

/// Runs the command.
pub(crate) fn run(args: EncodeArgs) -> CliResult {
    let (format, codec) = codec_for(&args.format)?;
    let bytes = read_input(Some(&args.conversation))?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|e| CliError::usage(format!("{} is not UTF-8 text: {e}", args.conversation)))?;
    let conv = Conversation::from_json(text)
        .map_err(|e| CliError::usage(format!("invalid conversation {}: {e}", args.conversation)))?;
    check(&conv, &args.conversation)?;
    let opts = RequestOptions {
        model: match args.model {
            Some(model) => model,
            None => llmchain::http::providers::for_format(format)
                .map(|p| p.default_model().to_owned())
                .map_err(|e| CliError::usage(format!("{e}; or name the model with --model")))?,
        },
        stream: args.stream,
        ..RequestOptions::default()
    };
    let body = codec
        .encode(&conv, &opts)
        .map_err(|e| CliError::usage(format!("cannot encode for {format}: {e}")))?;
    let mut body = body;
    body.push(b'\n');
    crate::stdout::write_bytes(&body).map_err(|e| CliError::io("cannot write the body", e))?;
    Ok(())
}

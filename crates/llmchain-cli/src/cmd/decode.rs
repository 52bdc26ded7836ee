//! `llmchain decode --format F [--chunk-size N] [FILE|-]`: decodes a captured response
//! body (streamed or not) and prints the decode report (SPEC §6).

use llmchain::provider::DecoderConfig;

use super::input::{codec_for, read_input};
use crate::error::{CliError, CliResult};

/// Arguments of `llmchain decode`.
#[derive(Debug, clap::Args)]
pub struct DecodeArgs {
    /// The wire format: openai_chat (or openai), openai_responses, anthropic, gemini, ollama.
    #[arg(long)]
    pub format: String,
    /// Feed a streamed body to the decoder N bytes at a time (default: all at once).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub chunk_size: Option<u64>,
    /// The body file; `-` or nothing reads stdin.
    pub file: Option<String>,
}

/// Runs the command.
pub fn run(args: DecodeArgs) -> CliResult {
    let (format, codec) = codec_for(&args.format)?;
    let body = read_input(args.file.as_deref())?;
    let chunk = usize::try_from(args.chunk_size.unwrap_or(0)).unwrap_or(usize::MAX);
    let outcome = codec
        .decode_body(&body, chunk, DecoderConfig::default())
        .map_err(|e| CliError::Usage(format!("cannot decode the {format} body: {e}")))?;
    let report = serde_json::to_string_pretty(&outcome.report())
        .map_err(|e| CliError::Runtime(format!("cannot write the report: {e}")))?;
    println!("{report}");
    Ok(())
}

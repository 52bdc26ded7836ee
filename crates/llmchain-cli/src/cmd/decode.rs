//! `llmchain decode --format F [--chunk-size N] [FILE|-]`: decodes a captured response
//! body (streamed or not) and prints the decode report.
//!
//! A streamed body is decoded as it is read, so its size does not matter: the memory
//! used is that of the decoded message, not of the body (a body of keep-alive comments
//! of any length costs nothing). A body that is one JSON document is read whole, up to
//! [`MAX_DOCUMENT_BYTES`].

use std::io::Read;

use llmchain::provider::{Codec, DecodeOutcome, DecoderConfig, Format};

use super::input::{codec_for, open_input};
use crate::error::{CliError, CliResult};
use crate::stdout::outln;

/// The largest non-streamed body read (the HTTP client's default response cap).
pub(crate) const MAX_DOCUMENT_BYTES: usize = 64 * 1024 * 1024;

/// How much is read at a time.
const READ_BYTES: usize = 64 * 1024;

/// Arguments of `llmchain decode`.
#[derive(Debug, clap::Args)]
pub(crate) struct DecodeArgs {
    /// The wire format, by name or alias (openai_chat, openai_responses, anthropic, gemini,
    /// ollama, bedrock_converse, and any registered; an unknown name lists them).
    #[arg(long)]
    pub format: String,
    /// Feed a streamed body to the decoder N bytes at a time (default: as it is read,
    /// 64 KiB at a time).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub chunk_size: Option<u64>,
    /// The body file; `-` or nothing reads stdin.
    pub file: Option<String>,
}

/// Runs the command.
pub(crate) fn run(args: DecodeArgs) -> CliResult {
    let (format, codec) = codec_for(&args.format)?;
    let mut input = open_input(args.file.as_deref())?;
    let chunk = args
        .chunk_size
        .map_or(READ_BYTES, |n| usize::try_from(n).unwrap_or(usize::MAX));
    let outcome = decode(codec, format, &mut input, chunk)?;
    let report = serde_json::to_string_pretty(&outcome.report())
        .map_err(|e| CliError::io("cannot write the report", e))?;
    outln!("{report}");
    Ok(())
}

fn decode(
    codec: &dyn Codec,
    format: Format,
    input: &mut dyn Read,
    chunk: usize,
) -> Result<DecodeOutcome, CliError> {
    let config = DecoderConfig::default();
    let bad = |e: llmchain::provider::DecodeError| {
        CliError::usage(format!("cannot decode the {format} body: {e}"))
    };
    // Read until the beginning tells whether the body is streamed. Each read doubles
    // what is buffered, so a codec that parses the prefix does linear work in all.
    let mut head = Vec::new();
    let streamed = loop {
        let want = READ_BYTES.max(head.len());
        if read_some(input, &mut head, want)? == 0 {
            // All of it is here: decided on the whole body, as always.
            return codec.decode_body(&head, chunk, config).map_err(bad);
        }
        if let Some(streamed) = codec.is_stream_prefix(&head) {
            break streamed;
        }
        too_big(&head)?;
    };
    if !streamed {
        while read_some(input, &mut head, READ_BYTES)? > 0 {
            too_big(&head)?;
        }
        return codec.decode_response(&head, config).map_err(bad);
    }
    let mut decoder = codec.stream_decoder(config);
    let mut ignore = |_: llmchain::provider::StreamEvent<'_>| {};
    for piece in head.chunks(chunk) {
        decoder.feed(piece, &mut ignore).map_err(bad)?;
    }
    let mut buf = vec![0u8; READ_BYTES.max(chunk.min(MAX_DOCUMENT_BYTES))];
    loop {
        let n = read_into(input, &mut buf)?;
        if n == 0 {
            break;
        }
        for piece in buf[..n].chunks(chunk) {
            decoder.feed(piece, &mut ignore).map_err(bad)?;
        }
    }
    decoder.finish(&mut ignore).map_err(bad)
}

fn too_big(head: &[u8]) -> CliResult {
    if head.len() > MAX_DOCUMENT_BYTES {
        return Err(CliError::usage(format!(
            "the body is one JSON document of more than {} MiB; llmchain decode reads such a body whole and stops there",
            MAX_DOCUMENT_BYTES >> 20
        )));
    }
    Ok(())
}

/// Appends up to `want` bytes read from `input` to `buf`; 0 at the end.
fn read_some(input: &mut dyn Read, buf: &mut Vec<u8>, want: usize) -> Result<usize, CliError> {
    let start = buf.len();
    buf.resize(start + want, 0);
    let n = read_into(input, &mut buf[start..]);
    buf.truncate(start + *n.as_ref().unwrap_or(&0));
    n
}

fn read_into(input: &mut dyn Read, buf: &mut [u8]) -> Result<usize, CliError> {
    loop {
        match input.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            r => return r.map_err(|e| CliError::usage(format!("cannot read the body: {e}"))),
        }
    }
}

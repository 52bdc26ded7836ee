//! The `llmchain` command-line tool (SPEC §6).
//!
//! Exit codes: 0 ok; 1 runtime failure; 2 usage or bad input — always with a one-line
//! error on stderr, never a panic or backtrace.

mod cmd;
mod error;
mod tools;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use error::CliError;

/// LLM tool calling from the terminal.
#[derive(Debug, Parser)]
#[command(name = "llmchain", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Decode a captured provider response body and print a JSON decode report.
    Decode(cmd::decode::DecodeArgs),
    /// Encode a conversation file into a provider request body.
    Encode(cmd::encode::EncodeArgs),
    /// Run an offline agent conversation on the embedded defaults.
    Demo(cmd::demo::DemoArgs),
    /// Run an agent against a provider over HTTP, with the built-in tools.
    Run(cmd::run::RunArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            let code = match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => 0,
                _ => 2,
            };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let result = match cli.command {
        Command::Decode(args) => cmd::decode::run(args),
        Command::Encode(args) => cmd::encode::run(args),
        Command::Demo(args) => cmd::demo::run(args),
        Command::Run(args) => cmd::run::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("llmchain: {e}");
            e.exit_code()
        }
    }
}

#[allow(dead_code)]
fn usage(msg: impl Into<String>) -> CliError {
    CliError::Usage(msg.into())
}

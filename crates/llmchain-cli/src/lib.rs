//! The `llmchain` command-line tool, as a library: [`main`] is the whole command.
//!
//! An application that speaks a wire format of its own builds its own `llmchain` by
//! registering the format first ([`llmchain::provider::Format::register`]) and then
//! calling [`main`]: `decode` and `encode` take the format by name like a built-in one
//! (`examples/linechat` is such an application).
//!
//! Exit codes: 0 ok; 1 runtime failure; 2 usage or bad input; 130 interrupted (Ctrl-C) — always with a one-line
//! error on stderr, never a panic or backtrace.

mod args_preview;
mod attach;
mod cmd;
mod config;
mod error;
mod interactive_run;
mod job;
mod keys;
mod markdown;
mod parts;
mod policy_rules;
mod profile_flags;
mod progress;
mod review;
mod shown;
mod stdout;
mod stop;
mod store_access;
mod telemetry;
mod tools;
mod usage;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
    /// Chat in a terminal: one conversation, a question a line, answers streamed, tool
    /// calls reviewed as in `run`; Ctrl-C cancels the answer, Ctrl-D ends the session.
    Chat(Box<cmd::chat::ChatArgs>),
    /// Stored conversations: list, search, show, resume, export, delete.
    Conversations(cmd::conversations::ConversationsArgs),
    /// Serve the built-in tools over MCP, or list and call MCP servers' tools.
    Mcp(cmd::mcp::McpArgs),
    /// Provider keys kept in a file only you can read (the environment still wins):
    /// set, list, remove.
    Keys(cmd::keys::KeysArgs),
    /// The models a provider serves (asked of its API), and the config file's aliases.
    Models(cmd::models::ModelsArgs),
    /// Run an agent against a provider over HTTP, with the built-in tools (or queue it
    /// for a worker with --enqueue).
    Run(Box<cmd::run::RunArgs>),
    /// Runs, queued and interactive: list, show, cancel, retry.
    Runs(cmd::runs::RunsArgs),
    /// The review inbox: tool calls waiting for a person (list, show, approve, deny,
    /// reject, edit).
    Reviews(cmd::reviews::ReviewsArgs),
    /// Serve AI SDK front ends (useChat) and a chat page of its own: the UI message
    /// stream protocol, approvals from the review inbox.
    Serve(Box<cmd::serve::ServeArgs>),
    /// Execute queued runs (`run --enqueue`) under the profiles of this machine's
    /// configuration, with leases, retries and a heartbeat; several workers on several
    /// machines may share a PostgreSQL database. A worker never asks at a terminal: a
    /// call that needs a person pauses its run for `llmchain reviews`.
    Worker(Box<cmd::worker::WorkerArgs>),
    /// The config file's profiles (provider, model, base URL, MCP servers, trust,
    /// approve policy, tools, root): `llmchain config path | profiles`.
    Config(config::ConfigArgs),
    /// A profile's policy rules (`[[policy]]`): check them (examples run), or explain
    /// which rule fires on a call.
    Policy(cmd::policy::PolicyArgs),
}

/// Runs the `llmchain` command with the process's arguments and returns its exit code
/// (0 ok, 1 runtime failure, 2 usage or bad input, 130 interrupted).
pub fn main() -> ExitCode {
    // With --json, a failure is also one JSON object on stdout, for the script reading it.
    let json = std::env::args_os()
        .skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json");
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
            }
            let text = usage_text(&e.render().to_string());
            eprintln!("{text}");
            if json {
                print_json_error(&error::CliError::usage(
                    text.trim_start_matches("llmchain: "),
                ));
            }
            return ExitCode::from(2);
        }
    };
    // Every secret in sight is known to the masker before any outside text is read.
    keys::register_known();
    // Spans exported over OTLP when OTEL_EXPORTER_OTLP_* says where; flushed when this
    // is dropped, after the command.
    let exporting = telemetry::init();
    let result = match cli.command {
        Command::Decode(args) => cmd::decode::run(args),
        Command::Encode(args) => cmd::encode::run(args),
        Command::Demo(args) => cmd::demo::run(args),
        Command::Chat(args) => cmd::chat::run(*args),
        Command::Conversations(args) => cmd::conversations::run(args),
        Command::Keys(args) => cmd::keys::run(args),
        Command::Mcp(args) => cmd::mcp::run(args),
        Command::Models(args) => cmd::models::run(args),
        Command::Run(args) => cmd::run::run(*args),
        Command::Runs(args) => cmd::runs::run(args),
        Command::Reviews(args) => cmd::reviews::run(args),
        Command::Serve(args) => cmd::serve::run(*args),
        Command::Worker(args) => cmd::worker::run(*args),
        Command::Config(args) => config::run(args),
        Command::Policy(args) => cmd::policy::run(args),
    };
    drop(exporting);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Errors carry text from outside (a provider's message, an MCP server's
            // stderr): escaped like every other such text.
            eprintln!("llmchain: {}", shown::block(&e.report()));
            if json {
                print_json_error(&e);
            }
            e.exit_code()
        }
    }
}

/// `{"error": {"kind", "type", "message", "exit_code"}}` on stdout: `kind` is the exit
/// class (`usage`, `runtime`, `interrupted`), `type` what failed (`connect`,
/// `conversation_not_found`, `rate_limit`…; the class itself when nothing more precise is
/// known); the message JSON-escaped, control characters included, secrets masked.
fn print_json_error(e: &error::CliError) {
    let v = serde_json::json!({"error": {
        "kind": e.exit().as_str(),
        "type": e.error_type(),
        "message": llmchain::secrets::mask(&e.report()),
        "exit_code": e.exit().code(),
    }});
    println!("{v}");
}

/// Clap's usage error, whole: what is wrong or missing, a tip, the usage line and the
/// `--help` hint; `llmchain:` in place of clap's `error:`.
fn usage_text(text: &str) -> String {
    let text = text.trim_end();
    format!("llmchain: {}", text.strip_prefix("error: ").unwrap_or(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_usage_error_shows_what_is_missing_the_usage_and_the_help_hint() {
        let e = Cli::try_parse_from(["llmchain", "decode", "oai.sse"]).unwrap_err();
        let text = usage_text(&e.render().to_string());
        assert!(
            text.starts_with(
                "llmchain: the following required arguments were not provided:\n  --format <FORMAT>"
            ),
            "{text}"
        );
        assert!(
            text.contains("Usage: llmchain decode --format <FORMAT>"),
            "{text}"
        );
        assert!(
            text.ends_with("For more information, try '--help'."),
            "{text}"
        );
        let e = Cli::try_parse_from(["llmchain", "demo", "--wir", "x"]).unwrap_err();
        let text = usage_text(&e.render().to_string());
        assert!(
            text.contains("tip: a similar argument exists: '--wire'"),
            "{text}"
        );
    }
}

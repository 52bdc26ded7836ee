//! `llmchain mcp`: serve the built-in tools over MCP, and inspect or call the tools of
//! MCP servers.
//!
//! * `llmchain mcp serve [--root DIR]` serves the calculator, the clock and the file
//!   reader (confined to DIR) to any MCP client over stdio.
//! * `llmchain mcp list (--mcp "CMD ARGS" | --mcp-http URL)...` prints the tools of
//!   MCP servers with their hints.
//! * `llmchain mcp call (--mcp ..|--mcp-http ..) TOOL [JSON] [--approve always|never|ask]`
//!   calls one tool and prints the result as JSON: the command names the tool and its
//!   arguments, so it is the approval (`always` by default; `--approve` as in
//!   `llmchain run` to review anyway). Exit 1 when the tool did not run or returned an
//!   error.
//!
//! [`connect_mcp_tools`] is what `llmchain run --mcp/--mcp-http` uses.

use std::time::Duration;

use std::path::PathBuf;

use llmchain::chain::{ReviewDecision, ReviewHandler};
use llmchain::message::ToolCall;
use llmchain::tool::ToolContext;
use llmchain_mcp::{McpOptions, McpTool, ServerSpec};
use serde_json::{Value, json};

use crate::error::{CliError, CliResult};
use crate::review::{ApprovalPolicy, ToolMeta, approval_handler};
use crate::stdout::outln;
use crate::tools;

/// Arguments of `llmchain mcp`.
#[derive(Debug, clap::Args)]
pub(crate) struct McpArgs {
    #[command(subcommand)]
    command: McpCommand,
}

/// Which MCP servers to use.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct ServerArgs {
    /// An MCP server to start, as "CMD ARGS" (shell quoting); repeatable.
    #[arg(long = "mcp", value_name = "CMD ARGS")]
    pub mcp: Vec<String>,
    /// A streamable-HTTP MCP endpoint; repeatable.
    #[arg(long = "mcp-http", value_name = "URL")]
    pub mcp_http: Vec<String>,
    /// Trust this MCP server's annotations (its short name, as in `server__tool`: the
    /// SERVER column of `llmchain mcp list`; repeatable): with `--approve auto`, only the built-in tools and the tools that a
    /// trusted server annotates read-only run without a question. Another server's
    /// "read-only" is its own claim, shown as such, and asked about (denied without a
    /// terminal).
    #[arg(long = "trust", value_name = "SERVER")]
    pub trust: Vec<String>,
    /// Seconds an MCP server may take to start and list its tools [default: 10].
    #[arg(long = "mcp-start-timeout", value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub start_timeout: Option<u64>,
    /// Prefix every MCP tool's name with its server's (`server__tool`), so same-named
    /// tools of several servers (or copies of one) can be told apart. By default only
    /// a name already taken gets the prefix.
    #[arg(long = "mcp-prefix")]
    pub prefix: bool,
    /// Seconds one MCP tool call may take [default: 120].
    #[arg(long = "mcp-timeout", value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub call_timeout: Option<u64>,
}

/// The MCP options of these flags.
fn mcp_options(servers: &ServerArgs) -> McpOptions {
    let start = Duration::from_secs(servers.start_timeout.unwrap_or(DEFAULT_START_SECS));
    McpOptions {
        handshake_timeout: start,
        list_timeout: start,
        timeout: servers
            .call_timeout
            .map_or(llmchain_mcp::DEFAULT_TIMEOUT, Duration::from_secs),
        prefix: if servers.prefix {
            llmchain_mcp::Prefix::Always
        } else {
            llmchain_mcp::Prefix::OnCollision
        },
        ..McpOptions::default()
    }
}

/// The library's option names in an error, as the flags a CLI user sets.
fn as_flags(text: &str) -> String {
    text.replace(
        "McpOptions::prefix, --mcp-prefix in the CLI",
        "--mcp-prefix",
    )
    .replace("McpOptions::list_timeout", "--mcp-start-timeout")
    .replace("McpOptions::handshake_timeout", "--mcp-start-timeout")
}

/// The default of `--mcp-start-timeout`: a server that has not started and listed its
/// tools in 10 s is hung or waiting for something (a login, a download).
const DEFAULT_START_SECS: u64 = 10;

#[derive(Debug, clap::Subcommand)]
enum McpCommand {
    /// Serve the built-in tools (calculator, clock, read_file) over MCP on stdio.
    Serve {
        /// The directory `read_file` may read (default: the current directory).
        #[arg(long)]
        root: Option<PathBuf>,
    },
    /// List the tools of MCP servers by the names `run` sends the model (a name the
    /// built-in tools hold gets the server's prefix, as in `run`); the SERVER column is
    /// the name `--trust` takes. Without --mcp/--mcp-http: the profile's servers.
    List {
        #[command(flatten)]
        servers: ServerArgs,
        #[command(flatten)]
        names: Names,
        /// One JSON object per tool: name, server, remote name, title, description,
        /// hints and input schema.
        #[arg(long)]
        json: bool,
    },
    /// Call one tool of an MCP server and print the result as JSON (`content`: its text;
    /// `parts`: every part, images and files with their type and size). Naming the tool and
    /// its arguments is the approval (`--approve ask|never|auto` to review anyway).
    /// Exits 1 when the tool did not run or its result is an error.
    Call {
        #[command(flatten)]
        servers: ServerArgs,
        #[command(flatten)]
        names: Names,
        /// The tool (its llmchain name, as `list` prints it).
        tool: String,
        /// The arguments, a JSON object.
        #[arg(default_value = "{}")]
        args: String,
        /// Review policy (see `llmchain run --help`); default: run it.
        #[arg(long, value_enum, default_value = "always")]
        approve: ApprovalPolicy,
        /// Write the result's images and files into this directory (each part is
        /// described on stderr either way).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
}

/// Where `list` and `call` find servers and how they name tools: as `run` does.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct Names {
    /// The config file's profile whose servers (and trust) are used when no --mcp or
    /// --mcp-http is given [default: "default"].
    #[arg(long, value_name = "NAME")]
    profile: Option<String>,
    /// Name the tools as `run --no-builtin-tools` would (no name is taken by the
    /// built-in ones).
    #[arg(long)]
    no_builtin_tools: bool,
}

impl Names {
    /// The servers given, else the profile's; and the names the built-in tools hold.
    fn resolve(&self, given: ServerArgs) -> Result<(ServerArgs, Vec<&'static str>), CliError> {
        let mut servers = given;
        let mut no_builtins = self.no_builtin_tools;
        if servers.mcp.is_empty() && servers.mcp_http.is_empty() {
            let config = crate::config::load()?;
            let name = self
                .profile
                .as_deref()
                .unwrap_or(crate::config::DEFAULT_PROFILE);
            let p = config.profile(name)?;
            servers.mcp = p.mcp.clone();
            servers.mcp_http = p.mcp_http.clone();
            if servers.trust.is_empty() {
                servers.trust = p.trust.clone();
            }
            servers.prefix |= p.mcp_prefix;
            servers.start_timeout = servers.start_timeout.or(p.mcp_start_timeout);
            servers.call_timeout = servers.call_timeout.or(p.mcp_timeout);
            no_builtins |= p.no_builtin_tools;
            if servers.mcp.is_empty() && servers.mcp_http.is_empty() {
                return Err(CliError::usage(format!(
                    "name a server: --mcp \"CMD ARGS\" or --mcp-http URL (the profile {name:?} of {} has none)",
                    config
                        .path
                        .as_ref()
                        .map_or("the config file".to_owned(), |p| p.display().to_string())
                )));
            }
        }
        let reserved = if no_builtins {
            Vec::new()
        } else {
            tools::BUILTIN_NAMES.to_vec()
        };
        Ok((servers, reserved))
    }
}

/// Connects to every `--mcp` command and `--mcp-http` URL and lists their tools.
///
/// Names taken by `reserved` (e.g. the built-in tools) or by an earlier server get the
/// server's name as a prefix (`server__tool`). Failures are usage errors naming the
/// server (a command that cannot start, a handshake that fails).
pub(crate) async fn connect_mcp_tools(
    servers: &ServerArgs,
    reserved: &[&str],
) -> Result<Vec<McpTool>, CliError> {
    let mut specs = Vec::new();
    for c in &servers.mcp {
        specs.push(ServerSpec::parse_command(c).map_err(|e| CliError::usage(e.to_string()))?);
    }
    specs.extend(servers.mcp_http.iter().map(ServerSpec::http));
    llmchain_mcp::connect_all(specs, &mcp_options(servers), reserved)
        .await
        .map_err(|e| CliError::runtime(as_flags(&e.to_string())))
}

fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::io("cannot start the async runtime", e))
}

/// Runs `llmchain mcp`.
pub(crate) fn run(args: McpArgs) -> CliResult {
    let rt = runtime()?;
    match args.command {
        McpCommand::Serve { root } => {
            let root = match root {
                Some(r) => r,
                None => std::env::current_dir()
                    .map_err(|e| CliError::io("no current directory", e))?,
            };
            let tools = vec![tools::calculator(), tools::clock(), tools::read_file(root)];
            rt.block_on(llmchain_mcp::serve_stdio(tools))
                .map_err(|e| CliError::runtime(format!("MCP server: {e}")))
        }
        McpCommand::List {
            servers,
            names,
            json,
        } => rt.block_on(async {
            let (servers, reserved) = names.resolve(servers)?;
            let tools = connect_mcp_tools(&servers, &reserved).await?;
            for t in &tools {
                if json {
                    outln!(
                        "{}",
                        json!({
                            "name": t.tool.name(),
                            "server": t.server,
                            "remote_name": t.remote_name,
                            "title": t.tool.display_text(),
                            "description": t.tool.description(),
                            "hints": t.hints.labels(),
                            "input_schema": t.tool.parameters_schema(),
                        })
                    );
                    continue;
                }
                let labels = t.hints.labels().join(", ");
                let field = |s: &str| crate::shown::inline(s, 200);
                outln!(
                    "{}\t{}\t[{labels}]\t{}\t{}\t{}",
                    field(t.tool.name()),
                    field(t.tool.display_text()),
                    field(&t.server),
                    field(t.tool.description()),
                    field(&t.tool.parameters_schema().to_string())
                );
            }
            Ok(())
        }),
        McpCommand::Call {
            servers,
            names,
            tool,
            args,
            approve,
            out,
        } => rt.block_on(async {
            let parsed: Value = serde_json::from_str(&args)
                .map_err(|e| CliError::usage(format!("the arguments are not JSON: {e}")))?;
            let (servers, reserved) = names.resolve(servers)?;
            let tools = connect_mcp_tools(&servers, &reserved).await?;
            let Some(t) = tools.iter().find(|t| t.tool.name() == tool) else {
                let names: Vec<&str> = tools.iter().map(|t| t.tool.name()).collect();
                return Err(CliError::usage(format!("no tool {tool:?}; the tools are: {}", names.join(", "))));
            };
            let call = ToolCall::function("cli_1", &tool, parsed.to_string())
                .map_err(|e| CliError::usage(e.to_string()))?;
            let handler = approval_handler(
                approve,
                tools.iter().map(|t| ToolMeta::of_mcp(t, &servers.trust)),
            );
            let arguments = match handler.review(&call).await {
                ReviewDecision::Approve => Value::Object(call.arguments_as_map()),
                ReviewDecision::Edit { arguments } => Value::Object(arguments),
                ReviewDecision::Deny { reason } | ReviewDecision::Reject { reason } => {
                    outln!("{}", json!({"ran": false, "reason": reason}));
                    return Err(CliError::runtime(format!("{tool} was not run: {reason}")));
                }
                ReviewDecision::Interrupt => return Err(CliError::runtime("interrupted")),
                // Never run on a decision this version cannot read.
                _ => {
                    return Err(CliError::runtime(format!(
                        "{tool} was not run: the review gave a decision this version of llmchain does not know"
                    )));
                }
            };
            let r = t.tool.execute(arguments, ToolContext::new("cli_1")).await;
            let (parts, lines) = crate::parts::describe(&r.content, out.as_deref())?;
            outln!(
                "{}",
                json!({"ran": true, "is_error": r.is_error(), "is_refusal": r.is_refusal(), "content": r.content_text(), "parts": parts, "processed_content": r.processed_content})
            );
            for line in lines {
                eprintln!("{line}");
            }
            if r.is_error() {
                let what = if r.is_refusal() { "refused the call" } else { "returned an error" };
                return Err(CliError::runtime(format!(
                    "{tool} {what}: {}",
                    crate::shown::inline(r.content_text().lines().next().unwrap_or_default(), 200)
                )));
            }
            Ok(())
        }),
    }
}

//! [`McpClient`]: one MCP server, its tools as llmchain tools, and calls to them.

use std::sync::Arc;
use std::time::Duration;

use llmchain::conversation::empty_object_schema;
use llmchain::tool::{Tool, ToolContext, ToolError, ToolHandler, ToolOutput};
use rmcp::model::{CallToolRequestParams, ErrorCode};
use rmcp::service::{Peer, RunningService, ServiceError};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value};
use tokio::sync::Mutex;

use crate::child::{ChildTransport, Watch};
use crate::result::map_call_result;
use crate::{McpError, ServerSpec, ToolHints};

/// The default time limit of one tool call.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// The default cap on one serialized call result (1 MiB).
pub const DEFAULT_MAX_RESULT_BYTES: usize = 1024 * 1024;
/// The default cap on one message from a stdio server (16 MiB, rmcp's own line cap).
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// The separator between a prefix and a tool name: `server__tool`.
const PREFIX_SEPARATOR: &str = "__";

/// How MCP tool names become llmchain tool names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Prefix {
    /// Keep the server's names; prefix a tool with the server name (`server__tool`)
    /// only when its name is already taken ([`connect_all`]).
    #[default]
    OnCollision,
    /// Always `server__tool`.
    Always,
    /// Always `PREFIX__tool` with this prefix.
    Custom(String),
    /// Never prefix; a collision is an error.
    Never,
}
/// At most this many pages of `tools/list` are read from one server.
pub(crate) const MAX_TOOL_PAGES: usize = 100;

/// At most this many tools are taken from one server.
pub(crate) const MAX_TOOLS: usize = 10_000;

/// Options of an MCP connection.
#[derive(Debug, Clone)]
pub struct McpOptions {
    /// How tool names are prefixed.
    pub prefix: Prefix,
    /// The server's short name for prefixes and messages (default: the program's file
    /// stem, or the URL's host).
    pub name: Option<String>,
    /// The time limit of one call (the llmchain tool's timeout).
    pub timeout: Duration,
    /// The time limit of starting the server and the MCP handshake.
    pub handshake_timeout: Duration,
    /// The time limit of listing the server's tools, every page included.
    pub list_timeout: Duration,
    /// A result whose JSON is larger than this is replaced by an error.
    pub max_result_bytes: usize,
    /// A stdio server's message larger than this (a line without a newline) closes the
    /// connection at once: the call it was part of fails with this cause instead of
    /// waiting for its timeout, and the server is restarted on the next call.
    pub max_message_bytes: usize,
    /// Pass the server's stderr through to ours. Default: its last 2 KiB are kept and
    /// shown in the errors of a failed handshake or a server that died.
    pub inherit_stderr: bool,
}

impl Default for McpOptions {
    fn default() -> Self {
        McpOptions {
            prefix: Prefix::default(),
            name: None,
            timeout: DEFAULT_TIMEOUT,
            handshake_timeout: Duration::from_secs(30),
            list_timeout: Duration::from_secs(30),
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            inherit_stderr: false,
        }
    }
}

type Conn = RunningService<RoleClient, ()>;

/// A live connection: its number, the service, and what its transport reports.
struct Live {
    generation: u64,
    service: Conn,
    watch: Watch,
}

/// A connection to one MCP server. Cheap to share (`Arc`); the tools it lists keep it
/// alive. A stdio server that exits is started again on the next call.
pub struct McpClient {
    spec: ServerSpec,
    opts: McpOptions,
    name: String,
    conn: Mutex<Option<Live>>,
    generation: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClient")
            .field("spec", &self.spec)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// One tool of an MCP server: the llmchain tool and the server's hints about it.
#[derive(Debug, Clone)]
pub struct McpTool {
    /// The llmchain tool (its calls go to the server).
    pub tool: Tool,
    /// The server's annotations.
    pub hints: ToolHints,
    /// The tool's name on the server.
    pub remote_name: String,
    /// The server's short name.
    pub server: String,
    client: Arc<McpClient>,
    listing: Value,
}

impl McpTool {
    /// The same tool under another llmchain name.
    pub fn renamed(&self, name: &str) -> Result<McpTool, McpError> {
        build_tool(&self.client, &self.listing, name)
    }
}

fn sanitize(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    s.chars().take(llmchain::tool::MAX_NAME_LEN).collect()
}

fn default_name(spec: &ServerSpec) -> String {
    let raw = match spec {
        ServerSpec::Stdio { program, args, .. } => {
            // `python3 server.py` is better named after the script than the interpreter.
            let script = args.iter().find(|a| !a.starts_with('-'));
            let pick = match std::path::Path::new(program).file_stem() {
                Some(p)
                    if script.is_some()
                        && [
                            "python", "python3", "node", "uv", "uvx", "npx", "deno", "bun",
                        ]
                        .iter()
                        .any(|i| p.to_string_lossy().starts_with(i)) =>
                {
                    script.map(String::as_str).unwrap_or(program)
                }
                _ => program,
            };
            std::path::Path::new(pick)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| pick.to_owned())
        }
        ServerSpec::Http { url } => url
            .split("://")
            .nth(1)
            .unwrap_or(url)
            .split(['/', ':'])
            .next()
            .unwrap_or("mcp")
            .to_owned(),
    };
    let s = sanitize(&raw);
    if s.is_empty() { "mcp".to_owned() } else { s }
}

fn service_error_text(e: &ServiceError) -> String {
    match e {
        ServiceError::McpError(d) => match &d.data {
            Some(data) => format!("{} ({data})", d.message),
            None => d.message.to_string(),
        },
        other => other.to_string(),
    }
}

impl McpClient {
    /// Starts (stdio) or reaches (HTTP) a server and completes the MCP handshake.
    pub async fn connect(spec: ServerSpec, opts: McpOptions) -> Result<Arc<McpClient>, McpError> {
        let name = opts
            .name
            .as_deref()
            .map(sanitize)
            .unwrap_or_else(|| default_name(&spec));
        let (service, watch) = start(&spec, &opts).await?;
        Ok(Arc::new(McpClient {
            spec,
            opts,
            name,
            conn: Mutex::new(Some(Live {
                generation: 0,
                service,
                watch,
            })),
            generation: std::sync::atomic::AtomicU64::new(0),
        }))
    }

    /// The server's short name (used for prefixes).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How the server is reached.
    pub fn spec(&self) -> &ServerSpec {
        &self.spec
    }

    /// The live connection, started again if the server went away.
    async fn peer(&self) -> Result<(u64, Peer<RoleClient>, Watch), McpError> {
        let mut g = self.conn.lock().await;
        if let Some(live) = g.as_ref()
            && !live.service.is_closed()
            && !live.service.peer().is_transport_closed()
        {
            return Ok((
                live.generation,
                live.service.peer().clone(),
                live.watch.clone(),
            ));
        }
        if g.is_some() {
            tracing::warn!(server = %self.spec.label(), "MCP server connection lost; reconnecting");
        }
        *g = None;
        let (service, watch) = start(&self.spec, &self.opts).await?;
        let generation = self
            .generation
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        let p = service.peer().clone();
        *g = Some(Live {
            generation,
            service,
            watch: watch.clone(),
        });
        Ok((generation, p, watch))
    }

    async fn invalidate(&self, generation: u64) {
        let mut g = self.conn.lock().await;
        if g.as_ref().is_some_and(|live| live.generation == generation) {
            *g = None;
        }
    }

    /// Why a request failed with the connection: a message over the cap, or the
    /// transport's own error with what the server last wrote on stderr.
    fn connection_failure(&self, e: &ServiceError, watch: &Watch) -> String {
        if let Some(reason) = watch.oversized.reason(self.opts.max_message_bytes) {
            return reason;
        }
        with_stderr(without_type_names(&e.to_string()), watch)
    }

    /// Lists the server's tools as llmchain tools, named per [`McpOptions::prefix`].
    pub async fn tools(self: &Arc<Self>) -> Result<Vec<McpTool>, McpError> {
        let (_, peer, watch) = self.peer().await?;
        let fail = |reason: String| McpError::ListTools {
            server: self.spec.label(),
            reason: llmchain::redact::urls_in(&reason),
        };
        // Page by page (not rmcp's `list_all_tools`), so a server that never stops
        // paging is cut off, and under one deadline, so one that never answers is too.
        let listing = async {
            let mut list = Vec::new();
            let mut cursor = None;
            for _ in 0..MAX_TOOL_PAGES {
                let params = rmcp::model::PaginatedRequestParams::default().with_cursor(cursor);
                let page = peer.list_tools(Some(params)).await.map_err(|e| {
                    fail(match e {
                        ServiceError::McpError(_) => service_error_text(&e),
                        _ => self.connection_failure(&e, &watch),
                    })
                })?;
                list.extend(page.tools);
                if list.len() > MAX_TOOLS {
                    return Err(fail(format!("it lists more than {MAX_TOOLS} tools")));
                }
                match page.next_cursor {
                    Some(next) => cursor = Some(next),
                    None => return Ok(list),
                }
            }
            Err(fail(format!(
                "it was still paging after {MAX_TOOL_PAGES} pages of tools/list (a nextCursor that never ends)"
            )))
        };
        let list = tokio::time::timeout(self.opts.list_timeout, listing)
            .await
            .map_err(|_| {
                fail(format!(
                    "no answer to tools/list within {:?} (McpOptions::list_timeout)",
                    self.opts.list_timeout
                ))
            })??;
        let mut out = Vec::with_capacity(list.len());
        for t in list {
            let listing = serde_json::to_value(&t).map_err(|e| McpError::ListTools {
                server: self.spec.label(),
                reason: e.to_string(),
            })?;
            let base = sanitize(&t.name);
            let local = match &self.opts.prefix {
                Prefix::Always => format!("{}{PREFIX_SEPARATOR}{base}", self.name),
                Prefix::Custom(p) => format!("{p}{PREFIX_SEPARATOR}{base}"),
                Prefix::OnCollision | Prefix::Never => base,
            };
            out.push(build_tool(self, &listing, &local)?);
        }
        Ok(out)
    }

    /// Calls tool `remote_name` on the server. Never fails: every failure is an error
    /// (or refusal) output the model can read. Cancelling `ctx` drops the request,
    /// which tells the server (`notifications/cancelled`).
    pub async fn call(
        &self,
        remote_name: &str,
        args: Map<String, Value>,
        ctx: &ToolContext,
    ) -> ToolOutput {
        let (generation, peer, watch) = match self.peer().await {
            Ok(p) => p,
            Err(e) => return ToolOutput::error(e.to_string()),
        };
        let mut params = CallToolRequestParams::new(remote_name.to_owned());
        params.arguments = Some(args);
        let res = tokio::select! {
            r = peer.call_tool(params) => r,
            () = ctx.cancellation_token().cancelled() => {
                return ToolOutput::error(format!("The call to MCP tool {remote_name} was cancelled."));
            }
        };
        match res {
            Ok(r) => {
                let v = match serde_json::to_value(&r) {
                    Ok(v) => v,
                    Err(e) => {
                        return ToolOutput::error(format!(
                            "MCP tool {remote_name}: unreadable result: {e}"
                        ));
                    }
                };
                let size = v.to_string().len();
                if size > self.opts.max_result_bytes {
                    return ToolOutput::error(format!(
                        "MCP tool {remote_name} returned {size} bytes, more than the {} bytes allowed; \
                         ask for less (a smaller range, a filter, a page).",
                        self.opts.max_result_bytes
                    ));
                }
                map_call_result(&v)
            }
            Err(ServiceError::McpError(d)) if d.code == ErrorCode::INVALID_PARAMS => {
                let e = ServiceError::McpError(d);
                ToolOutput::refusal(format!(
                    "MCP tool {remote_name} rejected its arguments: {}. Nothing ran; fix the arguments and call it again.",
                    service_error_text(&e)
                ))
            }
            Err(e @ ServiceError::McpError(_)) => ToolOutput::error(format!(
                "MCP tool {remote_name} failed: {}",
                service_error_text(&e)
            )),
            Err(e) => {
                self.invalidate(generation).await;
                if watch.oversized.get().is_some() {
                    return ToolOutput::error(format!(
                        "MCP server `{}` failed during the call to {remote_name}: {}, most likely the result; \
                         the tool may have done its work. Ask for less (a smaller range, a filter, a page). \
                         The server will be restarted on the next call.",
                        self.spec.label(),
                        llmchain::redact::urls_in(&self.connection_failure(&e, &watch))
                    ));
                }
                ToolOutput::error(format!(
                    "MCP server `{}` failed during the call to {remote_name} ({}); \
                     the outcome is unknown. The server will be restarted on the next call.",
                    self.spec.label(),
                    llmchain::redact::urls_in(&self.connection_failure(&e, &watch))
                ))
            }
        }
    }
}

/// rmcp's errors name the transport by its Rust type (`Transport [rmcp::transport::
/// worker::WorkerTransport<…>] error: …`): that bracket means nothing to a user and is
/// cut out.
fn without_type_names(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let mut depth = 0usize;
        let close = rest[open..].char_indices().find_map(|(i, c)| {
            match c {
                '[' => depth += 1,
                ']' => depth -= 1,
                _ => {}
            }
            (depth == 0).then_some(open + i)
        });
        let Some(close) = close else { break };
        let inside = &rest[open + 1..close];
        out.push_str(&rest[..open]);
        if !inside.contains("::") {
            out.push_str(&rest[open..=close]);
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out.replace("  ", " ")
}

/// `text`, followed by the tail of the server's stderr when it wrote any.
fn with_stderr(text: String, watch: &Watch) -> String {
    match watch.stderr.text() {
        tail if tail.is_empty() => text,
        tail => format!("{text}; its stderr ends with: {tail}"),
    }
}

async fn start(spec: &ServerSpec, opts: &McpOptions) -> Result<(Conn, Watch), McpError> {
    let label = spec.label();
    let handshake = |reason: String| McpError::Handshake {
        server: label.clone(),
        reason: llmchain::redact::urls_in(&reason),
    };
    let no_answer = || format!("no answer within {:?}", opts.handshake_timeout);
    match spec {
        ServerSpec::Stdio {
            program,
            args,
            env,
            cwd,
        } => {
            let mut cmd = tokio::process::Command::new(program);
            cmd.args(args);
            // Its own process group: a terminal's Ctrl-C reaches only the client,
            // which cancels its calls cleanly instead of the server dying mid-call.
            #[cfg(unix)]
            cmd.process_group(0);
            for (k, v) in env {
                cmd.env(k, v);
            }
            if let Some(d) = cwd {
                cmd.current_dir(d);
            }
            let (transport, watch) =
                ChildTransport::spawn(cmd, opts.max_message_bytes, opts.inherit_stderr).map_err(
                    |cause| McpError::Spawn {
                        command: program.clone(),
                        cause,
                    },
                )?;
            match tokio::time::timeout(opts.handshake_timeout, ().serve(transport)).await {
                Ok(Ok(service)) => Ok((service, watch)),
                Ok(Err(e)) => {
                    let reason = watch
                        .oversized
                        .reason(opts.max_message_bytes)
                        .unwrap_or_else(|| {
                            format!("{e} (did it exit? run it by hand to see its errors)")
                        });
                    // The server's last words arrive just after its exit.
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    Err(handshake(with_stderr(reason, &watch)))
                }
                Err(_) => Err(handshake(with_stderr(no_answer(), &watch))),
            }
        }
        ServerSpec::Http { url } => {
            // reqwest is built without a bundled crypto provider; use ring. An
            // error only means the application installed one already. rustls 0.23.48
            // deprecates ring's provider because ring has no post-quantum key exchange:
            // an application that wants it installs aws-lc-rs's provider as the process
            // default before connecting, and this line then does nothing.
            #[allow(deprecated)]
            let _ = rustls::crypto::ring::default_provider().install_default();
            let watch = Watch::default();
            let transport = crate::http_transport::transport(
                url.as_str(),
                opts.max_message_bytes,
                watch.oversized.clone(),
            )
            .map_err(|e| handshake(format!("could not build the HTTP client: {e}")))?;
            match tokio::time::timeout(opts.handshake_timeout, ().serve(transport)).await {
                Ok(Ok(service)) => Ok((service, watch)),
                Ok(Err(e)) => Err(handshake(
                    watch
                        .oversized
                        .reason(opts.max_message_bytes)
                        .unwrap_or_else(|| without_type_names(&e.to_string())),
                )),
                Err(_) => Err(handshake(no_answer())),
            }
        }
    }
}

struct Remote {
    client: Arc<McpClient>,
    remote: String,
}

impl ToolHandler for Remote {
    async fn call(&self, args: Map<String, Value>, ctx: ToolContext) -> ToolOutput {
        self.client.call(&self.remote, args, &ctx).await
    }
}

fn build_tool(client: &Arc<McpClient>, listing: &Value, local: &str) -> Result<McpTool, McpError> {
    let remote = listing
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let hints = ToolHints::from_annotations(listing.get("annotations"));
    let description = listing
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let title = listing
        .get("title")
        .or_else(|| listing.get("annotations").and_then(|a| a.get("title")))
        .and_then(Value::as_str);
    let schema = listing
        .get("inputSchema")
        .cloned()
        .unwrap_or_else(empty_object_schema);
    let make = |schema: Value| {
        let mut b = Tool::builder(local)
            .description(description)
            .schema(schema)
            .idempotent(hints.idempotent)
            .policy_name(format!("mcp:{}/{remote}", client.name))
            .timeout(client.opts.timeout)
            .handler_impl(Remote {
                client: Arc::clone(client),
                remote: remote.clone(),
            });
        if let Some(t) = title {
            b = b.display_text(t);
        }
        // The tool carries the server's read-only/destructive/open-world hints only when
        // announced.
        let announced = |k: &str| {
            listing
                .get("annotations")
                .and_then(|a| a.get(k))
                .is_some_and(Value::is_boolean)
        };
        if announced("readOnlyHint") {
            b = b.read_only(hints.read_only);
        }
        if announced("readOnlyHint") || announced("destructiveHint") {
            b = b.destructive(hints.destructive);
        }
        if announced("openWorldHint") {
            b = b.open_world(hints.open_world);
        }
        b.build()
    };
    let tool = match make(schema) {
        Ok(t) => t,
        // A schema our validator cannot compile: the server checks its own arguments.
        Err(ToolError::InvalidSchema { reason, .. }) => {
            tracing::warn!(tool = %remote, %reason, "MCP tool schema does not compile; sending it without local checks");
            make(serde_json::json!({"type": "object"})).map_err(|e| McpError::BadTool {
                server: client.spec.label(),
                name: remote.clone(),
                reason: e.to_string(),
            })?
        }
        Err(e) => {
            return Err(McpError::BadTool {
                server: client.spec.label(),
                name: remote.clone(),
                reason: e.to_string(),
            });
        }
    };
    Ok(McpTool {
        tool,
        hints,
        remote_name: remote,
        server: client.name.clone(),
        client: Arc::clone(client),
        listing: listing.clone(),
    })
}

/// Connects to every server and lists their tools, resolving name collisions (with
/// each other and with `reserved`, e.g. built-in tools) per `opts.prefix`: with
/// [`Prefix::OnCollision`] a taken name becomes `server__tool`; if that is taken too,
/// or with [`Prefix::Never`], it is an error.
pub async fn connect_all(
    specs: impl IntoIterator<Item = ServerSpec>,
    opts: &McpOptions,
    reserved: &[&str],
) -> Result<Vec<McpTool>, McpError> {
    let mut taken: std::collections::HashSet<String> =
        reserved.iter().map(|s| (*s).to_owned()).collect();
    let mut out = Vec::new();
    // Each server's short name is unique, so prefixes tell copies of one server apart:
    // `files`, `files_2`, `files_3`.
    let mut servers = std::collections::HashSet::new();
    for spec in specs {
        let base = opts
            .name
            .as_deref()
            .map(sanitize)
            .unwrap_or_else(|| default_name(&spec));
        let mut name = base.clone();
        for n in 2.. {
            if servers.insert(name.clone()) {
                break;
            }
            name = format!("{base}_{n}");
        }
        let client = McpClient::connect(
            spec,
            McpOptions {
                name: Some(name),
                ..opts.clone()
            },
        )
        .await?;
        for t in client.tools().await? {
            let t = if taken.contains(t.tool.name()) && opts.prefix == Prefix::OnCollision {
                let n = sanitize(&format!(
                    "{}{PREFIX_SEPARATOR}{}",
                    client.name,
                    t.tool.name()
                ));
                t.renamed(&n)?
            } else {
                t
            };
            if !taken.insert(t.tool.name().to_owned()) {
                return Err(McpError::BadTool {
                    server: client.spec.label(),
                    name: t.remote_name.clone(),
                    reason: format!(
                        "the name {} is already taken by another tool; use a prefix (McpOptions::prefix, --mcp-prefix in the CLI)",
                        t.tool.name()
                    ),
                });
            }
            out.push(t);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(sanitize("a.b/c"), "a_b_c");
        assert_eq!(sanitize(&"x".repeat(100)).len(), 64);
        assert_eq!(
            default_name(&ServerSpec::stdio("python3", ["-u", "/x/srv.py"])),
            "srv"
        );
        assert_eq!(
            default_name(&ServerSpec::stdio("/usr/bin/my-server", ["--x"])),
            "my-server"
        );
        assert_eq!(
            default_name(&ServerSpec::http("http://127.0.0.1:8000/mcp")),
            "127_0_0_1"
        );
    }

    #[test]
    fn rust_type_names_are_cut_from_transport_errors() {
        let e = "Send message error Transport [rmcp::transport::worker::WorkerTransport<rmcp::transport::streamable_http_client::StreamableHttpClientWorker<reqwest::async_impl::client::Client>>] error: Client error: error sending request for url (http://127.0.0.1:1/mcp), when send initialize request";
        assert_eq!(
            without_type_names(e),
            "Send message error Transport error: Client error: error sending request for url (http://127.0.0.1:1/mcp), when send initialize request"
        );
        assert_eq!(without_type_names("a [1] b [x::y] c ["), "a [1] b c [");
    }
}

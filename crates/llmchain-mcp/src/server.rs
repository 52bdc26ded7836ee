//! Serving llmchain tools over MCP: [`ToolServer`] and [`serve_stdio`].

use std::collections::HashMap;
use std::sync::Arc;

use llmchain::message::{ContentType, ToolResult};
use llmchain::tool::{Tool, ToolContext};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

use llmchain::tool::ToolHints;

/// An rmcp server handler exposing a set of llmchain tools (`tools/list`, `tools/call`).
///
/// Every annotation is announced: a tool's `read_only`, `destructive`, `idempotent` and
/// `open_world` flags as `readOnlyHint`, `destructiveHint`, `idempotentHint` and
/// `openWorldHint` (the MCP default, said out loud, for what it does not declare), its
/// display text as `title`. A call runs [`Tool::execute`] (argument checks, timeout, panic capture) with
/// the request's cancellation token; the result becomes MCP content (see
/// [`ToolServer::result_json`]), and any error, refusal or interrupt sets `isError`. An unknown tool
/// is a JSON-RPC invalid-params error, as the MCP spec asks.
///
/// Calls in flight are bounded ([`with_max_in_flight`](Self::with_max_in_flight),
/// default [`DEFAULT_MAX_IN_FLIGHT`]): a client that sends more at once gets a "busy"
/// JSON-RPC error for each call past the bound, at once, instead of the server
/// holding every call (and its result) in memory.
#[derive(Debug, Clone)]
pub struct ToolServer {
    tools: Arc<HashMap<String, Tool>>,
    order: Arc<Vec<String>>,
    name: String,
    in_flight: Arc<tokio::sync::Semaphore>,
    max_in_flight: usize,
}

/// The default bound on calls a [`ToolServer`] runs at once.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 64;

impl ToolServer {
    /// A server for these tools (a later tool with the same name replaces an earlier one).
    pub fn new(tools: impl IntoIterator<Item = Tool>) -> Self {
        let mut map = HashMap::new();
        let mut order = Vec::new();
        for t in tools {
            if map.insert(t.name().to_owned(), t.clone()).is_none() {
                order.push(t.name().to_owned());
            }
        }
        ToolServer {
            tools: Arc::new(map),
            order: Arc::new(order),
            name: "llmchain".to_owned(),
            in_flight: Arc::new(tokio::sync::Semaphore::new(DEFAULT_MAX_IN_FLIGHT)),
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
        }
    }

    /// Runs at most `n` calls at once (at least 1); a call past the bound is answered
    /// with a "busy" error at once.
    #[must_use]
    pub fn with_max_in_flight(mut self, n: usize) -> Self {
        let n = n.max(1);
        self.in_flight = Arc::new(tokio::sync::Semaphore::new(n));
        self.max_in_flight = n;
        self
    }

    /// Sets the implementation name announced in the handshake (default `llmchain`).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    fn listing(t: &Tool) -> Value {
        // Every hint is set, from what the tool declares; what it leaves unsaid gets
        // the MCP default, said out loud (so a client never guesses).
        let hints = ToolHints::of_tool(t);
        json!({
            "name": t.name(),
            "title": t.display_text(),
            "description": t.description(),
            "inputSchema": t.parameters_schema(),
            "annotations": {
                "title": t.display_text(),
                "readOnlyHint": hints.read_only,
                "destructiveHint": hints.destructive,
                "idempotentHint": hints.idempotent,
                "openWorldHint": hints.open_world,
            },
        })
    }

    /// Maps an llmchain result to MCP `tools/call` result JSON.
    ///
    /// With a `processed_content` object, that is the `structuredContent` and the text
    /// content is its JSON (as the MCP spec asks, so a client reading either sees the
    /// same thing); otherwise the text parts are the text content. Images go as
    /// `image` content, files as embedded `resource` blobs, links as `resource_link`.
    pub fn result_json(r: &ToolResult) -> Value {
        let structured = r.processed_content.as_ref().filter(|v| v.is_object());
        let mut content: Vec<Value> = Vec::with_capacity(r.content.len());
        if let Some(pc) = structured {
            content.push(json!({"type": "text", "text": pc.to_string()}));
        }
        for p in &r.content {
            let block = match p.r#type {
                ContentType::Text if structured.is_some() => continue,
                ContentType::Image => json!({
                    "type": "image",
                    "data": p.content,
                    "mimeType": p.media().unwrap_or("image/png"),
                }),
                ContentType::File => json!({"type": "resource", "resource": {
                    "uri": p.options.get("uri").and_then(Value::as_str).unwrap_or("llmchain://result/file"),
                    "mimeType": p.media().unwrap_or("application/octet-stream"),
                    "blob": p.content,
                }}),
                ContentType::ImageUrl | ContentType::FileUrl => json!({
                    "type": "resource_link",
                    "uri": p.content,
                    "name": p.content.rsplit('/').next().unwrap_or(&p.content),
                }),
                ContentType::Text => json!({"type": "text", "text": p.content}),
                // Reasoning, blocks of another provider, and kinds added later.
                _ => continue,
            };
            content.push(block);
        }
        let mut v = json!({"content": content, "isError": r.is_error() || r.is_interrupt()});
        if let Some(pc) = structured {
            v["structuredContent"] = pc.clone();
        }
        v
    }
}

fn internal(e: impl std::fmt::Display) -> ErrorData {
    ErrorData::internal_error(e.to_string(), None)
}

impl ServerHandler for ToolServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_server_info(
            Implementation::new(self.name.clone(), env!("CARGO_PKG_VERSION")),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools: Vec<Value> = self
            .order
            .iter()
            .filter_map(|n| self.tools.get(n))
            .map(Self::listing)
            .collect();
        serde_json::from_value(json!({"tools": tools})).map_err(internal)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(tool) = self.tools.get(request.name.as_ref()) else {
            let mut known: Vec<&str> = self.order.iter().map(String::as_str).collect();
            known.sort_unstable();
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool {:?}; the tools are: {}",
                    request.name,
                    known.join(", ")
                ),
                None,
            ));
        };
        // Bounded: a flood of calls is answered "busy", not held in memory.
        let Ok(_permit) = self.in_flight.clone().try_acquire_owned() else {
            return Err(ErrorData::new(
                rmcp::model::ErrorCode(-32000),
                format!(
                    "server busy: {} calls are running, the most it runs at once; retry later",
                    self.max_in_flight
                ),
                None,
            ));
        };
        let id = format!("mcp_{}", context.id);
        let ctx = ToolContext::new(id).with_cancellation(context.ct.clone());
        let args = request.arguments.map(Value::Object).unwrap_or(Value::Null);
        let r = tool.execute(args, ctx).await;
        let result: CallToolResult =
            serde_json::from_value(Self::result_json(&r)).map_err(internal)?;
        Ok(CallToolResponse::Complete(result))
    }
}

/// Serves `tools` over stdin/stdout until the client disconnects.
pub async fn serve_stdio(tools: impl IntoIterator<Item = Tool>) -> Result<(), std::io::Error> {
    serve(ToolServer::new(tools), rmcp::transport::stdio()).await
}

/// Serves a [`ToolServer`] on any rmcp transport (e.g. a `tokio::io::duplex` pair in
/// tests) until the peer disconnects.
pub async fn serve<T, E, A>(server: ToolServer, transport: T) -> Result<(), std::io::Error>
where
    T: rmcp::transport::IntoTransport<RoleServer, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    // Answers waiting to be written are bounded like the calls that make them: twice
    // the calls in flight (room for the "busy" answers of a flood).
    let slots = server.max_in_flight.saturating_mul(2);
    let transport = crate::backpressure::Backpressure::new(transport.into_transport(), slots);
    let running = server
        .serve(transport)
        .await
        .map_err(std::io::Error::other)?;
    running.waiting().await.map_err(std::io::Error::other)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use llmchain::message::ContentPart;
    use llmchain::tool::ToolOutput;
    use rmcp::model::CallToolResult;

    use super::*;

    fn tool(b: llmchain::tool::ToolBuilder) -> Tool {
        b.schema(json!({"type": "object"}))
            .handler(|_, _| async { ToolOutput::text("ok") })
            .build()
            .unwrap()
    }

    /// A flood of calls: at most the bound run at once, the rest are answered "busy"
    /// at once, and the server serves again afterwards.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn calls_in_flight_are_bounded() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let (r, m) = (running.clone(), most.clone());
        let slow = Tool::builder("slow")
            .schema(json!({"type": "object"}))
            .handler(move |_, _| {
                let (r, m) = (r.clone(), m.clone());
                async move {
                    let now = r.fetch_add(1, Ordering::SeqCst) + 1;
                    m.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
                    r.fetch_sub(1, Ordering::SeqCst);
                    ToolOutput::text("done")
                }
            })
            .build()
            .unwrap();
        let server = ToolServer::new([slow]).with_max_in_flight(8);
        let (a, b) = tokio::io::duplex(1 << 20);
        tokio::spawn(serve(server, b));
        let client = ().serve(a).await.unwrap();
        let calls = (0..50).map(|_| {
            let peer = client.peer().clone();
            async move { peer.call_tool(CallToolRequestParams::new("slow")).await }
        });
        let results = futures_util::future::join_all(calls).await;
        let busy = results
            .iter()
            .filter(|r| matches!(r, Err(e) if e.to_string().contains("server busy")))
            .count();
        let ok = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(ok + busy, 50, "{results:?}");
        assert!(ok >= 8 && busy > 0, "ok {ok}, busy {busy}");
        assert!(most.load(Ordering::SeqCst) <= 8);
        // Not stuck: once they finish, calls run again.
        assert!(
            client
                .peer()
                .call_tool(CallToolRequestParams::new("slow"))
                .await
                .is_ok()
        );
    }

    /// A client that sends calls and never reads the answers is no longer read from once
    /// the answers waiting to be written reach their bound: the server holds a bounded
    /// number of answers, not one per call sent. Once the client reads, every call is
    /// answered.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_that_does_not_read_is_not_read_from() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
        let made = Arc::new(AtomicUsize::new(0));
        let m = made.clone();
        let counted = Tool::builder("count")
            .schema(json!({"type": "object"}))
            .handler(move |_, _| {
                m.fetch_add(1, Ordering::SeqCst);
                async { ToolOutput::text("x".repeat(200)) }
            })
            .build()
            .unwrap();
        let server = ToolServer::new([counted]).with_max_in_flight(8);
        // Small pipes, as a real one fills: 4 KiB each way.
        let (client, server_end) = tokio::io::duplex(4 << 10);
        tokio::spawn(serve(server, server_end));
        let (read_half, mut write_half) = tokio::io::split(client);
        let line = |v: serde_json::Value| format!("{v}\n");
        write_half
            .write_all(
                line(
                    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "flood", "version": "0"}}}),
                )
                .as_bytes(),
            )
            .await
            .unwrap();
        let mut lines = tokio::io::BufReader::new(read_half).lines();
        let hello = lines.next_line().await.unwrap().unwrap();
        assert!(hello.contains("\"result\""), "{hello}");
        write_half
            .write_all(
                line(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).as_bytes(),
            )
            .await
            .unwrap();
        const CALLS: usize = 5_000;
        let writer = tokio::spawn(async move {
            for i in 1..=CALLS {
                let call = json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                    "params": {"name": "count", "arguments": {}}});
                write_half.write_all(line(call).as_bytes()).await.unwrap();
            }
            write_half
        });
        // The client reads nothing for a while: the server stops reading its calls.
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        assert!(
            !writer.is_finished(),
            "every call was read although no answer was"
        );
        let made_while_unread = made.load(Ordering::SeqCst);
        assert!(
            made_while_unread <= 64,
            "{made_while_unread} answers made while the client read none"
        );
        // Once it reads, every call is answered.
        let mut answered = 0;
        while answered < CALLS {
            let l = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
                .await
                .expect("the answers keep coming")
                .unwrap()
                .unwrap();
            if l.contains("\"id\"") {
                answered += 1;
            }
        }
        writer.await.unwrap();
    }

    #[test]
    fn every_annotation_is_set_deliberately() {
        let closed = tool(
            Tool::builder("calc")
                .read_only(true)
                .idempotent(true)
                .open_world(false),
        );
        assert_eq!(
            ToolServer::listing(&closed)["annotations"],
            json!({"title": "Calc", "readOnlyHint": true, "destructiveHint": false,
                   "idempotentHint": true, "openWorldHint": false})
        );
        // Nothing declared: the MCP defaults, said out loud.
        let unsaid = tool(Tool::builder("work"));
        assert_eq!(
            ToolServer::listing(&unsaid)["annotations"],
            json!({"title": "Work", "readOnlyHint": false, "destructiveHint": true,
                   "idempotentHint": false, "openWorldHint": true})
        );
    }

    #[test]
    fn results_map_every_part_and_text_agrees_with_structured_content() {
        let mut r = ToolResult::success(
            "c1",
            vec![
                ContentPart::text("18 degrees"),
                ContentPart::image("iVBORw0KGgo=", "image/png"),
                ContentPart::file("H4sI", "application/gzip").with_option("uri", "file:///a.gz"),
                ContentPart::file_url("https://example.com/r.pdf"),
            ],
        );
        r.processed_content = Some(json!({"temp": 18}));
        let v = ToolServer::result_json(&r);
        assert_eq!(v["structuredContent"], json!({"temp": 18}));
        let content = v["content"].as_array().unwrap();
        assert_eq!(content[0], json!({"type": "text", "text": "{\"temp\":18}"}));
        assert_eq!(content[1]["type"], "image");
        assert_eq!(
            content[2],
            json!({"type": "resource", "resource": {"uri": "file:///a.gz",
                   "mimeType": "application/gzip", "blob": "H4sI"}})
        );
        assert_eq!(content[3]["type"], "resource_link");
        assert_eq!(
            content.len(),
            4,
            "the text part is replaced by the data's JSON"
        );
        // What rmcp reads as a result.
        serde_json::from_value::<CallToolResult>(v).unwrap();

        // Without structured data the text parts are the text content.
        let v = ToolServer::result_json(&ToolResult::text("c2", "plain"));
        assert_eq!(v["content"], json!([{"type": "text", "text": "plain"}]));
        assert!(v.get("structuredContent").is_none());
    }
}

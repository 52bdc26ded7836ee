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

/// An rmcp server handler exposing a set of llmchain tools (`tools/list`, `tools/call`).
///
/// A tool's `idempotent` flag is announced as `idempotentHint`, its `read_only` and
/// `destructive` flags (when the tool declares them) as `readOnlyHint` and
/// `destructiveHint`, its display text as `title`. A call runs [`Tool::execute`] (argument checks, timeout, panic capture) with
/// the request's cancellation token; the result's parts become MCP content (text,
/// images; other parts as text), `processed_content` becomes `structuredContent` when
/// it is an object, and any error, refusal or interrupt sets `isError`. An unknown tool
/// is a JSON-RPC invalid-params error, as the MCP spec asks.
#[derive(Debug, Clone)]
pub struct ToolServer {
    tools: Arc<HashMap<String, Tool>>,
    order: Arc<Vec<String>>,
    name: String,
}

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
        }
    }

    /// Sets the implementation name announced in the handshake (default `llmchain`).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    fn listing(t: &Tool) -> Value {
        let mut annotations = json!({"title": t.display_text()});
        if t.idempotent() {
            annotations["idempotentHint"] = json!(true);
        }
        if let Some(read_only) = t.read_only() {
            annotations["readOnlyHint"] = json!(read_only);
        }
        if let Some(destructive) = t.destructive() {
            annotations["destructiveHint"] = json!(destructive);
        }
        json!({
            "name": t.name(),
            "title": t.display_text(),
            "description": t.description(),
            "inputSchema": t.parameters_schema(),
            "annotations": annotations,
        })
    }

    /// Maps an llmchain result to MCP `tools/call` result JSON.
    pub fn result_json(r: &ToolResult) -> Value {
        let content: Vec<Value> = r
            .content
            .iter()
            .map(|p| match p.r#type {
                ContentType::Image if p.media().is_some() => {
                    json!({"type": "image", "data": p.content, "mimeType": p.media()})
                }
                _ => json!({"type": "text", "text": p.content}),
            })
            .collect();
        let mut v = json!({"content": content, "isError": r.is_error() || r.is_interrupt()});
        if let Some(pc) = r.processed_content.as_ref().filter(|v| v.is_object()) {
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
    let running = server
        .serve(transport)
        .await
        .map_err(std::io::Error::other)?;
    running.waiting().await.map_err(std::io::Error::other)?;
    Ok(())
}

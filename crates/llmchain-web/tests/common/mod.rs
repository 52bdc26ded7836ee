//! Shared by the server's tests: the router served over real HTTP (reqwest against
//! `llmchain_web::serve` on a bound port), a scripted model speaking a real wire format,
//! a SQLite store, and the UI message stream read back.

#![allow(dead_code)] // each test file uses a part

use std::sync::{Arc, Mutex};
use std::time::Duration;

use llmchain::chain::{ChainState, LLMChain, Mode, ReviewDecision, ScriptedModel, ScriptedTurn};
use llmchain::provider::Format;
use llmchain::provider::render::{ResponseScript, render_stream};
use llmchain::tool::{Tool, ToolOutput};
use llmchain_store::worker::BoxError;
use llmchain_store::{Run, SqliteStore};
use llmchain_web::{ChatServer, ServeConfig};
use serde_json::{Value, json};

pub(crate) struct Server {
    pub(crate) base: String,
    pub(crate) model: Arc<ScriptedModel>,
    pub(crate) writes: Arc<Mutex<Vec<String>>>,
    pub(crate) store: Arc<SqliteStore>,
    pub(crate) dir: tempfile::TempDir,
}

impl Server {
    /// Queues the model's next answers.
    pub(crate) fn script(&self, turns: &[ResponseScript]) {
        for t in turns {
            let bytes = render_stream(Format::OPENAI_CHAT, t).unwrap();
            self.model.push(ScriptedTurn::Stream(bytes.into()));
        }
    }
}

/// A server whose chain has one tool, `write`, that a person must approve (the review
/// handler pauses it), and the read-only `clock`, approved by the policy.
pub(crate) async fn start(config: ServeConfig, delay: Option<Duration>) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        SqliteStore::open(dir.path().join("chats.db"))
            .await
            .unwrap(),
    );
    let mut model = ScriptedModel::new(Format::OPENAI_CHAT);
    if let Some(d) = delay {
        model = model.chunk_size(3).chunk_delay(d);
    }
    let model = Arc::new(model);
    let writes: Arc<Mutex<Vec<String>>> = Arc::default();
    let factory = {
        let (model, writes) = (model.clone(), writes.clone());
        move |_run: Run, state: ChainState| {
            let (model, writes) = (model.clone(), writes.clone());
            async move {
                let write = Tool::builder("write")
                    .schema(json!({"type": "object", "properties": {"text": {"type": "string"}}}))
                    .handler(move |args, _| {
                        let writes = writes.clone();
                        async move {
                            writes
                                .lock()
                                .unwrap()
                                .push(args["text"].as_str().unwrap_or("").to_owned());
                            ToolOutput::text("written")
                        }
                    })
                    .build()?;
                let clock = Tool::builder("clock")
                    .handler(|_, _| async { ToolOutput::text("12:00") })
                    .build()?;
                let chain = LLMChain::from_state(model, state)
                    .with_tool(write)
                    .with_tool(clock)
                    .with_review(|call: &llmchain::message::ToolCall| {
                        if call.name.as_deref() == Some("write") {
                            ReviewDecision::Interrupt
                        } else {
                            ReviewDecision::Approve
                        }
                    });
                Ok::<_, BoxError>((chain, Mode::while_needs_response()))
            }
        }
    };
    let server = ChatServer::new(store.clone(), factory).config(config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let limits = server.limits();
    tokio::spawn(llmchain_web::serve(
        listener,
        server.router(),
        limits,
        std::future::pending(),
    ));
    Server {
        base: format!("http://{addr}"),
        model,
        writes,
        store,
        dir,
    }
}

/// The chunks of a UI message stream (the `[DONE]` marker as the string "[DONE]").
pub(crate) fn chunks(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .map(|d| {
            if d == "[DONE]" {
                Value::String("[DONE]".into())
            } else {
                serde_json::from_str(d).unwrap_or_else(|e| panic!("{e}: {d}"))
            }
        })
        .collect()
}

pub(crate) fn types(chunks: &[Value]) -> Vec<String> {
    chunks
        .iter()
        .map(|c| c["type"].as_str().unwrap_or("[DONE]").to_owned())
        .collect()
}

pub(crate) async fn post(base: &str, body: Value) -> (u16, Vec<Value>, String) {
    let res = reqwest::Client::new()
        .post(format!("{base}/api/chat"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let header = res
        .headers()
        .get("x-vercel-ai-ui-message-stream")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let text = res.text().await.unwrap();
    if status == 200 {
        assert_eq!(header, "v1");
        (status, chunks(&text), text)
    } else {
        (status, Vec::new(), text)
    }
}

pub(crate) fn user(chat: &str, id: &str, text: &str) -> Value {
    json!({"id": chat, "trigger": "submit-message", "messages": [
        {"id": id, "role": "user", "parts": [{"type": "text", "text": text}]}
    ]})
}

pub(crate) fn approval(chat: &str, message_id: &str, approval_id: &str, approved: bool) -> Value {
    json!({"id": chat, "trigger": "submit-message", "messageId": message_id, "messages": [
        {"id": message_id, "role": "assistant", "parts": [
            {"type": "tool-write", "toolCallId": "anything", "state": "approval-responded",
             "input": {"text": "the client may say anything here"},
             "approval": {"id": approval_id, "approved": approved, "reason": "not now"}}
        ]}
    ]})
}

pub(crate) async fn ui(base: &str, chat: &str) -> Value {
    reqwest::get(format!("{base}/api/chats/{chat}"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// The first part of type `kind` of message `index` of a chat as `GET /api/chats/{id}`
/// gives it.
pub(crate) fn tool_part(chat: &Value, index: usize, kind: &str) -> Value {
    chat["messages"][index]["parts"]
        .as_array()
        .and_then(|parts| parts.iter().find(|p| p["type"] == kind))
        .cloned()
        .unwrap_or_else(|| panic!("no {kind} part in message {index}: {chat}"))
}

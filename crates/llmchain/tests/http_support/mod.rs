//! A local HTTP server for the HTTP client tests: it records every request and answers
//! with scripted replies, chunked at random boundaries, slowly, or cut off; an optional
//! validator rejects malformed requests the way the real API does.
#![allow(dead_code)]

pub(crate) mod content_rules;
pub(crate) mod failing;
pub(crate) mod pairing;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use futures_util::StreamExt;
use llmchain::conversation::Conversation;
use llmchain::message::{Arguments, Message, ToolCall, ToolCallAttrs, ToolCallStatus, ToolResult};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// A request the server saw.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub method: String,
    pub uri: String,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Seen {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// One scripted reply.
#[derive(Clone)]
pub(crate) struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Random chunk sizes in `1..=max_chunk` from this seed.
    pub seed: u64,
    pub max_chunk: usize,
    /// Sleep between chunks.
    pub delay: Option<Duration>,
    /// Drop the connection after this many body bytes.
    pub drop_after: Option<usize>,
    /// Send this many bytes, then wait for the notify before the rest.
    pub hold_after: Option<(usize, Arc<Notify>)>,
}

impl Reply {
    pub(crate) fn new(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        Reply {
            status,
            headers: vec![("content-type".into(), content_type.into())],
            body: body.into(),
            seed: 7,
            max_chunk: 40,
            delay: None,
            drop_after: None,
            hold_after: None,
        }
    }
    pub(crate) fn sse(body: impl Into<Vec<u8>>) -> Self {
        Self::new(200, "text/event-stream", body)
    }
    pub(crate) fn ndjson(body: impl Into<Vec<u8>>) -> Self {
        Self::new(200, "application/x-ndjson", body)
    }
    pub(crate) fn json(status: u16, body: &Value) -> Self {
        Self::new(
            status,
            "application/json",
            serde_json::to_vec(body).unwrap(),
        )
    }
    pub(crate) fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
    pub(crate) fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }
    pub(crate) fn delay(mut self, d: Duration) -> Self {
        self.delay = Some(d);
        self
    }
    pub(crate) fn drop_after(mut self, n: usize) -> Self {
        self.drop_after = Some(n);
        self
    }
    pub(crate) fn hold_after(mut self, n: usize, gate: Arc<Notify>) -> Self {
        self.hold_after = Some((n, gate));
        self
    }
}

/// Checks a request; `Some(reply)` rejects it.
pub(crate) type Validator = Arc<dyn Fn(&Seen) -> Option<Reply> + Send + Sync>;

#[derive(Clone)]
struct State {
    replies: Arc<Mutex<VecDeque<Reply>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
    validator: Option<Validator>,
}

/// A running server on 127.0.0.1.
pub(crate) struct Server {
    pub base: String,
    state: State,
}

impl Server {
    pub(crate) async fn start(replies: Vec<Reply>) -> Server {
        Self::start_with(replies, None).await
    }

    pub(crate) async fn start_with(replies: Vec<Reply>, validator: Option<Validator>) -> Server {
        let state = State {
            replies: Arc::new(Mutex::new(replies.into())),
            seen: Arc::new(Mutex::new(Vec::new())),
            validator,
        };
        let st = state.clone();
        let app = Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let st = st.clone();
                async move { handle(st, method, uri, headers, body) }
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Server {
            base: format!("http://{addr}"),
            state,
        }
    }

    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }

    pub(crate) fn push(&self, reply: Reply) {
        self.state.replies.lock().unwrap().push_back(reply);
    }
}

fn handle(st: State, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let seen = Seen {
        method: method.to_string(),
        uri: uri.to_string(),
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    st.seen.lock().unwrap().push(seen.clone());
    let reply = match st.validator.as_ref().and_then(|v| v(&seen)) {
        Some(r) => r,
        None => st.replies.lock().unwrap().pop_front().unwrap_or_else(|| {
            Reply::json(500, &json!({"error": {"message": "no scripted reply"}}))
        }),
    };
    respond(reply)
}

fn chunks(body: &[u8], seed: u64, max: usize) -> Vec<Vec<u8>> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407)
        | 1;
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < body.len() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let n = 1 + (x as usize % max.max(1));
        let end = (pos + n).min(body.len());
        out.push(body[pos..end].to_vec());
        pos = end;
    }
    out
}

fn respond(reply: Reply) -> Response {
    let mut builder = Response::builder().status(StatusCode::from_u16(reply.status).unwrap());
    for (k, v) in &reply.headers {
        builder = builder.header(k, v);
    }
    let limit = reply
        .drop_after
        .unwrap_or(reply.body.len())
        .min(reply.body.len());
    let mut pieces = chunks(&reply.body[..limit], reply.seed, reply.max_chunk);
    let hold = reply.hold_after.clone();
    // Split so the held prefix ends exactly at `hold_after` bytes.
    let mut items: Vec<Item> = Vec::new();
    let mut sent = 0;
    for p in pieces.drain(..) {
        if let Some((n, gate)) = &hold
            && sent < *n
            && sent + p.len() >= *n
        {
            let cut = n - sent;
            items.push(Item::Bytes(p[..cut].to_vec()));
            items.push(Item::Wait(gate.clone()));
            if cut < p.len() {
                items.push(Item::Bytes(p[cut..].to_vec()));
            }
        } else {
            items.push(Item::Bytes(p.clone()));
        }
        sent += p.len();
    }
    if reply.drop_after.is_some() {
        items.push(Item::Fail);
    }
    let delay = reply.delay;
    let stream = futures_util::stream::iter(items).then(move |item| async move {
        if let Some(d) = delay {
            tokio::time::sleep(d).await;
        }
        match item {
            Item::Bytes(b) => Ok(Bytes::from(b)),
            Item::Wait(gate) => {
                gate.notified().await;
                Ok(Bytes::new())
            }
            Item::Fail => Err(std::io::Error::other(
                "connection dropped by the test server",
            )),
        }
    });
    builder.body(Body::from_stream(stream)).unwrap()
}

enum Item {
    Bytes(Vec<u8>),
    Wait(Arc<Notify>),
    Fail,
}

/// A conversation: a user question.
pub(crate) fn ask(text: &str) -> Conversation {
    let mut c = Conversation::new();
    c.messages.push(Message::user(text));
    c
}

/// A completed call.
pub(crate) fn call(id: &str, name: &str, args: Value) -> ToolCall {
    let Value::Object(m) = args else {
        panic!("args")
    };
    ToolCall::new(ToolCallAttrs {
        status: ToolCallStatus::Complete,
        call_id: Some(id.into()),
        name: Some(name.into()),
        arguments: Some(Arguments::Object(m)),
        ..Default::default()
    })
    .unwrap()
}

/// user → assistant call → tool result (for `result_id`).
pub(crate) fn with_tool_round(call_id: &str, result_id: &str) -> Conversation {
    let mut c = ask("Weather in Paris?");
    c.messages.push(Message::assistant_with_calls(
        "",
        vec![call(call_id, "get_weather", json!({"city": "Paris"}))],
    ));
    c.messages.push(Message::tool(vec![
        ToolResult::text(result_id, "11 degrees").with_name("get_weather"),
    ]));
    c
}

/// Fixture bytes.
pub(crate) fn fixture(path: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/fixtures/{path}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// The wires the local server speaks (Bedrock has its own test server).
pub(crate) const WIRES: [llmchain::provider::Format; 5] = [
    llmchain::provider::Format::OPENAI_CHAT,
    llmchain::provider::Format::OPENAI_RESPONSES,
    llmchain::provider::Format::ANTHROPIC,
    llmchain::provider::Format::GEMINI,
    llmchain::provider::Format::OLLAMA,
];

/// The request body `format` encodes for `conv` (model `m`), as JSON.
pub(crate) fn encode(format: llmchain::provider::Format, conv: &Conversation) -> Value {
    let opts = llmchain::provider::RequestOptions {
        model: "m".into(),
        ..Default::default()
    };
    serde_json::from_slice(&format.codec().encode(conv, &opts).unwrap()).unwrap()
}

/// A server validator applying [`content_rules::check`], answering 400 the way each API words it.
pub(crate) fn content_validator(format: llmchain::provider::Format) -> Validator {
    validator_of(format, content_rules::check)
}

/// A server validator applying the content rules and [`pairing::check`] (every call
/// answered, no result without its call), answering 400 the way each API words it.
pub(crate) fn api_validator(format: llmchain::provider::Format) -> Validator {
    validator_of(format, |format, body| {
        content_rules::check(format, body)?;
        pairing::check(format, body)
    })
}

fn validator_of(
    format: llmchain::provider::Format,
    check: fn(llmchain::provider::Format, &Value) -> Result<(), String>,
) -> Validator {
    Arc::new(move |seen: &Seen| {
        let message = check(format, &seen.body).err()?;
        Some(match format.as_str() {
            "anthropic" => Reply::json(
                400,
                &json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}}),
            ),
            "gemini" => Reply::json(
                400,
                &json!({"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}),
            ),
            "ollama" => Reply::json(400, &json!({"error": message})),
            _ => Reply::json(
                400,
                &json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": null}}),
            ),
        })
    })
}

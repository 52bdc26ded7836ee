//! # llmchain-web
//!
//! A durable llmchain agent behind any AI SDK front end: [`ChatServer::router`] is an
//! axum [`Router`] speaking the Vercel AI SDK's **UI message stream protocol**, so a
//! `useChat` page (React, Vue, Svelte, Angular) with `DefaultChatTransport` drives a
//! chain whose conversation, runs and approvals live in an `llmchain-store` store.
//! `llmchain serve` is this router behind the CLI.
//!
//! No feature flags: everything is built; it depends on `llmchain` with its default
//! features (`runtime`, `http`).
//!
//! | route | what |
//! |---|---|
//! | `POST /api/chat` | what `DefaultChatTransport` posts (`id`, `messages`, `trigger`, `messageId`); answers `text/event-stream` with `x-vercel-ai-ui-message-stream: v1` |
//! | `GET /api/chat/{id}/stream` | resume (`useChat({ resume: true })`): replays the answer being generated and follows it; 204 when none is |
//! | `GET /api/chats` | the conversations, newest first |
//! | `GET /api/chats/{id}` | one conversation as UI messages |
//! | `GET /` | a small chat page, no build step |
//!
//! **The store is the authority.** The chat id is a conversation id. From a request only
//! the new user message (its text) and approval answers (approval id, `approved`,
//! `reason`) are taken; the calls, their arguments and what already ran come from the
//! store. The chain (provider, tools, MCP servers, review policy) comes from the
//! operator's [`ChainFactory`], never from the request. A call the policy asks about
//! pauses the run with a review in the store's review inbox; its approval id is the
//! review's id. An approval for a call that is not pending is refused (409); one answered
//! from the CLI (`llmchain reviews approve`) or another server is honoured
//! ([`ChatServer::spawn_resumer`] goes on with it). An answer runs on a task of its own:
//! a client that disconnects does not stop it, and a reload shows it.
//!
//! **Bounds.** A bearer token ([`ServeConfig::token`]; `llmchain serve` requires one
//! unless it listens on loopback), a cap on request bodies and on a message's text,
//! on answers generated at once and on streaming readers; each answer keeps at most
//! [`hub::MAX_REPLAY_BYTES`] for replay, and a reader that falls further behind is ended
//! (the run goes on and is stored); CORS is off unless origins are configured.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use llmchain::chain::{ChainState, LLMChain, Mode};
//! use llmchain_store::{Run, SqliteStore};
//! use llmchain_store::worker::BoxError;
//! use llmchain_web::{ChatServer, ServeConfig};
//!
//! let store = Arc::new(SqliteStore::open("chats.db").await?);
//! // The operator's chain: a model, tools, a review handler (here, none).
//! let factory = |_run: Run, state: ChainState| async move {
//!     let model = llmchain::http::HttpModel::new(
//!         llmchain::http::HttpModelConfig::from_env(
//!             llmchain::provider::Format::ANTHROPIC,
//!             "claude-sonnet-4-5",
//!         )?,
//!     )?;
//!     Ok::<_, BoxError>((LLMChain::from_state(Arc::new(model), state), Mode::while_needs_response()))
//! };
//! let app = ChatServer::new(store, factory)
//!     .config(ServeConfig::default())
//!     .router();
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! // TCP_NODELAY, header and idle timeouts, a cap on connections; until `stop`.
//! let stop = std::future::pending::<()>();
//! llmchain_web::serve(listener, app, ServeConfig::default().limits(), stop).await?;
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use llmchain::chain::HumanDecision;
use llmchain::tool::CancellationToken;
use llmchain_store::{
    ChainFactory, ReviewFilter, ReviewStatus, RunFilter, RunKind, RunStatus, Store, StoreError,
};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

mod body;
mod catch_up;
mod guard;
pub mod hub;
mod listen;
pub mod protocol;
mod turn;
pub mod ui;

use guard::{Guard, guard};
use hub::{Hub, Next};
pub use listen::{Limits, serve};
use turn::TurnEnv;
use ui::Intent;

/// How a [`ChatServer`] is bounded and who may use it.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// The bearer token every `/api` request must carry (`Authorization: Bearer …`);
    /// `None`: none (loopback only, as `llmchain serve` enforces).
    pub token: Option<String>,
    /// The largest request body, in bytes (default 1 MiB).
    pub max_body_bytes: usize,
    /// The longest text of one message, in bytes (default 256 KiB).
    pub max_text_bytes: usize,
    /// Answers generated at once (default 1024): a request past it gets 503.
    pub max_answers: usize,
    /// Streaming responses at once, readers of answers (default 4096).
    pub max_readers: usize,
    /// Origins allowed to call the API from a browser (CORS); empty: none. A request
    /// that changes something (a `POST`) from a page of any other origin than the
    /// server's own is refused.
    pub cors_origins: Vec<String>,
    /// The host names a request may name (`Host:`) besides the loopback ones
    /// (`localhost`, `127.0.0.1`, `[::1]`), which are always allowed; `"*"` allows any.
    /// Any other is refused, so a page of a name resolved to this server (DNS
    /// rebinding) cannot use it.
    pub allowed_hosts: Vec<String>,
    /// The profile the chains run under (recorded with their runs); the server lists,
    /// reads and decides only the chats of its profile.
    pub profile: Option<String>,
    /// This server's name in run leases: unique among live processes, and stable
    /// across restarts when [`ChatServer::release_own_leases`] is used (`llmchain
    /// serve` names itself by host and port).
    pub name: String,
    /// Connections served at once (default 4096); one more waits in the kernel's
    /// backlog until one closes. Fit it under the process's open-file limit, with room
    /// for the database and MCP servers (`llmchain serve` does).
    pub max_connections: usize,
    /// How long a connection may take to send a request's headers, and stay idle
    /// between requests, before it is closed (default 10 s).
    pub header_timeout: Duration,
    /// How long a request's body may take to start arriving, and the slack on top of
    /// what [`min_body_rate`](Self::min_body_rate) allows for the bytes so far (default
    /// 10 s); a body slower than that gets 408 and its connection is closed.
    pub body_timeout: Duration,
    /// The slowest a request's body may arrive, in bytes a second, past
    /// [`body_timeout`](Self::body_timeout) (default 16 KiB/s).
    pub min_body_rate: usize,
    /// What the page says answers its chats (`openai · gpt-4.1-mini`): shown with the
    /// profile on an empty chat (`GET /api/info`).
    pub model_label: Option<String>,
}

impl ServeConfig {
    /// The connection bounds of this configuration, for [`serve`].
    pub fn limits(&self) -> Limits {
        Limits {
            max_connections: self.max_connections,
            header_timeout: self.header_timeout,
        }
    }
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            token: None,
            max_body_bytes: 1 << 20,
            max_text_bytes: 256 << 10,
            max_answers: 1024,
            max_readers: 4096,
            cors_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            profile: None,
            name: format!("serve-{}", std::process::id()),
            max_connections: 4096,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            min_body_rate: 16 << 10,
            model_label: None,
        }
    }
}

/// The AI SDK back end: see the crate docs.
pub struct ChatServer<S> {
    app: Arc<App<S>>,
}

struct App<S> {
    env: Arc<TurnEnv<S>>,
    config: ServeConfig,
    hubs: Mutex<HashMap<String, Arc<Hub>>>,
    answers: Arc<Semaphore>,
    readers: Arc<Semaphore>,
}

impl<S: Store + 'static> ChatServer<S> {
    /// A server over `store`, whose chains `factory` builds (given the chat's run and
    /// its loaded state; the server adds the sink and the callbacks).
    pub fn new(store: Arc<S>, factory: impl ChainFactory) -> Self {
        ChatServer::with_config(store, Arc::new(factory), ServeConfig::default())
    }

    fn with_config(store: Arc<S>, factory: Arc<dyn ChainFactory>, config: ServeConfig) -> Self {
        let env = Arc::new(TurnEnv {
            store,
            factory,
            worker: config.name.clone(),
            profile: config.profile.clone(),
            shutdown: CancellationToken::new(),
        });
        ChatServer {
            app: Arc::new(App {
                env,
                answers: Arc::new(Semaphore::new(config.max_answers.max(1))),
                readers: Arc::new(Semaphore::new(config.max_readers.max(1))),
                config,
                hubs: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The same server with `config`.
    #[must_use]
    pub fn config(self, config: ServeConfig) -> Self {
        let env = &self.app.env;
        ChatServer::with_config(env.store.clone(), env.factory.clone(), config)
    }

    /// The connection bounds of its configuration, for [`serve`].
    pub fn limits(&self) -> Limits {
        self.app.config.limits()
    }

    /// A token that stops the answers being generated (each is saved, its run
    /// `cancelled`) when cancelled: for a graceful shutdown.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.app.env.shutdown.clone()
    }

    /// The axum router.
    pub fn router(&self) -> Router {
        let mut router = Router::new()
            .route("/api/chat", post(chat::<S>))
            .route("/api/chat/{id}/stream", get(resume::<S>))
            .route("/api/chats", get(list::<S>))
            .route("/api/chats/{id}", get(messages::<S>))
            .route("/api/info", get(info::<S>))
            // Inside the token check: no body is read for a request without the token.
            .route_layer(axum::middleware::from_fn_with_state(
                self.app.clone(),
                body::read_in_time::<S>,
            ))
            .route_layer(axum::middleware::from_fn_with_state(
                self.app.clone(),
                require_token::<S>,
            ))
            // The page holds no data: it asks for the token before it calls the API.
            .route("/", get(page))
            .route("/favicon.ico", get(favicon))
            .layer(DefaultBodyLimit::max(self.app.config.max_body_bytes))
            .with_state(self.app.clone());
        if !self.app.config.cors_origins.is_empty() {
            let origins: Vec<HeaderValue> = self
                .app
                .config
                .cors_origins
                .iter()
                .filter_map(|o| {
                    let o = o.trim().trim_end_matches('/');
                    // tower-http panics on `*` in a list; a wildcard cannot be honoured
                    // beside the guard's origin check anyway.
                    if o.contains('*') {
                        tracing::warn!(
                            origin = o,
                            "a wildcard CORS origin is ignored: name each origin"
                        );
                        return None;
                    }
                    HeaderValue::from_str(o).ok()
                })
                .collect();
            router = router.layer(
                tower_http::cors::CorsLayer::new()
                    .allow_origin(origins)
                    .allow_methods([Method::GET, Method::POST])
                    .allow_headers([
                        header::CONTENT_TYPE,
                        header::AUTHORIZATION,
                        header::HeaderName::from_static("traceparent"),
                    ]),
            );
        }
        // Outermost: a foreign host or a page elsewhere is refused before anything else.
        router.layer(axum::middleware::from_fn_with_state(
            Arc::new(Guard::new(&self.app.config)),
            guard,
        ))
    }

    /// Ends the run leases this server's name holds, left by a predecessor under the
    /// same name that stopped without ending them (killed): its chats go on at once
    /// instead of waiting for those leases to run out. Call it once, before serving, and
    /// only with a name no other live process uses ([`ServeConfig::name`]). Returns how
    /// many leases ended.
    pub async fn release_own_leases(&self) -> Result<u64, StoreError> {
        let released = self
            .app
            .env
            .store
            .release_leases(&self.app.config.name)
            .await?;
        if released > 0 {
            tracing::info!(server = %self.app.config.name, runs = released, "ended the leases a stopped predecessor held");
        }
        Ok(released)
    }

    /// Goes on, every `every`, with chats this server paused whose reviews were all
    /// decided elsewhere (`llmchain reviews approve`, another server): their answers are
    /// generated and stored, and a client that resumes or reloads sees them.
    pub fn spawn_resumer(&self, every: Duration) -> tokio::task::JoinHandle<()> {
        let app = self.app.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = app.env.shutdown.cancelled() => return,
                    _ = tokio::time::sleep(every) => {}
                }
                if let Err(e) = resume_decided(&app).await {
                    tracing::debug!(error = %e, "looking for decided reviews failed");
                }
            }
        })
    }
}

/// Starts answers for paused chats of this server whose reviews are all decided.
async fn resume_decided<S: Store + 'static>(app: &Arc<App<S>>) -> Result<(), StoreError> {
    let store = &app.env.store;
    let paused = store
        .list_all_runs(&RunFilter {
            status: Some(RunStatus::Paused),
            kind: Some(RunKind::Interactive),
            limit: 200,
        })
        .await?;
    // This server's chats only: another profile's belong to its own server.
    let own = json!({"profile": app.env.profile});
    for run in paused
        .into_iter()
        .filter(|r| r.state.extra.get("serve") == Some(&own))
    {
        let reviews = store
            .list_reviews(&ReviewFilter {
                conversation: Some(run.conversation_id.clone()),
                ..Default::default()
            })
            .await?;
        let pending = reviews.iter().any(|r| r.status == ReviewStatus::Pending);
        let decided_since = reviews
            .iter()
            .any(|r| r.decision.is_some() && r.decided_at.is_some_and(|t| t >= run.updated_at));
        if pending || !decided_since {
            continue;
        }
        let ask = turn::Ask {
            intent: Intent::Continue,
            title: None,
            traceparent: None,
        };
        let _ = start_answer(app, &run.conversation_id, ask);
    }
    Ok(())
}

/// A JSON error response.
fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, axum::Json(json!({"error": message.into()}))).into_response()
}

/// A request refused: its status and a message a person can act on (sent as
/// [`error`]). Small, so the checks that may refuse return it rather than a response.
struct Refusal(StatusCode, String);

impl Refusal {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self(status, message.into())
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        error(self.0, self.1)
    }
}

/// Lets a request to the API through only with the server's bearer token (when it
/// has one).
async fn require_token<S>(
    State(app): State<Arc<App<S>>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    match authorized(&app, request.headers()) {
        Ok(()) => next.run(request).await,
        Err(r) => r.into_response(),
    }
}

/// Checks the bearer token, in time independent of where the two differ.
fn authorized<S>(app: &App<S>, headers: &HeaderMap) -> Result<(), Refusal> {
    let Some(token) = &app.config.token else {
        return Ok(());
    };
    // The scheme's name is case-insensitive (RFC 7235 section 2.1).
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
        .unwrap_or("");
    let same = given.len() == token.len()
        && given
            .bytes()
            .zip(token.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0;
    if same {
        Ok(())
    } else {
        Err(Refusal::new(
            StatusCode::UNAUTHORIZED,
            "a bearer token is needed: Authorization: Bearer <token of llmchain serve>",
        ))
    }
}

/// A chat id a conversation may have: 1–128 characters of letters, digits, `-_.:`.
fn valid_chat_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id != "."
        && id != ".."
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
}

/// Starts an answer of `chat` on a task of its own, unless one is being generated.
fn start_answer<S: Store + 'static>(
    app: &Arc<App<S>>,
    chat: &str,
    ask: turn::Ask,
) -> Result<Arc<Hub>, Refusal> {
    let permit = app.answers.clone().try_acquire_owned().map_err(|_| {
        Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "the server generates {} answers at once, the most it may; try again shortly",
                app.config.max_answers
            ),
        )
    })?;
    let hub = Arc::new(Hub::default());
    {
        let mut hubs = app.hubs.lock().unwrap_or_else(|p| p.into_inner());
        if hubs.contains_key(chat) {
            return Err(Refusal::new(
                StatusCode::CONFLICT,
                format!(
                    "an answer of chat {chat} is being generated; follow it with GET /api/chat/{chat}/stream"
                ),
            ));
        }
        hubs.insert(chat.to_owned(), hub.clone());
    }
    let (app, chat, hub2) = (app.clone(), chat.to_owned(), hub.clone());
    tokio::spawn(async move {
        turn::run(app.env.clone(), chat.clone(), ask, hub2.clone()).await;
        let mut hubs = app.hubs.lock().unwrap_or_else(|p| p.into_inner());
        if hubs.get(&chat).is_some_and(|h| Arc::ptr_eq(h, &hub2)) {
            hubs.remove(&chat);
        }
        drop(permit);
    });
    Ok(hub)
}

/// The stream response of `hub` from its first chunk.
fn stream_response<S>(app: &App<S>, hub: Arc<Hub>) -> Response {
    let Ok(permit) = app.readers.clone().try_acquire_owned() else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many streams are open; try again shortly",
        );
    };
    let body = futures_util::stream::unfold(
        (hub, 0usize, Vec::<Bytes>::new().into_iter(), permit, false),
        |(hub, mut offset, mut queued, permit, mut ended)| async move {
            loop {
                if let Some(chunk) = queued.next() {
                    return Some((
                        Ok::<_, std::convert::Infallible>(chunk),
                        (hub, offset, queued, permit, ended),
                    ));
                }
                if ended {
                    return None;
                }
                match hub.next(&mut offset, 64) {
                    Next::Chunks(c) => queued = c.into_iter(),
                    Next::Wait => hub.wait(offset).await,
                    // A reader that fell behind what is kept is told so, and the stream
                    // ends as every stream does: the answer goes on and is saved.
                    Next::Behind => {
                        ended = true;
                        queued = vec![
                            protocol::Chunk::Error {
                                error_text: "this connection fell behind the answer; it goes \
                                             on and is saved: reload the chat to see it"
                                    .into(),
                            }
                            .to_sse(),
                            Bytes::from_static(protocol::DONE),
                        ]
                        .into_iter();
                    }
                    Next::Done => return None,
                }
            }
        },
    );
    let mut response = Response::new(Body::from_stream(body));
    for (name, value) in protocol::HEADERS {
        response
            .headers_mut()
            .insert(name, HeaderValue::from_static(value));
    }
    response
}

async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                 img-src 'self' data:; frame-ancestors 'none'",
            ),
        ],
        include_str!("page.html"),
    )
        .into_response()
}

/// No icon: an empty answer, so a browser's request for one is not a 404 in its
/// console.
async fn favicon() -> Response {
    StatusCode::NO_CONTENT.into_response()
}

async fn chat<S: Store + 'static>(
    State(app): State<Arc<App<S>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let req: ui::ChatRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("the body is not a chat request: {e}"),
            );
        }
    };
    if !valid_chat_id(&req.id) {
        return error(
            StatusCode::BAD_REQUEST,
            "the chat id must be 1-128 letters, digits, '-', '_', '.' or ':'",
        );
    }
    let intent = match ui::intent(&req) {
        Ok(i) => i,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let mut title = None;
    match &intent {
        Intent::Message { text, .. } => {
            if text.len() > app.config.max_text_bytes {
                return error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "the message has {} bytes of text, more than the {} allowed",
                        text.len(),
                        app.config.max_text_bytes
                    ),
                );
            }
            title = Some(llmchain_store::title_of(text));
        }
        Intent::Approvals { answers } => {
            // Decided here, in the store, before anything runs: the one authority.
            for a in answers {
                if let Err(r) = decide(&app, &req.id, a).await {
                    return r.into_response();
                }
            }
        }
        Intent::Regenerate { .. } | Intent::Continue => {}
    }
    // The browser's trace, when it sends one (a well-formed `traceparent` only).
    let traceparent = headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .filter(|t| llmchain_store::trace_context::parse(t).is_some())
        .map(str::to_owned);
    let ask = turn::Ask {
        intent,
        title,
        traceparent,
    };
    match start_answer(&app, &req.id, ask) {
        Ok(hub) => stream_response(&app, hub),
        Err(r) => r.into_response(),
    }
}

/// Records a person's answer to an approval request of chat `chat`: refused unless the
/// review is this chat's and pending (or already decided the same way: a client sending
/// again).
async fn decide<S: Store>(app: &App<S>, chat: &str, a: &ui::ApprovalAnswer) -> Result<(), Refusal> {
    let store = &app.env.store;
    // Decided only for this server's own chats: a CLI conversation's or a worker run's
    // reviews belong to `llmchain reviews`.
    match store.get_conversation(chat).await {
        Ok(Some(c)) if app.env.owns(&c.summary.metadata) => {}
        Ok(_) => {
            return Err(Refusal::new(
                StatusCode::NOT_FOUND,
                format!("there is no chat {chat:?}"),
            ));
        }
        Err(e) => {
            return Err(Refusal::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                e.to_string(),
            ));
        }
    }
    let review = match store.get_review(&a.id).await {
        Ok(Some(r)) if r.conversation_id == chat => r,
        Ok(_) => {
            return Err(Refusal::new(
                StatusCode::NOT_FOUND,
                format!("chat {chat} has no approval request {:?}", a.id),
            ));
        }
        Err(e) => {
            return Err(Refusal::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                e.to_string(),
            ));
        }
    };
    let decision = if a.approved {
        HumanDecision::Approve
    } else {
        HumanDecision::Deny {
            reason: a.reason.clone(),
        }
    };
    match store
        .decide_review(&review.id, &decision, "llmchain serve (web)")
        .await
    {
        Ok(_) => Ok(()),
        Err(StoreError::ReviewNotPending { status, .. }) => {
            let same = matches!(
                (review.status, a.approved),
                (ReviewStatus::Approved | ReviewStatus::Edited, true)
                    | (ReviewStatus::Denied | ReviewStatus::Rejected, false)
            );
            if same {
                Ok(())
            } else {
                Err(Refusal::new(
                    StatusCode::CONFLICT,
                    format!(
                        "the call {} is not waiting for approval: it was {status}{}",
                        review.call_id,
                        review
                            .decided_by
                            .as_deref()
                            .map(|b| format!(" by {b}"))
                            .unwrap_or_default()
                    ),
                ))
            }
        }
        Err(e) => Err(Refusal::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            e.to_string(),
        )),
    }
}

async fn resume<S: Store + 'static>(
    State(app): State<Arc<App<S>>>,
    Path(id): Path<String>,
) -> Response {
    let hub = app
        .hubs
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&id)
        .cloned();
    match hub {
        Some(hub) if hub.replayable() => stream_response(&app, hub),
        _ => StatusCode::NO_CONTENT.into_response(),
    }
}

/// `GET /api/info`: what answers here (the profile, the model), for the page's empty
/// chat.
async fn info<S: Store>(State(app): State<Arc<App<S>>>) -> Response {
    axum::Json(json!({
        "profile": app.config.profile,
        "model": app.config.model_label,
    }))
    .into_response()
}

async fn list<S: Store>(State(app): State<Arc<App<S>>>) -> Response {
    // This server's chats only (never CLI conversations or another profile's chats).
    let listed = app
        .env
        .store
        .list_conversations_tagged(turn::OWNER_KEY, app.env.owner(), 200)
        .await;
    match listed {
        Ok(list) => axum::Json(json!({
            "chats": list.iter().map(|c| json!({
                "id": c.id,
                "title": c.title,
                "messageCount": c.message_count,
                "updatedAt": c.updated_at,
            })).collect::<Vec<Value>>()
        }))
        .into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

async fn messages<S: Store>(State(app): State<Arc<App<S>>>, Path(id): Path<String>) -> Response {
    let store = &app.env.store;
    let stored = match store.get_conversation(&id).await {
        Ok(Some(s)) if app.env.owns(&s.summary.metadata) => s,
        Ok(_) => return error(StatusCode::NOT_FOUND, format!("there is no chat {id:?}")),
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let reviews = match store
        .list_reviews(&ReviewFilter {
            conversation: Some(id.clone()),
            ..Default::default()
        })
        .await
    {
        Ok(r) => r,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let rulings = match store.list_runs(&id).await {
        Ok(runs) => ui::Rulings::of_runs(&runs),
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let generating = app
        .hubs
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .contains_key(&id);
    axum::Json(json!({
        "id": id,
        "title": stored.summary.title,
        "generating": generating,
        "messages": ui::ui_messages(&stored.conversation, &reviews, &rulings),
    }))
    .into_response()
}

/// Whether `addr` is a loopback address (no token needed there).
pub fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

//! A chat server killed mid-chat and started again under its name, in one process: the
//! server runs on a runtime of its own, and "killed" is that runtime shut down at once
//! (its tasks dropped at their next await, nothing written on the way out: what a
//! SIGKILL leaves in the store). The model refuses, as a strict provider does, a
//! conversation in which a call has no result. At each kill point: nothing runs twice,
//! the chat is not blocked by the dead server's lease, and the next message is answered.
//! (`llmchain-cli/tests/crash_matrix.rs` kills the real processes.)

mod common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use futures_util::StreamExt;
use llmchain::chain::{
    ChainState, ChatModel, LLMChain, Mode, ModelError, ModelStream, ReviewDecision, ScriptedModel,
};
use llmchain::conversation::Conversation;
use llmchain::message::{ExecutionStatus, Role};
use llmchain::provider::Format;
use llmchain::provider::render::{ResponseScript, render_stream};
use llmchain::tool::{Tool, ToolOutput};
use llmchain_store::worker::BoxError;
use llmchain_store::{Run, SqliteStore, Store};
use llmchain_web::{ChatServer, ServeConfig};
use serde_json::json;

/// A scripted model that stalls the calls it is told to (a stream that never ends) and
/// refuses, as OpenAI does with a 400, a conversation whose calls and results do not
/// pair up.
struct Strict {
    inner: ScriptedModel,
    calls: AtomicUsize,
    stall: Mutex<HashSet<usize>>,
    refused: AtomicUsize,
}

impl Strict {
    fn new() -> Arc<Strict> {
        Arc::new(Strict {
            inner: ScriptedModel::new(Format::OPENAI_CHAT).chunk_size(8),
            calls: AtomicUsize::new(0),
            stall: Mutex::default(),
            refused: AtomicUsize::new(0),
        })
    }

    fn script(&self, turns: &[ResponseScript]) {
        for t in turns {
            let bytes = render_stream(Format::OPENAI_CHAT, t).unwrap();
            self.inner
                .push(llmchain::chain::ScriptedTurn::Stream(bytes.into()));
        }
    }

    /// The model call numbered `n` (from 0) stalls.
    fn stall_call(&self, n: usize) {
        self.stall.lock().unwrap().insert(n);
    }
}

impl ChatModel for Strict {
    fn model_name(&self) -> &str {
        "strict"
    }
    fn provider_name(&self) -> &str {
        "test"
    }
    fn stream<'a>(&'a self, conversation: &'a Conversation) -> ModelStream<'a> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        let refused: Vec<String> = conversation
            .inconsistencies()
            .into_iter()
            .filter(|i| i.severity == llmchain::conversation::Severity::Refused)
            .map(|i| format!("{}: {}", i.path, i.message))
            .collect();
        if !refused.is_empty() {
            self.refused.fetch_add(1, Ordering::SeqCst);
            let e = ModelError::Http {
                provider: "test".into(),
                status: 400,
                kind: llmchain::chain::HttpErrorKind::InvalidRequest,
                message: format!(
                    "An assistant message with 'tool_calls' must be followed by tool messages \
                     responding to each 'tool_call_id': {}",
                    refused.join("; ")
                ),
                retry_after: None,
            };
            return Box::pin(futures_util::stream::once(async move { Err(e) }));
        }
        if self.stall.lock().unwrap().contains(&n) {
            // The first few reads of the scripted answer, then nothing more, ever.
            let inner = futures_util::stream::once(async move { self.inner.stream(conversation) })
                .flatten()
                .take(4);
            return Box::pin(inner.chain(futures_util::stream::pending()));
        }
        Box::pin(
            futures_util::stream::once(async move { self.inner.stream(conversation) }).flatten(),
        )
    }
}

/// What every incarnation of the server shares: the model, the store's file, and the
/// `charge` tool's executions (it waits for a permit when `hold` has none).
struct World {
    model: Arc<Strict>,
    executions: Arc<AtomicUsize>,
    hold: Arc<tokio::sync::Semaphore>,
    dir: tempfile::TempDir,
}

impl World {
    fn new() -> World {
        World {
            model: Strict::new(),
            executions: Arc::default(),
            hold: Arc::new(tokio::sync::Semaphore::new(0)),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn db(&self) -> std::path::PathBuf {
        self.dir.path().join("chats.db")
    }
}

/// One incarnation of the server, on a runtime of its own.
struct Incarnation {
    runtime: Option<tokio::runtime::Runtime>,
    base: String,
    /// The leases of its dead predecessor it ended as it started.
    released: u64,
}

impl Incarnation {
    /// Starts the server named `serve@test` (the name it keeps across restarts): `charge`
    /// is asked about (the page approves it) when `ask`, else approved by the policy.
    fn start(world: &World, ask: bool) -> Incarnation {
        let (model, executions, hold) = (
            world.model.clone(),
            world.executions.clone(),
            world.hold.clone(),
        );
        let db = world.db();
        // Built and started on a thread of its own: the test's runtime cannot block on
        // another.
        let (runtime, (base, released)) = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let base = runtime.block_on(async move {
            let store = Arc::new(SqliteStore::open(&db).await.unwrap());
            let factory = move |_run: Run, state: ChainState| {
                let (model, executions, hold) = (model.clone(), executions.clone(), hold.clone());
                async move {
                    let charge = Tool::builder("charge")
                        .schema(json!({"type": "object", "properties": {"amount": {"type": "number"}}}))
                        .handler(move |_, _| {
                            let (executions, hold) = (executions.clone(), hold.clone());
                            async move {
                                executions.fetch_add(1, Ordering::SeqCst);
                                let _permit = hold.acquire().await;
                                ToolOutput::text("charged")
                            }
                        })
                        .build()?;
                    let chain = LLMChain::from_state(model, state)
                        .with_tool(charge)
                        .with_review(move |_: &llmchain::message::ToolCall| {
                            if ask {
                                ReviewDecision::Interrupt
                            } else {
                                ReviewDecision::Approve
                            }
                        });
                    Ok::<_, BoxError>((chain, Mode::while_needs_response()))
                }
            };
            let server = ChatServer::new(store, factory).config(ServeConfig {
                name: "serve@test".into(),
                ..ServeConfig::default()
            });
            let released = server.release_own_leases().await.unwrap();
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let base = format!("http://{}", listener.local_addr().unwrap());
            let limits = server.limits();
            tokio::spawn(llmchain_web::serve(
                listener,
                server.router(),
                limits,
                std::future::pending(),
            ));
            (base, released)
        });
        (runtime, base)
        })
        .join()
        .unwrap();
        Incarnation {
            runtime: Some(runtime),
            base,
            released,
        }
    }

    /// Kills it: every task dropped where it stands, nothing more written.
    fn kill(mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Drop for Incarnation {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// Posts `body` on a thread of its own (the client of a server about to be killed may
/// never get its answer).
fn post_in_background(base: &str, body: serde_json::Value) {
    let url = format!("{base}/api/chat");
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            if let Ok(r) = reqwest::Client::new().post(url).json(&body).send().await {
                let _ = r.text().await;
            }
        });
    });
}

async fn wait_for(what: &str, test: impl Fn() -> bool) {
    tokio::time::timeout(Duration::from_secs(20), async {
        while !test() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("waited 20 s for {what}"));
}

/// After a restart: the next message is answered at once (the dead server's lease does
/// not block it), `charge` ran `ran` times in all, and the conversation is one a strict
/// provider accepts.
async fn goes_on(world: &World, chat: &str, ran: usize, answer: &str) -> Conversation {
    let server = Incarnation::start(world, false);
    assert_eq!(server.released, 1, "the dead server held the chat's lease");
    world.model.script(&[ResponseScript::text(answer)]);
    let started = std::time::Instant::now();
    let (status, c, _) = post(&server.base, user(chat, "u-next", "and now?")).await;
    assert_eq!(status, 200);
    assert!(c.iter().all(|c| c["type"] != "error"), "{c:?}");
    let text: String = c
        .iter()
        .filter(|c| c["type"] == "text-delta")
        .map(|c| c["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, answer);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the chat waited for its dead server's lease"
    );
    assert_eq!(
        world.executions.load(Ordering::SeqCst),
        ran,
        "a call ran twice"
    );
    assert_eq!(world.model.refused.load(Ordering::SeqCst), 0);
    let store = SqliteStore::open(world.db()).await.unwrap();
    let stored = store.get_conversation(chat).await.unwrap().unwrap();
    assert!(
        stored.conversation.inconsistencies().is_empty(),
        "{:?}",
        stored.conversation.inconsistencies()
    );
    server.kill();
    stored.conversation
}

fn charge_call() -> ResponseScript {
    ResponseScript::tool_call("call_1", "charge", r#"{"amount": 5}"#)
}

/// The issue's second reproduction: approved in the page, killed while `charge` runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_while_an_approved_call_executes() {
    let world = World::new();
    world.model.script(&[charge_call()]);
    let first = Incarnation::start(&world, true);
    let (_, c, _) = post(&first.base, user("chat", "u1", "charge 5")).await;
    let approval_id = c
        .iter()
        .find(|c| c["type"] == "tool-approval-request")
        .unwrap()["approvalId"]
        .as_str()
        .unwrap()
        .to_owned();
    post_in_background(&first.base, approval("chat", "m1", &approval_id, true));
    let executions = world.executions.clone();
    wait_for("charge to start", || executions.load(Ordering::SeqCst) == 1).await;
    first.kill();
    let conversation = goes_on(
        &world,
        "chat",
        1,
        "I could not tell whether it went through.",
    )
    .await;
    let roles: Vec<Role> = conversation.messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::User,
            Role::Assistant
        ]
    );
    let result = &conversation.messages[2].tool_results[0];
    assert!(result.is_error());
    assert!(
        result.content_text().contains("unknown"),
        "{}",
        result.content_text()
    );
    assert_eq!(
        conversation.messages[1].tool_calls[0].typed_execution_status(),
        Some(ExecutionStatus::Failed)
    );
}

/// The same without review (the policy approves): the paths are one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_while_an_auto_approved_call_executes() {
    let world = World::new();
    world.model.script(&[charge_call()]);
    let first = Incarnation::start(&world, false);
    post_in_background(&first.base, user("chat", "u1", "charge 5"));
    let executions = world.executions.clone();
    wait_for("charge to start", || executions.load(Ordering::SeqCst) == 1).await;
    first.kill();
    let conversation = goes_on(&world, "chat", 1, "Checked.").await;
    assert!(conversation.messages[2].tool_results[0].is_error());
}

/// The issue's third reproduction: the call's result stored, killed before the text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_the_result_before_the_text() {
    let world = World::new();
    world.hold.add_permits(100);
    world.model.script(&[
        charge_call(),
        ResponseScript::text("Charged 5 (never finished)."),
    ]);
    world.model.stall_call(1);
    let first = Incarnation::start(&world, false);
    post_in_background(&first.base, user("chat", "u1", "charge 5"));
    let model = world.model.clone();
    wait_for("the second model call", || {
        model.calls.load(Ordering::SeqCst) == 2
    })
    .await;
    first.kill();
    let conversation = goes_on(&world, "chat", 1, "Charged 5.").await;
    let roles: Vec<Role> = conversation.messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::User,
            Role::Assistant
        ]
    );
    assert_eq!(
        conversation.messages[2].tool_results[0].content_text(),
        "charged"
    );
}

/// Killed while the model streams a call, and while it streams text: the answer was
/// held for the sink's next write, so nothing of it was stored and no call ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_while_the_model_streams() {
    let text =
        ResponseScript::text("A long answer that is cut off by the kill, one piece at a time.");
    for (chat, script) in [("streaming-call", charge_call()), ("streaming-text", text)] {
        let world = World::new();
        world.model.script(&[script]);
        world.model.stall_call(0);
        let first = Incarnation::start(&world, false);
        post_in_background(&first.base, user(chat, "u1", "go"));
        let model = world.model.clone();
        wait_for("the model call", || model.calls.load(Ordering::SeqCst) == 1).await;
        first.kill();
        let conversation = goes_on(&world, chat, 0, "Here.").await;
        let roles: Vec<Role> = conversation.messages.iter().map(|m| m.role).collect();
        assert_eq!(roles, [Role::User, Role::User, Role::Assistant], "{chat}");
    }
}

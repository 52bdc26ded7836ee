//! The review inbox and the run queue's authority (issue 27), against SQLite and (with
//! `LLMCHAIN_TEST_POSTGRES_URL`) PostgreSQL: a worker pauses a run whose call needs a
//! person, the store takes one decision per pending review, the last one requeues the
//! run, and a worker resumes it with exactly the stored decision; what is stored is what
//! ran. Also: workers claim only their profiles' queued runs, interactive processes do
//! not take queued runs over, and the lease is kept from the claim on.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use llmchain::chain::{ChainState, HumanDecision, LLMChain, Mode, ReviewDecision, ScriptedModel};
use llmchain::conversation::Conversation;
use llmchain::message::{ExecutionStatus, Message};
use llmchain::provider::Format;
use llmchain::provider::render::ResponseScript;
use llmchain::tool::Tool;
use llmchain_store::worker::BoxError;
use llmchain_store::{
    NewConversation, PostgresStore, ReviewFilter, ReviewStatus, Run, RunOptions, RunState,
    RunStatus, SqliteStore, Store, StoreError, Worker,
};
use serde_json::json;

type Ledger = Arc<Mutex<Vec<String>>>;

/// A non-idempotent tool that records each execution with its arguments.
fn write_file(ledger: &Ledger) -> Tool {
    let ledger = ledger.clone();
    Tool::builder("write_file")
        .schema(json!({"type": "object", "properties": {"content": {"type": "string"}}}))
        .handler(move |args, ctx| {
            let ledger = ledger.clone();
            async move {
                ledger
                    .lock()
                    .unwrap()
                    .push(format!("{}:{}", ctx.tool_call_id(), args["content"]));
                "written"
            }
        })
        .build()
        .unwrap()
}

/// What the models of a test were sent, request by request.
type Requests = Arc<Mutex<Vec<Vec<u8>>>>;

/// A factory whose chain asks a person about every call (`Interrupt`), with a model
/// that calls `write_file` once and then answers; each model's requests are kept.
fn factory(
    ledger: &Ledger,
    requests: &Requests,
) -> impl Fn(
    Run,
    ChainState,
) -> futures_util::future::BoxFuture<'static, Result<(LLMChain, Mode), BoxError>>
+ Send
+ Sync
+ 'static {
    let ledger = ledger.clone();
    let requests = requests.clone();
    move |_run: Run, state: ChainState| {
        let ledger = ledger.clone();
        let requests = requests.clone();
        Box::pin(async move {
            let calls = state
                .conversation
                .messages
                .iter()
                .filter(|m| !m.tool_calls.is_empty())
                .count();
            let mut model = ScriptedModel::new(Format::OPENAI_CHAT);
            if calls == 0 {
                model = model.respond(ResponseScript::tool_call(
                    "call_1",
                    "write_file",
                    r#"{"content":"original"}"#,
                ))?;
            }
            let model = Arc::new(model.respond(ResponseScript::text("done"))?);
            let keep = model.clone();
            let chain = LLMChain::from_state(model, state)
                .with_tool(write_file(&ledger))
                .with_review(|_: &llmchain::message::ToolCall| ReviewDecision::Interrupt)
                .with_callbacks(
                    llmchain::chain::Callbacks::new().on_llm_new_message(move |_| {
                        *requests.lock().unwrap() = keep.requests();
                    }),
                );
            Ok((chain, Mode::while_needs_response()))
        })
    }
}

async fn conversation<S: Store>(store: &S) -> String {
    let mut c = Conversation::new();
    c.messages.push(Message::user("write the file"));
    store
        .create_conversation(NewConversation::from_conversation(c))
        .await
        .unwrap()
}

async fn enqueue<S: Store>(store: &S, id: &str, profile: &str) -> Run {
    store
        .enqueue_run(
            id,
            &RunState {
                mode: "while_needs_response".into(),
                ..Default::default()
            },
            &RunOptions {
                profile: Some(profile.into()),
                ..Default::default()
            },
        )
        .await
        .unwrap()
}

fn worker<S: Store + 'static>(store: &Arc<S>, ledger: &Ledger, requests: &Requests) -> Worker<S> {
    Worker::new(store.clone(), "w", factory(ledger, requests))
        .poll_interval(Duration::from_millis(20))
        .profiles(["p"])
}

/// Enqueue → the worker pauses with one pending review → an edit from "another
/// process" (a second store handle) requeues the run → a worker resumes it: the tool ran
/// once, with the edited arguments, and the stored call (and the model's next request)
/// carries them, the model's own kept in its metadata.
async fn a_paused_run_is_resumed_with_the_stored_edit<S: Store + 'static>(
    store: Arc<S>,
    other: Arc<S>,
) {
    let ledger = Ledger::default();
    let requests = Requests::default();
    let id = conversation(store.as_ref()).await;
    let run = enqueue(store.as_ref(), &id, "p").await;
    worker(&store, &ledger, &requests).drain().await;
    let paused = store.get_run(&run.id).await.unwrap().unwrap();
    assert_eq!(paused.state.status, RunStatus::Paused);
    assert!(paused.lease_owner.is_none());
    assert_eq!(paused.attempt, 0, "a pause is not a failed attempt");
    assert!(
        ledger.lock().unwrap().is_empty(),
        "nothing ran before the decision"
    );
    let inbox = other.list_reviews(&ReviewFilter::pending()).await.unwrap();
    assert_eq!(inbox.len(), 1);
    let review = &inbox[0];
    assert_eq!(
        (review.call_id.as_str(), review.tool.as_str()),
        ("call_1", "write_file")
    );
    assert_eq!(review.arguments, json!({"content": "original"}));
    assert_eq!(review.run_id.as_deref(), Some(run.id.as_str()));

    let edit = HumanDecision::Edit {
        arguments: json!({"content": "edited"}).as_object().unwrap().clone(),
    };
    let decided = other
        .decide_review(&review.id, &edit, "alice")
        .await
        .unwrap();
    assert!(decided.requeued);
    assert_eq!(decided.review.status, ReviewStatus::Edited);
    assert_eq!(decided.review.decided_by.as_deref(), Some("alice"));
    // A second decision for the same call is refused: it is not pending any more.
    let again = other
        .decide_review(&review.id, &HumanDecision::Approve, "bob")
        .await
        .unwrap_err();
    assert!(
        matches!(again, StoreError::ReviewNotPending { .. }),
        "{again}"
    );
    assert!(matches!(
        other
            .decide_review("nope", &HumanDecision::Approve, "bob")
            .await,
        Err(StoreError::ReviewNotFound(_))
    ));
    // Addressed by the call: the same refusal, the call and conversation named.
    let by_call = llmchain_store::review::decide_call(
        other.as_ref(),
        &id,
        "call_1",
        &HumanDecision::Approve,
        "bob",
    )
    .await
    .unwrap_err();
    assert!(
        matches!(by_call, StoreError::ReviewNotPending { .. }),
        "{by_call}"
    );
    assert!(by_call.to_string().contains("call_1"), "{by_call}");
    let unknown = llmchain_store::review::decide_call(
        other.as_ref(),
        &id,
        "call_9",
        &HumanDecision::Approve,
        "bob",
    )
    .await;
    assert!(matches!(unknown, Err(StoreError::ReviewNotFound(_))));
    assert_eq!(
        store.get_run(&run.id).await.unwrap().unwrap().state.status,
        RunStatus::Pending
    );

    worker(&store, &ledger, &requests).drain().await;
    assert_eq!(*ledger.lock().unwrap(), ["call_1:\"edited\""]);
    assert_eq!(
        store.get_run(&run.id).await.unwrap().unwrap().state.status,
        RunStatus::Done
    );
    let stored = store.get_conversation(&id).await.unwrap().unwrap();
    let call = &stored.conversation.messages[1].tool_calls[0];
    assert_eq!(call.arguments_as_map()["content"], "edited");
    assert!(call.was_edited());
    assert_eq!(call.original_arguments().unwrap()["content"], "original");
    assert_eq!(call.execution_status(), "completed");
    let last: serde_json::Value =
        serde_json::from_slice(requests.lock().unwrap().last().unwrap()).unwrap();
    let sent = last["messages"][1]["tool_calls"][0]["function"]["arguments"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&sent).unwrap(),
        json!({"content": "edited"})
    );
}

/// A denial from the inbox: the call never runs and is stored `denied`, not
/// `completed`; the model is told.
async fn a_denied_call_is_stored_denied<S: Store + 'static>(store: Arc<S>, other: Arc<S>) {
    let ledger = Ledger::default();
    let requests = Requests::default();
    let id = conversation(store.as_ref()).await;
    let run = enqueue(store.as_ref(), &id, "p").await;
    worker(&store, &ledger, &requests).drain().await;
    let review = other.list_reviews(&ReviewFilter::pending()).await.unwrap()[0].clone();
    other
        .decide_review(
            &review.id,
            &HumanDecision::Deny {
                reason: Some("not today".into()),
            },
            "alice",
        )
        .await
        .unwrap();
    worker(&store, &ledger, &requests).drain().await;
    assert!(ledger.lock().unwrap().is_empty());
    let stored = store.get_conversation(&id).await.unwrap().unwrap();
    let call = &stored.conversation.messages[1].tool_calls[0];
    assert_eq!(call.typed_execution_status(), Some(ExecutionStatus::Denied));
    let result = &stored.conversation.messages[2].tool_results[0];
    assert_eq!(result.content_text(), "not today");
    assert!(!result.is_error());
    assert_eq!(
        store.get_run(&run.id).await.unwrap().unwrap().state.status,
        RunStatus::Done
    );
}

/// Cancelling a paused run cancels its reviews: no one can decide them any more.
async fn cancelling_a_paused_run_cancels_its_reviews<S: Store + 'static>(
    store: Arc<S>,
    other: Arc<S>,
) {
    let ledger = Ledger::default();
    let requests = Requests::default();
    let id = conversation(store.as_ref()).await;
    let run = enqueue(store.as_ref(), &id, "p").await;
    worker(&store, &ledger, &requests).drain().await;
    let review = store.list_reviews(&ReviewFilter::pending()).await.unwrap()[0].clone();
    other.cancel_run(&run.id).await.unwrap();
    let e = store
        .decide_review(&review.id, &HumanDecision::Approve, "alice")
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::ReviewNotPending { .. }), "{e}");
    assert_eq!(
        store.get_review(&review.id).await.unwrap().unwrap().status,
        ReviewStatus::Cancelled
    );
    assert!(ledger.lock().unwrap().is_empty());
}

/// Workers claim only queued runs of their own profiles; a run of another profile is
/// left pending for a worker that has it, and an interactive run is never claimed.
async fn workers_claim_only_their_profiles<S: Store + 'static>(store: Arc<S>, _other: Arc<S>) {
    let id = conversation(store.as_ref()).await;
    let run = enqueue(store.as_ref(), &id, "other").await;
    let lease = Duration::from_secs(30);
    let mine = ["p".to_owned()];
    assert!(
        store
            .claim_run_of("w", lease, Some(&mine))
            .await
            .unwrap()
            .is_none()
    );
    let ledger = Ledger::default();
    let requests = Requests::default();
    // Drain ends although a run of another profile is pending.
    tokio::time::timeout(
        Duration::from_secs(20),
        worker(&store, &ledger, &requests).drain(),
    )
    .await
    .expect("drain ends: the pending run is not this worker's");
    assert_eq!(
        store.get_run(&run.id).await.unwrap().unwrap().state.status,
        RunStatus::Pending
    );
    let theirs = ["other".to_owned()];
    let claimed = store
        .claim_run_of("w2", lease, Some(&theirs))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claimed.id, run.id);
    assert_eq!(claimed.profile.as_deref(), Some("other"));

    // An interactive process does not take a queued run over, and says how to cancel it.
    let e = store
        .claim_conversation(&id, "cli", lease, &RunState::default())
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::QueuedRunOpen { .. }), "{e}");
    assert!(e.to_string().contains("llmchain runs cancel"), "{e}");

    // An interactive run is never claimed by a worker; when its process dies (the lease
    // runs out), it is marked failed, not put in the queue.
    let id2 = conversation(store.as_ref()).await;
    let held = store
        .claim_conversation(
            &id2,
            "cli-1",
            Duration::from_millis(50),
            &RunState::default(),
        )
        .await
        .unwrap();
    assert_eq!(held.kind, llmchain_store::RunKind::Interactive);
    tokio::time::sleep(Duration::from_millis(120)).await;
    assert!(
        store
            .claim_run_of("w", lease, None)
            .await
            .unwrap()
            .is_none()
    );
    let dead = store.get_run(&held.id).await.unwrap().unwrap();
    assert_eq!(dead.state.status, RunStatus::Failed);
    assert!(dead.last_error.unwrap().contains("cli-1"));
}

/// Two reviews of one run decided at once from two handles: exactly one of the two
/// decisions requeues the run (the last one), and the run is pending after both.
async fn concurrent_decisions_requeue_once<S: Store + 'static>(store: Arc<S>, other: Arc<S>) {
    let id = conversation(store.as_ref()).await;
    let run = enqueue(store.as_ref(), &id, "p").await;
    let claimed = store
        .claim_run_of("w", Duration::from_secs(30), None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claimed.id, run.id);
    let reviews: Vec<llmchain_store::NewReview> = ["a", "b"]
        .iter()
        .map(|c| llmchain_store::NewReview {
            call_id: (*c).into(),
            round: 0,
            tool: "write_file".into(),
            arguments: json!({}),
            question: None,
            schema: Some(json!({"type": "object"})),
        })
        .collect();
    let status = store
        .pause_run(&claimed.lease().unwrap(), &RunState::default(), &reviews)
        .await
        .unwrap();
    assert_eq!(status, RunStatus::Paused);
    let open = store.list_reviews(&ReviewFilter::pending()).await.unwrap();
    assert_eq!(open.len(), 2);
    let (a, b) = tokio::join!(
        store.decide_review(&open[0].id, &HumanDecision::Approve, "x"),
        other.decide_review(&open[1].id, &HumanDecision::Approve, "y"),
    );
    let requeued = [a.unwrap().requeued, b.unwrap().requeued];
    assert_eq!(requeued.iter().filter(|r| **r).count(), 1, "{requeued:?}");
    assert_eq!(
        store.get_run(&run.id).await.unwrap().unwrap().state.status,
        RunStatus::Pending
    );
}

/// The lease is renewed from the claim on: a chain that takes several lease lengths to
/// build (MCP servers starting slowly) still runs, and the run is not lost.
async fn the_lease_is_kept_while_the_chain_is_built<S: Store + 'static>(
    store: Arc<S>,
    _other: Arc<S>,
) {
    let ledger = Ledger::default();
    let id = conversation(store.as_ref()).await;
    let run = enqueue(store.as_ref(), &id, "p").await;
    let slow = {
        let ledger = ledger.clone();
        move |_run: Run, state: ChainState| {
            let ledger = ledger.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(3000)).await;
                let model = ScriptedModel::new(Format::OPENAI_CHAT)
                    .respond(ResponseScript::tool_call(
                        "call_1",
                        "write_file",
                        "{\"content\":\"x\"}",
                    ))?
                    .respond(ResponseScript::text("done"))?;
                Ok::<_, BoxError>((
                    LLMChain::from_state(Arc::new(model), state).with_tool(write_file(&ledger)),
                    Mode::while_needs_response(),
                ))
            }
        }
    };
    let worker = Worker::new(store.clone(), "slow", slow)
        .lease(Duration::from_millis(1000))
        .poll_interval(Duration::from_millis(20));
    let stats = worker.stats();
    worker.drain().await;
    let c = stats.snapshot();
    assert_eq!((c.claimed, c.done, c.lease_lost), (1, 1, 0));
    assert_eq!(ledger.lock().unwrap().len(), 1);
    assert_eq!(
        store.get_run(&run.id).await.unwrap().unwrap().state.status,
        RunStatus::Done
    );
}

/// `LeasedRun::start`, the one start of every front end: a chain that cannot be built
/// fails the run with the builder's words (retried later only when the failure may
/// pass, for a queued run), and a lease lost while the chain is built (the run cancelled
/// by another process) ends it as lost, writing nothing more: the run stays cancelled.
async fn a_run_that_cannot_start_is_failed_or_lost<S: Store + 'static>(
    store: Arc<S>,
    other: Arc<S>,
) {
    use llmchain_store::{Claim, LeasedRun, NotBuilt, RunEnd};
    let claim = |id: &str| Claim::Conversation {
        id: id.to_owned(),
        state: RunState {
            mode: "while_needs_response".into(),
            ..Default::default()
        },
    };
    // A builder that fails for good.
    let id = conversation(store.as_ref()).await;
    let held = LeasedRun::claim(store.clone(), claim(&id), "cli", Duration::from_secs(30))
        .await
        .unwrap();
    let started = held
        .start(|_, _| async { Err::<(), _>(NotBuilt::permanent("no such MCP server 'x'")) })
        .await;
    let ended = started.err().expect("the run did not start");
    assert!(
        matches!(&ended.end, RunEnd::Failed { error, status: RunStatus::Failed } if error == "no such MCP server 'x'"),
        "{:?}",
        ended.end
    );
    let stored = store.get_run(&ended.run.id).await.unwrap().unwrap();
    assert_eq!(stored.state.status, RunStatus::Failed);
    assert_eq!(stored.last_error.as_deref(), Some("no such MCP server 'x'"));

    // A queued run whose builder fails in a way that may pass goes back to pending.
    let id = conversation(store.as_ref()).await;
    let run = enqueue(store.as_ref(), &id, "p").await;
    let claimed = store
        .claim_run("w", Duration::from_secs(30))
        .await
        .unwrap()
        .expect("a queued run");
    assert_eq!(claimed.id, run.id);
    let held = LeasedRun::claimed(store.clone(), claimed, Duration::from_secs(30)).unwrap();
    let ended = held
        .start(|_, state| async move {
            assert_eq!(
                state.conversation.messages.len(),
                1,
                "the stored conversation"
            );
            Err::<(), _>(NotBuilt::retryable("the MCP server is starting"))
        })
        .await
        .err()
        .expect("the run did not start");
    assert!(
        matches!(
            ended.end,
            RunEnd::Failed {
                status: RunStatus::Pending,
                ..
            }
        ),
        "{:?}",
        ended.end
    );

    // The lease lost while the chain is built: nothing more is written.
    let id = conversation(store.as_ref()).await;
    let held = LeasedRun::claim(store.clone(), claim(&id), "cli", Duration::from_millis(300))
        .await
        .unwrap();
    let run_id = held.run().id.clone();
    let cancel = other.clone();
    let ended = held
        .start(|run, _| async move {
            cancel.cancel_run(&run.id).await.unwrap();
            // Longer than the lease: the heartbeat finds the run is no longer this
            // process's long before.
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok::<_, NotBuilt>(())
        })
        .await
        .err()
        .expect("the run did not start");
    assert!(
        matches!(&ended.end, RunEnd::Lost { reason } if reason.contains("while the run was starting")),
        "{:?}",
        ended.end
    );
    assert_eq!(
        store.get_run(&run_id).await.unwrap().unwrap().state.status,
        RunStatus::Cancelled
    );
}

/// A tool that stops to ask a person (its own interrupt) in a worker: the run pauses
/// with a review of that call; once approved in the inbox, a worker runs the call again
/// (the tool sees the approval) and the run finishes. It ran once, approved.
async fn a_tools_own_interrupt_waits_in_the_inbox<S: Store + 'static>(
    store: Arc<S>,
    other: Arc<S>,
) {
    let ledger = Ledger::default();
    let id = conversation(store.as_ref()).await;
    let run = enqueue(store.as_ref(), &id, "p").await;
    let factory = {
        let ledger = ledger.clone();
        move |_run: Run, state: ChainState| {
            let ledger = ledger.clone();
            async move {
                let asked = state
                    .conversation
                    .messages
                    .iter()
                    .any(|m| !m.tool_calls.is_empty());
                let mut model = ScriptedModel::new(Format::OPENAI_CHAT);
                if !asked {
                    model = model.respond(ResponseScript::tool_call("call_1", "deploy", "{}"))?;
                }
                let model = model.respond(ResponseScript::text("deployed"))?;
                let deploy = Tool::builder("deploy")
                    .handler(move |_, ctx| {
                        let ledger = ledger.clone();
                        async move {
                            if !ctx.human_approved() {
                                return llmchain::tool::ToolOutput::interrupt(
                                    "Deploy needs a person's approval.",
                                    json!({}),
                                );
                            }
                            ledger.lock().unwrap().push(ctx.tool_call_id().to_owned());
                            llmchain::tool::ToolOutput::text("deployed")
                        }
                    })
                    .build()?;
                Ok::<_, BoxError>((
                    LLMChain::from_state(Arc::new(model), state).with_tool(deploy),
                    Mode::while_needs_response(),
                ))
            }
        }
    };
    let worker = || {
        Worker::new(store.clone(), "w", factory.clone()).poll_interval(Duration::from_millis(20))
    };
    worker().drain().await;
    assert_eq!(
        store.get_run(&run.id).await.unwrap().unwrap().state.status,
        RunStatus::Paused
    );
    let inbox = other.list_reviews(&ReviewFilter::pending()).await.unwrap();
    assert_eq!(inbox.len(), 1);
    assert_eq!(inbox[0].tool, "deploy");
    let decided = other
        .decide_review(&inbox[0].id, &HumanDecision::Approve, "ops")
        .await
        .unwrap();
    assert!(decided.requeued);
    worker().drain().await;
    assert_eq!(*ledger.lock().unwrap(), ["call_1"]);
    assert_eq!(
        store.get_run(&run.id).await.unwrap().unwrap().state.status,
        RunStatus::Done
    );
    let stored = store.get_conversation(&id).await.unwrap().unwrap();
    let messages = &stored.conversation.messages;
    assert_eq!(messages[2].tool_results[0].content_text(), "deployed");
    assert!(!messages[2].tool_results[0].is_interrupt());
    assert!(messages[1].tool_calls[0].human_approved());
    assert_eq!(messages.last().unwrap().text().as_deref(), Some("deployed"));
}

/// A decision outlives the run it was made under: decided, then that run cancelled
/// (its process gone), a new run of the conversation asks about the same call and finds
/// the decision already made: the call runs once, with it.
async fn a_decision_outlives_its_run<S: Store + 'static>(store: Arc<S>, other: Arc<S>) {
    let ledger = Ledger::default();
    let requests = Requests::default();
    let id = conversation(store.as_ref()).await;
    let first = enqueue(store.as_ref(), &id, "p").await;
    worker(&store, &ledger, &requests).drain().await;
    let review = other.list_reviews(&ReviewFilter::pending()).await.unwrap()[0].clone();
    other
        .decide_review(
            &review.id,
            &HumanDecision::Edit {
                arguments: json!({"content": "decided"}).as_object().unwrap().clone(),
            },
            "alice",
        )
        .await
        .unwrap();
    other.cancel_run(&first.id).await.unwrap();
    let second = enqueue(store.as_ref(), &id, "p").await;
    worker(&store, &ledger, &requests).drain().await;
    assert_eq!(*ledger.lock().unwrap(), ["call_1:\"decided\""]);
    assert_eq!(
        store
            .get_run(&second.id)
            .await
            .unwrap()
            .unwrap()
            .state
            .status,
        RunStatus::Done
    );
    assert!(
        other
            .list_reviews(&ReviewFilter::pending())
            .await
            .unwrap()
            .is_empty()
    );
}

/// A tool that interrupts again after an approval is asked about again: a new round,
/// a new review, never the old decision replayed. Each round is answered once.
async fn a_tool_that_asks_again_gets_a_new_review<S: Store + 'static>(
    store: Arc<S>,
    other: Arc<S>,
) {
    let ledger = Ledger::default();
    let id = conversation(store.as_ref()).await;
    let run = enqueue(store.as_ref(), &id, "p").await;
    let approvals = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let factory = {
        let (ledger, approvals) = (ledger.clone(), approvals.clone());
        move |_run: Run, state: ChainState| {
            let (ledger, approvals) = (ledger.clone(), approvals.clone());
            async move {
                let asked = state
                    .conversation
                    .messages
                    .iter()
                    .any(|m| !m.tool_calls.is_empty());
                let mut model = ScriptedModel::new(Format::OPENAI_CHAT);
                if !asked {
                    model = model.respond(ResponseScript::tool_call("call_1", "deploy", "{}"))?;
                }
                let model = model.respond(ResponseScript::text("deployed"))?;
                let deploy = Tool::builder("deploy")
                    .handler(move |_, ctx| {
                        let (ledger, approvals) = (ledger.clone(), approvals.clone());
                        async move {
                            // Two approvals needed: it asks again after the first.
                            let seen = if ctx.human_approved() {
                                approvals.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1
                            } else {
                                0
                            };
                            if seen < 2 {
                                return llmchain::tool::ToolOutput::interrupt(
                                    format!("Approval {} of 2, please.", seen + 1),
                                    json!({}),
                                );
                            }
                            ledger.lock().unwrap().push("deployed".into());
                            llmchain::tool::ToolOutput::text("deployed")
                        }
                    })
                    .build()?;
                Ok::<_, BoxError>((
                    LLMChain::from_state(Arc::new(model), state).with_tool(deploy),
                    Mode::while_needs_response(),
                ))
            }
        }
    };
    let worker = || {
        Worker::new(store.clone(), "w", factory.clone()).poll_interval(Duration::from_millis(20))
    };
    for round in 0..2u32 {
        worker().drain().await;
        assert_eq!(
            store.get_run(&run.id).await.unwrap().unwrap().state.status,
            RunStatus::Paused,
            "round {round}"
        );
        let inbox = other.list_reviews(&ReviewFilter::pending()).await.unwrap();
        assert_eq!(inbox.len(), 1, "round {round}");
        assert_eq!(inbox[0].round, round);
        assert_eq!(
            inbox[0].question.as_deref(),
            Some(format!("Approval {} of 2, please.", round + 1).as_str())
        );
        other
            .decide_review(&inbox[0].id, &HumanDecision::Approve, "ops")
            .await
            .unwrap();
        assert!(ledger.lock().unwrap().is_empty());
    }
    worker().drain().await;
    assert_eq!(*ledger.lock().unwrap(), ["deployed"]);
    assert_eq!(
        store.get_run(&run.id).await.unwrap().unwrap().state.status,
        RunStatus::Done
    );
    let all = other.list_reviews(&ReviewFilter::default()).await.unwrap();
    let rounds: Vec<(u32, ReviewStatus)> = all.iter().map(|r| (r.round, r.status)).collect();
    assert_eq!(
        rounds,
        [(0, ReviewStatus::Approved), (1, ReviewStatus::Approved)]
    );
}

/// Regenerating an answer drops the end of the conversation: its calls' statuses go and
/// their reviews are voided, kept for the record but answering nothing. The model calls
/// `call_1` again in the new answer: that call is asked about anew (the old approval does
/// not run it) and runs once more only when a person approves it again.
async fn truncating_voids_the_reviews_of_dropped_calls<S: Store + 'static>(
    store: Arc<S>,
    other: Arc<S>,
) {
    let ledger = Ledger::default();
    let requests = Requests::default();
    let id = conversation(store.as_ref()).await;
    enqueue(store.as_ref(), &id, "p").await;
    worker(&store, &ledger, &requests).drain().await;
    let first = other.list_reviews(&ReviewFilter::pending()).await.unwrap()[0].clone();
    other
        .decide_review(&first.id, &HumanDecision::Approve, "alice")
        .await
        .unwrap();
    worker(&store, &ledger, &requests).drain().await;
    assert_eq!(ledger.lock().unwrap().len(), 1);
    let removed = other
        .supersede_messages(llmchain_store::Writer::Conversation(&id), 1)
        .await
        .unwrap();
    assert_eq!(removed, 3, "the call, its result and the answer go");
    let stored = store.get_conversation(&id).await.unwrap().unwrap();
    assert_eq!(stored.conversation.messages.len(), 1);
    assert!(store.tool_statuses(&id).await.unwrap().is_empty());
    assert_eq!(
        store.get_review(&first.id).await.unwrap().unwrap().status,
        ReviewStatus::Voided
    );

    enqueue(store.as_ref(), &id, "p").await;
    worker(&store, &ledger, &requests).drain().await;
    assert_eq!(
        ledger.lock().unwrap().len(),
        1,
        "the old approval ran nothing"
    );
    let pending = other.list_reviews(&ReviewFilter::pending()).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_ne!(pending[0].id, first.id);
    assert_eq!(pending[0].call_id, first.call_id);
    let e = other
        .decide_review(&first.id, &HumanDecision::Approve, "alice")
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::ReviewNotPending { .. }), "{e}");
    other
        .decide_review(&pending[0].id, &HumanDecision::Approve, "bob")
        .await
        .unwrap();
    worker(&store, &ledger, &requests).drain().await;
    assert_eq!(ledger.lock().unwrap().len(), 2);
    let messages = store
        .get_conversation(&id)
        .await
        .unwrap()
        .unwrap()
        .conversation
        .messages;
    assert_eq!(messages.len(), 4);
}

async fn sqlite() -> (tempfile::TempDir, Arc<SqliteStore>, Arc<SqliteStore>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = SqliteStore::open(&path).await.unwrap();
    let other = SqliteStore::open(&path).await.unwrap();
    (dir, Arc::new(store), Arc::new(other))
}

async fn postgres(test: &str) -> Option<(Arc<PostgresStore>, Arc<PostgresStore>)> {
    let url = common::postgres_url(test)?;
    let (opts, _) = common::pg_schema(&url, "inbox").await;
    let store = PostgresStore::connect_options(opts.clone(), 4)
        .await
        .unwrap();
    let other = PostgresStore::connect_options(opts, 4).await.unwrap();
    Some((Arc::new(store), Arc::new(other)))
}

macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {
        mod on_sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let (_dir, store, other) = super::sqlite().await;
                    super::$name(store, other).await;
                }
            )*
        }
        mod on_postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    if let Some((store, other)) = super::postgres(stringify!($name)).await {
                        super::$name(store, other).await;
                    }
                }
            )*
        }
    };
}

both_backends!(
    a_paused_run_is_resumed_with_the_stored_edit,
    a_denied_call_is_stored_denied,
    cancelling_a_paused_run_cancels_its_reviews,
    workers_claim_only_their_profiles,
    concurrent_decisions_requeue_once,
    the_lease_is_kept_while_the_chain_is_built,
    a_run_that_cannot_start_is_failed_or_lost,
    a_tools_own_interrupt_waits_in_the_inbox,
    a_decision_outlives_its_run,
    a_tool_that_asks_again_gets_a_new_review,
    truncating_voids_the_reviews_of_dropped_calls,
);

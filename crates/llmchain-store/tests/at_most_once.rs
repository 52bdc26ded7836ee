//! At-most-once at the seam between the chain and the store: the reproductions R1–R5 of
//! issue 17, each against SQLite and (with `LLMCHAIN_TEST_POSTGRES_URL`) PostgreSQL.
//!
//! The tool in every test is `charge`, which is not idempotent: it appends the call id
//! to a ledger each time its body runs. No test may see a call id twice in the ledger,
//! and every conversation must end well-formed (each call answered once, in order,
//! nothing after the final answer).

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use llmchain::chain::{
    ChainError, ChainState, ChatModel, ConversationSink, LLMChain, Mode, ModelStream, RunOutcome,
    ScriptedModel, SinkError, SinkErrorKind, SinkFuture,
};
use llmchain::conversation::Conversation;
use llmchain::message::{ExecutionStatus, Message, Role};
use llmchain::provider::Format;
use llmchain::provider::render::ResponseScript;
use llmchain::tool::Tool;
use llmchain_store::sink::{StoreSink, load_chain_state};
use llmchain_store::worker::BoxError;
use llmchain_store::{
    Change, NewConversation, Opening, PostgresStore, Run, RunOptions, RunState, RunStatus,
    SqliteStore, Store, StoreError, StoredConversation, Worker, Writer,
};
use tokio::sync::Notify;

type Ledger = Arc<Mutex<Vec<String>>>;

/// The non-idempotent tool: records each execution.
fn charge(ledger: &Ledger) -> Tool {
    let ledger = ledger.clone();
    Tool::builder("charge")
        .handler(move |_, ctx| {
            let ledger = ledger.clone();
            async move {
                ledger.lock().unwrap().push(ctx.tool_call_id().to_owned());
                "charged"
            }
        })
        .build()
        .unwrap()
}

/// A model that asks for `charge` once, then answers.
fn model() -> ScriptedModel {
    ScriptedModel::new(Format::OPENAI_CHAT)
        .respond(ResponseScript::tool_call("call_1", "charge", "{}"))
        .unwrap()
        .respond(ResponseScript::text("done"))
        .unwrap()
}

/// A model whose calls wait for `gate` before they stream: a slow model call.
struct Gated {
    inner: ScriptedModel,
    gate: Arc<Notify>,
}

impl ChatModel for Gated {
    fn model_name(&self) -> &str {
        "gated"
    }
    fn provider_name(&self) -> &str {
        "test"
    }
    fn stream<'a>(&'a self, conversation: &'a Conversation) -> ModelStream<'a> {
        let gate = self.gate.clone();
        Box::pin(
            futures_util::stream::once(async move {
                gate.notified().await;
                self.inner.stream(conversation)
            })
            .flatten(),
        )
    }
}

async fn conversation<S: Store>(store: &S) -> String {
    let mut c = Conversation::new();
    c.messages.push(Message::user("charge me"));
    store
        .create_conversation(NewConversation::from_conversation(c))
        .await
        .unwrap()
}

async fn roles<S: Store>(store: &S, id: &str) -> Vec<Role> {
    let c = store.get_conversation(id).await.unwrap().unwrap();
    c.conversation.messages.iter().map(|m| m.role).collect()
}

const WELL_FORMED: [Role; 4] = [Role::User, Role::Assistant, Role::Tool, Role::Assistant];

async fn chain_for<S: Store + 'static>(
    store: &Arc<S>,
    run: &Run,
    model: Arc<dyn ChatModel>,
    ledger: &Ledger,
) -> LLMChain {
    let state = load_chain_state(store.as_ref(), &run.conversation_id, Some(&run.state))
        .await
        .unwrap()
        .unwrap();
    let sink = StoreSink::new(store.clone(), run.conversation_id.clone())
        .with_lease(run.lease().unwrap(), "while_needs_response");
    LLMChain::from_state(model, state)
        .with_tool(charge(ledger))
        .with_sink(Arc::new(sink))
}

/// R1: worker A's lease runs out while its model call is in flight; B claims the run and
/// finishes it. A's assistant message must not be appended, nor its call run: A stops
/// with a `LeaseLost` it can match.
async fn r1_lease_expires_during_a_model_call<S: Store + 'static>(store: Arc<S>) {
    let id = conversation(store.as_ref()).await;
    store.create_run(&id, &RunState::default()).await.unwrap();
    let ledger = Ledger::default();
    let a = store
        .claim_run("A", Duration::from_millis(200))
        .await
        .unwrap()
        .unwrap();
    let gate = Arc::new(Notify::new());
    let slow = Arc::new(Gated {
        inner: model(),
        gate: gate.clone(),
    });
    let mut chain_a = chain_for(&store, &a, slow, &ledger).await;
    let a_task = tokio::spawn(async move { chain_a.run(Mode::while_needs_response()).await });

    tokio::time::sleep(Duration::from_millis(300)).await;
    let b = store
        .claim_run("B", Duration::from_secs(30))
        .await
        .unwrap()
        .expect("the expired run is claimed again");
    assert_eq!((b.id.as_str(), b.epoch), (a.id.as_str(), a.epoch + 1));
    let mut chain_b = chain_for(&store, &b, Arc::new(model()), &ledger).await;
    assert_eq!(
        chain_b.run(Mode::while_needs_response()).await.unwrap(),
        RunOutcome::Done
    );
    let mut done = b.state.clone();
    done.status = RunStatus::Done;
    store
        .complete_run(&b.lease().unwrap(), &done)
        .await
        .unwrap();

    gate.notify_one(); // A's model call comes back, late.
    let err = a_task.await.unwrap().unwrap_err();
    let ChainError::Persist(e) = &err else {
        panic!("{err:?}");
    };
    assert_eq!(e.kind(), SinkErrorKind::LeaseLost, "{e}");
    assert!(matches!(
        e.downcast_source::<StoreError>(),
        Some(StoreError::LeaseLost { .. })
    ));
    assert_eq!(*ledger.lock().unwrap(), ["call_1"], "charged once");
    assert_eq!(roles(store.as_ref(), &id).await, WELL_FORMED);
    assert_eq!(
        store.get_run(&a.id).await.unwrap().unwrap().state.status,
        RunStatus::Done
    );
}

/// A sink that fails the first `executing` write, as a terminated backend did.
struct FailingStart<S> {
    inner: StoreSink<S>,
    failed: Mutex<bool>,
}

impl<S: Store + 'static> ConversationSink for FailingStart<S> {
    fn append_message<'a>(&'a self, position: usize, message: &'a Message) -> SinkFuture<'a> {
        self.inner.append_message(position, message)
    }
    fn replace_message<'a>(&'a self, position: usize, message: &'a Message) -> SinkFuture<'a> {
        self.inner.replace_message(position, message)
    }
    fn set_tool_status<'a>(&'a self, call_id: &'a str, status: ExecutionStatus) -> SinkFuture<'a> {
        let mut failed = self.failed.lock().unwrap();
        if status == ExecutionStatus::Executing && !*failed {
            *failed = true;
            return Box::pin(async {
                Err(SinkError::new(
                    SinkErrorKind::Other,
                    "terminating connection due to administrator command",
                ))
            });
        }
        self.inner.set_tool_status(call_id, status)
    }
    fn save_state<'a>(&'a self, state: &'a ChainState) -> SinkFuture<'a> {
        self.inner.save_state(state)
    }
}

/// R2: the `executing` write fails. The body must not run; the call stays `identified`,
/// and the next attempt runs it exactly once.
async fn r2_no_body_without_a_stored_start<S: Store + 'static>(store: Arc<S>) {
    let id = conversation(store.as_ref()).await;
    store.create_run(&id, &RunState::default()).await.unwrap();
    let ledger = Ledger::default();
    let run = store
        .claim_run("A", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    let state = load_chain_state(store.as_ref(), &id, Some(&run.state))
        .await
        .unwrap()
        .unwrap();
    let sink = FailingStart {
        inner: StoreSink::new(store.clone(), id.clone())
            .with_lease(run.lease().unwrap(), "while_needs_response"),
        failed: Mutex::new(false),
    };
    let mut chain = LLMChain::from_state(Arc::new(model()), state)
        .with_tool(charge(&ledger))
        .with_sink(Arc::new(sink));
    let err = chain.run(Mode::while_needs_response()).await.unwrap_err();
    assert!(
        matches!(&err, ChainError::Persist(e) if e.kind() == SinkErrorKind::Other),
        "{err:?}"
    );
    assert!(ledger.lock().unwrap().is_empty(), "the body did not run");
    let stored = store.tool_statuses(&id).await.unwrap();
    assert_eq!(stored.get("call_1"), None, "never marked executing");
    let status = store
        .fail_run(&run.lease().unwrap(), &err.to_string(), true)
        .await
        .unwrap();
    assert_eq!(status, RunStatus::Pending);

    // The retry (its back-off skipped) runs the call once and finishes.
    sqlx_run_now(store.as_ref(), &run.id).await;
    let again = store
        .claim_run("B", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.epoch, run.epoch + 1);
    let scripted = ScriptedModel::new(Format::OPENAI_CHAT)
        .respond(ResponseScript::text("done"))
        .unwrap();
    let mut chain = chain_for(&store, &again, Arc::new(scripted), &ledger).await;
    assert_eq!(
        chain.run(Mode::while_needs_response()).await.unwrap(),
        RunOutcome::Done
    );
    assert_eq!(*ledger.lock().unwrap(), ["call_1"]);
    assert_eq!(roles(store.as_ref(), &id).await, WELL_FORMED);
}

/// Makes a pending run due now (skips its back-off), through a cancel and retry (which
/// also gives it fresh attempts): the public API, no SQL.
async fn sqlx_run_now<S: Store>(store: &S, run: &str) {
    store.cancel_run(run).await.unwrap();
    store.retry_run(run).await.unwrap();
}

/// R3: a second open run on one conversation is refused by the database.
async fn r3_one_open_run_per_conversation<S: Store + 'static>(store: Arc<S>) {
    let id = conversation(store.as_ref()).await;
    let first = store.create_run(&id, &RunState::default()).await.unwrap();
    let err = store
        .create_run(&id, &RunState::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::RunAlreadyOpen { run, .. } if *run == first.id),
        "{err}"
    );
    assert!(err.to_string().contains("cancel it first"), "{err}");
    // Claimed, paused: still open.
    let claimed = store
        .claim_run("A", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    let mut paused = claimed.state.clone();
    paused.status = RunStatus::Paused;
    store
        .complete_run(&claimed.lease().unwrap(), &paused)
        .await
        .unwrap();
    assert!(matches!(
        store.create_run(&id, &RunState::default()).await,
        Err(StoreError::RunAlreadyOpen { .. })
    ));
    // Finished: a new run may start; retrying the old one is then refused.
    store.cancel_run(&first.id).await.unwrap();
    let second = store.create_run(&id, &RunState::default()).await.unwrap();
    // Refused, naming the open run (looked up after the refused write rolled back).
    assert!(matches!(
        store.retry_run(&first.id).await,
        Err(StoreError::RunAlreadyOpen { run, status, .. }) if run == second.id && status == "pending"
    ));
    assert_eq!(store.list_runs(&id).await.unwrap().len(), 2);
    assert_eq!(
        store
            .get_run(&second.id)
            .await
            .unwrap()
            .unwrap()
            .state
            .status,
        RunStatus::Pending
    );
    // Errors that name what is wrong.
    assert!(matches!(
        store.create_run("no-such", &RunState::default()).await,
        Err(StoreError::ConversationNotFound(_))
    ));
    assert!(matches!(
        store.cancel_run("no-such").await,
        Err(StoreError::RunNotFound(_))
    ));
}

/// R4: a run that always fails is discarded, with its last error, not claimed forever.
/// A run that yielded (ended `pending`, more to do) is queued again from the time it
/// ended, on both backends (one statement ends a run for both: SQLite kept the run's old
/// time), and its state is the one it ended with.
async fn a_yielded_run_is_queued_from_when_it_ended<S: Store + 'static>(store: Arc<S>) {
    let id = conversation(store.as_ref()).await;
    let run = store
        .enqueue_run(&id, &RunState::default(), &RunOptions::default())
        .await
        .unwrap();
    let claimed = store
        .claim_run("w", Duration::from_secs(30))
        .await
        .unwrap()
        .expect("the queued run");
    assert_eq!(claimed.id, run.id);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let mut yielded = claimed.state.clone();
    yielded.status = RunStatus::Pending;
    yielded.mode = "yielded".into();
    store
        .complete_run(&claimed.lease().unwrap(), &yielded)
        .await
        .unwrap();
    let stored = store.get_run(&run.id).await.unwrap().unwrap();
    assert_eq!(stored.state.status, RunStatus::Pending);
    assert_eq!(stored.state.mode, "yielded");
    assert!(stored.lease().is_none());
    // Within a second: PostgreSQL schedules by its own clock.
    assert!(
        stored.run_at >= before - 1000 && stored.run_at > run.run_at,
        "run_at {} (enqueued at {}, ended at {before})",
        stored.run_at,
        run.run_at
    );
}

async fn r4_failing_runs_are_discarded<S: Store + 'static>(store: Arc<S>) {
    // No messages: the chain cannot run it, and retrying will not help.
    let empty = store
        .create_conversation(NewConversation::default())
        .await
        .unwrap();
    let never = store
        .enqueue_run(
            &empty,
            &RunState::default(),
            &RunOptions {
                max_attempts: 3,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    // A factory that fails: retried with back-off until its attempts are used up.
    let id = conversation(store.as_ref()).await;
    let flaky = store
        .enqueue_run(
            &id,
            &RunState::default(),
            &RunOptions {
                max_attempts: 2,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let factory = |run: Run, state: ChainState| async move {
        if !state.conversation.messages.is_empty() {
            return Err::<(LLMChain, Mode), BoxError>(
                format!("no provider configured for run {}", run.id).into(),
            );
        }
        Ok((
            LLMChain::from_state(Arc::new(model()), state),
            Mode::while_needs_response(),
        ))
    };
    let worker = Worker::new(store.clone(), "w", factory).poll_interval(Duration::from_millis(20));
    tokio::time::timeout(Duration::from_secs(20), worker.drain())
        .await
        .expect("the queue drains");
    let never = store.get_run(&never.id).await.unwrap().unwrap();
    assert_eq!(never.state.status, RunStatus::Discarded);
    assert_eq!(never.attempt, 1, "not retried: it cannot pass");
    assert!(
        never
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("without messages")),
        "{:?}",
        never.last_error
    );
    let flaky = store.get_run(&flaky.id).await.unwrap().unwrap();
    assert_eq!(flaky.state.status, RunStatus::Discarded);
    assert_eq!(flaky.attempt, 2);
    assert!(
        flaky
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("no provider configured")),
        "{:?}",
        flaky.last_error
    );
    let c = worker.stats().snapshot();
    assert_eq!(
        (c.claimed, c.done, c.retried, c.discarded, c.lease_lost),
        (3, 0, 1, 2, 0)
    );
    // Retried by hand: fresh attempts.
    let again = store.retry_run(&flaky.id).await.unwrap();
    assert_eq!((again.state.status, again.attempt), (RunStatus::Pending, 0));
}

/// R5: two interactive processes on one conversation: the second is refused while the
/// first holds the lease, and takes over once it expired.
async fn r5_one_interactive_process_per_conversation<S: Store + 'static>(store: Arc<S>) {
    let id = conversation(store.as_ref()).await;
    let state = RunState::default();
    let (a, b) = tokio::join!(
        store.claim_conversation(&id, "cli-a", Duration::from_millis(1000), &state),
        store.claim_conversation(&id, "cli-b", Duration::from_millis(1000), &state),
    );
    let (won, lost) = match (a, b) {
        (Ok(run), Err(e)) | (Err(e), Ok(run)) => (run, e),
        other => panic!("exactly one must win: {other:?}"),
    };
    assert!(
        matches!(&lost, StoreError::RunBusy { run, .. } if *run == won.id),
        "{lost}"
    );
    assert!(lost.to_string().contains("is being run by"), "{lost}");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let taken = store
        .claim_conversation(&id, "cli-c", Duration::from_secs(30), &state)
        .await
        .unwrap();
    assert_eq!(
        (taken.id.as_str(), taken.epoch),
        (won.id.as_str(), won.epoch + 1)
    );
    let late = store
        .append_messages(
            Writer::Lease(&won.lease().unwrap()),
            &[Message::user("late")],
        )
        .await
        .unwrap_err();
    assert!(matches!(late, StoreError::LeaseLost { .. }), "{late}");
    assert_eq!(roles(store.as_ref(), &id).await, [Role::User]);
    assert!(matches!(
        store
            .claim_conversation("no-such", "cli", Duration::from_secs(1), &state)
            .await,
        Err(StoreError::ConversationNotFound(_))
    ));
}

/// R5, as a chat server opens a turn (`claim_and_read`): two first messages to a new
/// chat create it once and only one of them runs it; the winner reads the conversation
/// under its lease; a later turn reads what the first wrote; a chat that does not exist
/// is not created without `create`.
async fn r5_claim_and_read_opens_a_turn_once<S: Store + 'static>(store: Arc<S>) {
    let state = RunState::default();
    let lease = Duration::from_millis(1000);
    let new = || Some(NewConversation::default().with_title("first"));
    let (a, b) = tokio::join!(
        store.claim_and_read("chat-1", new(), "srv-a", lease, &state, None),
        store.claim_and_read("chat-1", new(), "srv-b", lease, &state, None),
    );
    let ((run, stored), lost) = match (a, b) {
        (Ok(won), Err(e)) | (Err(e), Ok(won)) => (won, e),
        other => panic!("exactly one must win: {other:?}"),
    };
    assert!(
        matches!(&lost, StoreError::RunBusy { run: r, .. } if *r == run.id),
        "{lost}"
    );
    assert_eq!(stored.summary.id, "chat-1");
    assert_eq!(stored.summary.title.as_deref(), Some("first"));
    assert!(stored.conversation.messages.is_empty());
    assert_eq!(run.conversation_id, "chat-1");
    let held = run.lease().unwrap();
    store
        .append_messages(Writer::Lease(&held), &[Message::user("hello")])
        .await
        .unwrap();
    let done = RunState {
        status: RunStatus::Done,
        ..run.state.clone()
    };
    store.complete_run(&held, &done).await.unwrap();
    // An opening that refuses the turn undoes the whole: nothing appended, no run
    // claimed (the next claim finds the chat free).
    let refuse: Opening = Box::new(|_: &StoredConversation| {
        Err(StoreError::ConversationFull {
            conversation: "chat-1".into(),
            max: 1,
        })
    });
    assert!(matches!(
        store
            .claim_and_read("chat-1", None, "srv-a", lease, &state, Some(refuse))
            .await,
        Err(StoreError::ConversationFull { .. })
    ));
    // The next turn: `create` given again changes nothing of the chat that exists, and
    // the opening's message is appended in the same transaction, after what it read.
    let seen = Arc::new(Mutex::new(0));
    let opening: Opening = Box::new({
        let seen = seen.clone();
        move |stored: &StoredConversation| {
            *seen.lock().unwrap() = stored.conversation.messages.len();
            Ok(vec![Message::user("again")])
        }
    });
    let (next, again) = store
        .claim_and_read(
            "chat-1",
            Some(NewConversation::default().with_title("other")),
            "srv-b",
            Duration::from_secs(30),
            &state,
            Some(opening),
        )
        .await
        .unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        1,
        "the opening saw the stored message"
    );
    assert_eq!(again.summary.title.as_deref(), Some("first"));
    assert_eq!(
        roles(store.as_ref(), "chat-1").await,
        [Role::User, Role::User]
    );
    assert_eq!(again.conversation.messages.len(), 2);
    assert_eq!(again.summary.message_count, 2);
    assert_eq!(
        again.conversation.messages[1].text().as_deref(),
        Some("again")
    );
    assert_ne!(next.id, run.id, "a completed run is not claimed again");
    // The turn goes on from what it read: its next append is number 2.
    let lease_b = next.lease().unwrap();
    let seq = store
        .append_messages(Writer::Lease(&lease_b), &[Message::assistant("ok")])
        .await
        .unwrap();
    assert_eq!(seq, 2);
    assert!(matches!(
        store
            .claim_and_read("no-such", None, "srv", lease, &state, None)
            .await,
        Err(StoreError::ConversationNotFound(_))
    ));
    assert!(store.get_conversation("no-such").await.unwrap().is_none());
}

/// `write_leased`: several changes in one transaction under the lease, the first
/// append's number answered; a stale lease changes nothing of them.
async fn write_leased_writes_all_or_nothing<S: Store + 'static>(store: Arc<S>) {
    let id = conversation(store.as_ref()).await;
    let state = RunState::default();
    let run = store
        .claim_conversation(&id, "w1", Duration::from_millis(300), &state)
        .await
        .unwrap();
    let lease = run.lease().unwrap();
    let saved = RunState {
        failure_count: 3,
        ..state.clone()
    };
    let answer = [Message::assistant("one"), Message::assistant("two")];
    let first = store
        .write_leased(
            &lease,
            &[
                Change::Status("c1", ExecutionStatus::Completed),
                Change::Append(&[]),
                Change::Append(&answer),
                Change::RunState(&saved),
            ],
        )
        .await
        .unwrap();
    assert_eq!(first, 1, "the first append's number");
    assert_eq!(
        roles(store.as_ref(), &id).await,
        [Role::User, Role::Assistant, Role::Assistant]
    );
    let statuses = store.tool_statuses(&id).await.unwrap();
    assert_eq!(statuses.get("c1"), Some(&ExecutionStatus::Completed));
    let stored = store.get_run(&run.id).await.unwrap().unwrap();
    assert_eq!(stored.state.failure_count, 3);
    assert_eq!(
        store
            .write_leased(&lease, &[Change::Status("c1", ExecutionStatus::Failed)])
            .await
            .unwrap(),
        0
    );
    // Taken over: the old lease writes nothing.
    tokio::time::sleep(Duration::from_millis(350)).await;
    store
        .claim_conversation(&id, "w2", Duration::from_secs(30), &state)
        .await
        .unwrap();
    let late = store
        .write_leased(
            &lease,
            &[
                Change::Status("c1", ExecutionStatus::Completed),
                Change::Append(&answer),
                Change::RunState(&state),
            ],
        )
        .await
        .unwrap_err();
    assert!(matches!(late, StoreError::LeaseLost { .. }), "{late}");
    assert_eq!(roles(store.as_ref(), &id).await.len(), 3);
    let statuses = store.tool_statuses(&id).await.unwrap();
    assert_eq!(statuses.get("c1"), Some(&ExecutionStatus::Failed));
    let stored = store.get_run(&run.id).await.unwrap().unwrap();
    assert_eq!(stored.state.failure_count, 3);
}

/// A claimed run cancelled from outside: its worker's heartbeat stops the chain, and
/// nothing more is written.
async fn cancelling_a_claimed_run_stops_its_worker<S: Store + 'static>(store: Arc<S>) {
    let id = conversation(store.as_ref()).await;
    let run = store.create_run(&id, &RunState::default()).await.unwrap();
    let ledger = Ledger::default();
    let gate = Arc::new(Notify::new());
    let (l, g) = (ledger.clone(), gate.clone());
    let factory = move |_run: Run, state: ChainState| {
        let (ledger, gate) = (l.clone(), g.clone());
        async move {
            let model = Arc::new(Gated {
                inner: model(),
                gate,
            });
            let chain = LLMChain::from_state(model, state).with_tool(charge(&ledger));
            Ok::<_, BoxError>((chain, Mode::while_needs_response()))
        }
    };
    let worker = Worker::new(store.clone(), "w", factory)
        .lease(Duration::from_millis(300))
        .poll_interval(Duration::from_millis(20));
    let stats = worker.stats();
    let shutdown = llmchain::tool::CancellationToken::new();
    let running = {
        let shutdown = shutdown.clone();
        tokio::spawn(async move { worker.run(shutdown).await })
    };
    while stats.snapshot().claimed == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    store.cancel_run(&run.id).await.unwrap();
    // The heartbeat (every 100 ms) sees it and cancels the chain mid-model-call.
    tokio::time::timeout(Duration::from_secs(10), async {
        while stats.snapshot().lease_lost == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the worker notices the cancellation");
    shutdown.cancel();
    running.await.unwrap();
    gate.notify_waiters();
    assert!(ledger.lock().unwrap().is_empty());
    assert_eq!(roles(store.as_ref(), &id).await, [Role::User]);
    let run = store.get_run(&run.id).await.unwrap().unwrap();
    assert_eq!(run.state.status, RunStatus::Cancelled);
}

/// PostgreSQL: an idle worker is woken by the `llmchain_runs` notification of a new
/// run, long before its poll interval (60 s here) would find it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notify_wakes_an_idle_worker_on_postgres() {
    let Some(store) = postgres("notify_wakes_an_idle_worker_on_postgres").await else {
        return;
    };
    let ledger = Ledger::default();
    let l = ledger.clone();
    let factory = move |_run: Run, state: ChainState| {
        let ledger = l.clone();
        async move {
            let chain = LLMChain::from_state(Arc::new(model()), state).with_tool(charge(&ledger));
            Ok::<_, BoxError>((chain, Mode::while_needs_response()))
        }
    };
    let worker = Worker::new(store.clone(), "idle", factory).poll_interval(Duration::from_secs(60));
    let stats = worker.stats();
    let shutdown = llmchain::tool::CancellationToken::new();
    let running = {
        let shutdown = shutdown.clone();
        tokio::spawn(async move { worker.run(shutdown).await })
    };
    // Let it find the queue empty and start waiting.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let id = conversation(store.as_ref()).await;
    let run = store.create_run(&id, &RunState::default()).await.unwrap();
    let woke = tokio::time::timeout(Duration::from_secs(15), async {
        while stats.snapshot().done == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    shutdown.cancel();
    running.await.unwrap();
    assert!(woke.is_ok(), "the notification woke the worker");
    assert_eq!(
        store.get_run(&run.id).await.unwrap().unwrap().state.status,
        RunStatus::Done
    );
    assert_eq!(roles(store.as_ref(), &id).await, WELL_FORMED);
}

async fn sqlite() -> (tempfile::TempDir, Arc<SqliteStore>) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("store.db"))
        .await
        .unwrap();
    (dir, Arc::new(store))
}

async fn postgres(test: &str) -> Option<Arc<PostgresStore>> {
    let url = common::postgres_url(test)?;
    let (opts, _) = common::pg_schema(&url, "amo").await;
    Some(Arc::new(
        PostgresStore::connect_options(opts, 4).await.unwrap(),
    ))
}

macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {
        mod on_sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let (_dir, store) = super::sqlite().await;
                    super::$name(store).await;
                }
            )*
        }
        mod on_postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    if let Some(store) = super::postgres(stringify!($name)).await {
                        super::$name(store).await;
                    }
                }
            )*
        }
    };
}

both_backends!(
    r1_lease_expires_during_a_model_call,
    r2_no_body_without_a_stored_start,
    r3_one_open_run_per_conversation,
    r4_failing_runs_are_discarded,
    a_yielded_run_is_queued_from_when_it_ended,
    r5_one_interactive_process_per_conversation,
    r5_claim_and_read_opens_a_turn_once,
    write_leased_writes_all_or_nothing,
    cancelling_a_claimed_run_stops_its_worker,
);

//! Shared helpers for the integration tests: a conformance suite run against every
//! backend, and PostgreSQL test isolation (one schema per test).
#![allow(dead_code)]

use std::str::FromStr;
use std::time::Duration;

use llmchain::conversation::{Conversation, ToolDefinition};
use llmchain::message::{ExecutionStatus, Message, ToolCall, ToolResult};
use llmchain_store::{
    Lease, NewConversation, PostgresStore, RunState, RunStatus, Store, StoreError, Writer,
};
use serde_json::json;
use sqlx::postgres::PgConnectOptions;

/// The PostgreSQL URL, or `None` after printing the visible skip message.
pub(crate) fn postgres_url(test: &str) -> Option<String> {
    match std::env::var("LLMCHAIN_TEST_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            eprintln!(
                "{test}: skipped: set LLMCHAIN_TEST_POSTGRES_URL to run the PostgreSQL tests"
            );
            None
        }
    }
}

/// Creates a fresh schema and returns connect options whose `search_path` is that schema.
pub(crate) async fn pg_schema(url: &str, prefix: &str) -> (PgConnectOptions, String) {
    let schema = format!("{prefix}_{}", fastrand::u64(..));
    let admin = PostgresStore::connect_with(url, 1).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(admin.pool())
        .await
        .unwrap();
    admin.pool().close().await;
    let opts = PgConnectOptions::from_str(url)
        .unwrap()
        .options([("search_path", schema.as_str())]);
    (opts, schema)
}

pub(crate) fn sample_conversation() -> Conversation {
    let mut c = Conversation::new();
    c.system = Some("Be brief.".into());
    c.tools.push(ToolDefinition {
        name: "get_weather".into(),
        description: "Weather by city".into(),
        ..Default::default()
    });
    c.parallel_tool_calls = Some(true);
    c
}

pub(crate) fn call(id: &str, name: &str) -> ToolCall {
    ToolCall::function(id, name, json!({"city": "Paris", "zeta": 1, "alpha": 2})).unwrap()
}

/// Everything a backend must do; run against SQLite (file and memory) and PostgreSQL.
pub(crate) async fn conformance<S: Store>(store: &S) {
    // Create with a header and initial messages.
    let mut conv = sample_conversation();
    conv.messages.push(Message::user("What's the weather?"));
    let id = store
        .create_conversation(NewConversation::from_conversation(conv.clone()).with_title("weather"))
        .await
        .unwrap();
    let err = store
        .create_conversation(NewConversation::default().with_id(id.clone()))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::ConversationExists(_)), "{err}");

    // Search: the title and the stored messages, ignoring ASCII case; LIKE's wildcards
    // and the JSON escaping of quotes are taken care of.
    let found = |v: Vec<llmchain_store::ConversationSummary>| -> Vec<String> {
        v.into_iter().map(|s| s.id).collect()
    };
    assert_eq!(
        found(store.search_conversations("WEATHER", 10).await.unwrap()),
        std::slice::from_ref(&id)
    );
    assert_eq!(
        found(store.search_conversations("what's", 10).await.unwrap()),
        std::slice::from_ref(&id)
    );
    for absent in ["w_ather?", "%", "100%", "a\\b", "\"x\"", "nothing here"] {
        assert!(
            store
                .search_conversations(absent, 10)
                .await
                .unwrap()
                .is_empty(),
            "{absent}"
        );
    }
    let quoted = store
        .create_conversation(NewConversation::from_conversation({
            let mut c = llmchain::conversation::Conversation::new();
            c.messages
                .push(Message::user("say \"hi\" 100% of_the time"));
            c
        }))
        .await
        .unwrap();
    for text in ["\"hi\"", "100%", "of_the", "SAY"] {
        assert_eq!(
            found(store.search_conversations(text, 10).await.unwrap()),
            std::slice::from_ref(&quoted),
            "{text}"
        );
    }
    assert!(store.delete_conversation(&quoted).await.unwrap());

    // Appends are numbered contiguously.
    let mut assistant = Message::assistant_with_calls(
        "Checking.",
        vec![
            call("call_1", "get_weather"),
            call("call_2", "send_mail"),
            call("call_3", "read"),
        ],
    );
    assistant
        .metadata
        .insert("usage".into(), json!({"input_tokens": 3}));
    assert_eq!(store.append_message(&id, &assistant).await.unwrap(), 1);
    store
        .set_tool_status(Writer::from(&id), "call_1", ExecutionStatus::Executing)
        .await
        .unwrap();
    store
        .set_tool_status(Writer::from(&id), "call_1", ExecutionStatus::Completed)
        .await
        .unwrap();
    store
        .set_tool_status(Writer::from(&id), "call_2", ExecutionStatus::Executing)
        .await
        .unwrap();
    store
        .set_tool_status(Writer::from(&id), "call_3", ExecutionStatus::Executing)
        .await
        .unwrap();
    let result = ToolResult::text("call_1", "18C")
        .with_name("get_weather")
        .with_processed_content(json!({"temp_c": 18}));
    assert_eq!(
        store
            .append_messages(Writer::from(&id), &[Message::tool(vec![result.clone()])])
            .await
            .unwrap(),
        2
    );
    let missing = store
        .append_message("nope", &Message::user("x"))
        .await
        .unwrap_err();
    assert!(
        matches!(missing, StoreError::ConversationNotFound(_)),
        "{missing}"
    );

    // Load: header, messages in order (exact storage-format JSON), statuses applied.
    let loaded = store.get_conversation(&id).await.unwrap().unwrap();
    assert_eq!(loaded.summary.title.as_deref(), Some("weather"));
    assert_eq!(loaded.summary.message_count, 3);
    let c = &loaded.conversation;
    assert_eq!(c.system.as_deref(), Some("Be brief."));
    assert_eq!(c.tools, conv.tools);
    assert_eq!(c.parallel_tool_calls, Some(true));
    assert_eq!(c.messages.len(), 3);
    assert_eq!(c.messages[0], conv.messages[0]);
    let calls = &c.messages[1].tool_calls;
    assert_eq!(calls[0].execution_status(), "completed");
    assert_eq!(calls[1].execution_status(), "executing");
    let mut expected = assistant.clone();
    expected.tool_calls[0].set_execution_status("completed");
    expected.tool_calls[1].set_execution_status("executing");
    expected.tool_calls[2].set_execution_status("executing");
    assert_eq!(
        serde_json::to_string(&c.messages[1]).unwrap(),
        serde_json::to_string(&expected).unwrap(),
        "storage format round trip keeps key order"
    );
    assert_eq!(c.messages[2].tool_results[0], result);
    assert!(store.get_conversation("nope").await.unwrap().is_none());

    // Listing.
    let list = store.list_conversations(100).await.unwrap();
    assert!(list.iter().any(|s| s.id == id && s.message_count == 3));

    // Header update keeps messages.
    let mut header = sample_conversation();
    header.system = Some("Be terse.".into());
    store.update_header(&id, &header).await.unwrap();
    let loaded = store.get_conversation(&id).await.unwrap().unwrap();
    assert_eq!(loaded.conversation.system.as_deref(), Some("Be terse."));
    assert_eq!(loaded.conversation.messages.len(), 3);

    // Recovery: call_2 (send_mail, not idempotent) gets an unknown-outcome error, call_3
    // (read, idempotent) is to be re-run; a second recovery finds nothing new.
    let idem = |name: &str| name == "read";
    let rec = store.recover(&id, &idem).await.unwrap();
    assert_eq!(rec.unknown_outcome.len(), 1);
    assert_eq!(rec.unknown_outcome[0].tool_call_id, "call_2");
    assert!(rec.unknown_outcome[0].is_error());
    assert!(rec.unknown_outcome[0].content_text().contains("is unknown"));
    assert_eq!(rec.rerun.len(), 1);
    assert_eq!(rec.rerun[0].call_id.as_deref(), Some("call_3"));
    assert!(rec.pending.is_empty());
    let statuses = store.tool_statuses(&id).await.unwrap();
    assert_eq!(statuses["call_2"], ExecutionStatus::Failed);
    assert_eq!(statuses["call_3"], ExecutionStatus::Identified);
    let loaded = store.get_conversation(&id).await.unwrap().unwrap();
    assert_eq!(loaded.conversation.messages.len(), 4);
    assert_eq!(
        loaded.conversation.messages[3].tool_results[0].tool_call_id,
        "call_2"
    );
    let again = store.recover(&id, &idem).await.unwrap();
    assert!(again.unknown_outcome.is_empty());
    assert_eq!(again.pending.len(), 1, "call_3 now waits to run");

    // Runs: claim, exclusivity, fencing, completion, expiry, pause/resume.
    let state = RunState {
        mode: "while_needs_response".into(),
        pending_interrupts: vec![json!({"call_id": "call_9"})],
        ..Default::default()
    };
    let run = store.create_run(&id, &state).await.unwrap();
    assert_eq!(run.state.status, RunStatus::Pending);
    assert_eq!(run.state.pending_interrupts, state.pending_interrupts);
    let claimed = store
        .claim_run("w1", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claimed.id, run.id);
    assert_eq!(claimed.state.status, RunStatus::Running);
    assert_eq!(claimed.lease_owner.as_deref(), Some("w1"));
    assert!(
        store
            .claim_run("w2", Duration::from_secs(30))
            .await
            .unwrap()
            .is_none()
    );
    let l1 = claimed.lease().unwrap();
    assert_eq!((claimed.epoch, claimed.attempt), (1, 1));
    let w2 = Lease {
        worker_id: "w2".into(),
        ..l1.clone()
    };
    let lost = store
        .renew_lease(&w2, Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(matches!(lost, StoreError::LeaseLost { .. }), "{lost}");
    store
        .renew_lease(&l1, Duration::from_secs(30))
        .await
        .unwrap();
    let mut progressed = claimed.state.clone();
    progressed.failure_count = 2;
    progressed.extra.insert("custom".into(), json!(["kept"]));
    store.update_run(&l1, &progressed).await.unwrap();
    store
        .set_tool_status(Writer::Lease(&l1), "call_3", ExecutionStatus::Executing)
        .await
        .unwrap();
    let fenced = store
        .set_tool_status(Writer::Lease(&w2), "call_3", ExecutionStatus::Completed)
        .await
        .unwrap_err();
    assert!(matches!(fenced, StoreError::LeaseLost { .. }));
    let got = store.get_run(&run.id).await.unwrap().unwrap();
    assert_eq!(got.state.failure_count, 2);
    assert_eq!(got.state.extra["custom"], json!(["kept"]));
    progressed.status = RunStatus::Paused;
    store.complete_run(&l1, &progressed).await.unwrap();
    assert!(
        store
            .claim_run("w2", Duration::from_secs(30))
            .await
            .unwrap()
            .is_none()
    );
    let paused = store.get_run(&run.id).await.unwrap().unwrap();
    assert_eq!(paused.state.status, RunStatus::Paused);
    assert_eq!(paused.lease_owner, None);
    progressed
        .review_decisions
        .push(json!({"call_id": "call_9", "decision": "approve"}));
    store.resume_run(&run.id, &progressed).await.unwrap();

    // A lease that expires lets another worker take the run; the first is fenced out.
    let short = store
        .claim_run("w1", Duration::from_millis(50))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(short.id, run.id);
    assert_eq!(short.state.review_decisions.len(), 1);
    tokio::time::sleep(Duration::from_millis(120)).await;
    let taken = store
        .claim_run("w2", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(taken.id, run.id);
    assert_eq!(taken.epoch, short.epoch + 1);
    let late = store
        .complete_run(&short.lease().unwrap(), &progressed)
        .await
        .unwrap_err();
    assert!(matches!(late, StoreError::LeaseLost { .. }), "{late}");
    progressed.status = RunStatus::Done;
    store
        .complete_run(&taken.lease().unwrap(), &progressed)
        .await
        .unwrap();
    let runs = store.list_runs(&id).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].state.status, RunStatus::Done);
    assert!(
        store
            .claim_run("w3", Duration::from_secs(1))
            .await
            .unwrap()
            .is_none()
    );
    let no_conv = store
        .create_run("nope", &RunState::default())
        .await
        .unwrap_err();
    assert!(
        matches!(
            no_conv,
            StoreError::ConversationNotFound(_) | StoreError::Database(_)
        ),
        "{no_conv}"
    );
}

/// Many appenders at once (what group commit batches): 20 conversations, 3 tasks each,
/// every task appending 30 messages and recording a status per message, with writes that
/// must fail (unknown conversation) mixed in. Each successful append must get its own
/// sequence number and be stored under it; the failing writes must fail alone.
pub(crate) async fn concurrent_writes<S: Store + Clone + 'static>(store: &S) {
    const CONVERSATIONS: usize = 20;
    const TASKS: usize = 3;
    const EACH: usize = 30;
    let mut ids = Vec::new();
    for _ in 0..CONVERSATIONS {
        ids.push(
            store
                .create_conversation(NewConversation::default())
                .await
                .unwrap(),
        );
    }
    let mut tasks = tokio::task::JoinSet::new();
    for (c, id) in ids.iter().enumerate() {
        for t in 0..TASKS {
            let (store, id) = (store.clone(), id.clone());
            tasks.spawn(async move {
                let mut stored = Vec::new();
                for i in 0..EACH {
                    let call_id = format!("c{c}-t{t}-{i}");
                    let message =
                        Message::assistant_with_calls(call_id.clone(), vec![call(&call_id, "f")]);
                    let seq = store.append_message(&id, &message).await.unwrap();
                    store
                        .set_tool_status(Writer::from(&id), &call_id, ExecutionStatus::Executing)
                        .await
                        .unwrap();
                    stored.push((seq, call_id));
                    if i % 10 == 0 {
                        let missing = store.append_message("no-such-conversation", &message).await;
                        assert!(
                            matches!(missing, Err(StoreError::ConversationNotFound(_))),
                            "{missing:?}"
                        );
                        let missing = store
                            .set_tool_status(
                                Writer::from("no-such-conversation"),
                                "x",
                                ExecutionStatus::Failed,
                            )
                            .await;
                        assert!(missing.is_err(), "a status for an unknown conversation");
                    }
                }
                (id, stored)
            });
        }
    }
    let mut expected: std::collections::HashMap<String, Vec<(i64, String)>> = Default::default();
    while let Some(done) = tasks.join_next().await {
        let (id, stored) = done.unwrap();
        expected.entry(id).or_default().extend(stored);
    }
    for id in &ids {
        let loaded = store.get_conversation(id).await.unwrap().unwrap();
        let messages = &loaded.conversation.messages;
        assert_eq!(messages.len(), TASKS * EACH, "conversation {id}");
        let mut mine = expected.remove(id).unwrap();
        mine.sort();
        for (n, (seq, call_id)) in mine.iter().enumerate() {
            assert_eq!(*seq, n as i64, "sequence numbers are 0, 1, 2… in {id}");
            let message = &messages[n];
            assert_eq!(message.text().as_deref(), Some(call_id.as_str()));
            assert_eq!(message.tool_calls[0].execution_status(), "executing");
        }
    }
}

/// The model of the worker tests: asks for the non-idempotent tool `charge` once per
/// conversation, then answers. A run resumed after a crash finds the call already asked
/// (answered, or "outcome unknown") and just answers.
pub(crate) fn charge_once(
    state: &llmchain::chain::ChainState,
) -> Result<llmchain::chain::ScriptedModel, llmchain::chain::ModelError> {
    use llmchain::provider::render::ResponseScript;
    let asked = state
        .conversation
        .messages
        .iter()
        .any(|m| !m.tool_calls.is_empty());
    let mut model = llmchain::chain::ScriptedModel::new(llmchain::provider::Format::OPENAI_CHAT);
    if !asked {
        model = model.respond(ResponseScript::tool_call("call_1", "charge", "{}"))?;
    }
    model.respond(ResponseScript::text("charged"))
}

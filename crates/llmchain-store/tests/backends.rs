//! The conformance suite against each backend, schema versioning, and paths.

mod common;

use llmchain_store::{
    AnyStore, Durability, NewConversation, PostgresStore, SqliteStore, Store, StoreError,
    default_sqlite_path,
};

#[tokio::test]
async fn sqlite_in_memory() {
    let store = SqliteStore::in_memory().await.unwrap();
    common::conformance(&store).await;
}

#[tokio::test]
async fn sqlite_file_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested").join("store.db");
    let store = SqliteStore::open(&path).await.unwrap();
    common::conformance(&store).await;
    let ids: Vec<String> = store
        .list_conversations(10)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    store.pool().close().await;
    let reopened = SqliteStore::open(&path).await.unwrap();
    let loaded = reopened.get_conversation(&ids[0]).await.unwrap().unwrap();
    assert_eq!(loaded.conversation.messages.len(), 4);
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(reopened.pool())
        .await
        .unwrap();
    assert_eq!(mode, "wal");
    let sync: i64 = sqlx::query_scalar("PRAGMA synchronous")
        .fetch_one(reopened.pool())
        .await
        .unwrap();
    assert_eq!(sync, 2, "synchronous=FULL by default");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_concurrent_writes_group_commit() {
    let dir = tempfile::tempdir().unwrap();
    for durability in [Durability::Full, Durability::Normal] {
        let path = dir.path().join(format!("{durability:?}.db"));
        let store = SqliteStore::open_with(&path, durability).await.unwrap();
        common::concurrent_writes(&store).await;
    }
    common::concurrent_writes(&SqliteStore::in_memory().await.unwrap()).await;
}

#[tokio::test]
async fn sqlite_newer_schema_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = SqliteStore::open(&path).await.unwrap();
    sqlx::query("INSERT INTO llmchain_schema (version) VALUES (99)")
        .execute(store.pool())
        .await
        .unwrap();
    store.pool().close().await;
    let err = SqliteStore::open(&path).await.unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::SchemaTooNew {
                found: 99,
                supported: llmchain_store::schema::SCHEMA_VERSION
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("upgrade llmchain"), "{err}");
}

#[tokio::test]
async fn any_store_urls() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("any.db");
    let store = AnyStore::open(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let id = store
        .create_conversation(NewConversation::default())
        .await
        .unwrap();
    assert!(path.exists());
    assert!(store.get_conversation(&id).await.unwrap().is_some());
    let mem = AnyStore::open("sqlite::memory:").await.unwrap();
    common::conformance(&mem).await;
    let normal = dir.path().join("normal.db");
    let normal = AnyStore::open(&format!("sqlite://{}?synchronous=normal", normal.display()))
        .await
        .unwrap();
    let AnyStore::Sqlite(normal) = normal else {
        panic!("a sqlite URL opens SQLite")
    };
    let sync: i64 = sqlx::query_scalar("PRAGMA synchronous")
        .fetch_one(normal.pool())
        .await
        .unwrap();
    assert_eq!(sync, 1, "synchronous=NORMAL asked for in the URL");
    let bad = AnyStore::open("mysql://x").await.unwrap_err();
    assert!(matches!(bad, StoreError::BadUrl(_)), "{bad}");
}

#[test]
fn default_path_follows_xdg() {
    // Only reads the environment; both branches checked on the current values.
    let p = default_sqlite_path().unwrap();
    assert!(p.ends_with("llmchain/llmchain.db"), "{}", p.display());
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        assert!(p.starts_with(xdg));
    } else {
        assert!(p.to_string_lossy().contains(".local/share"));
    }
}

#[tokio::test]
async fn postgres_conformance() {
    let Some(url) = common::postgres_url("postgres_conformance") else {
        return;
    };
    let (opts, _) = common::pg_schema(&url, "conf").await;
    let store = PostgresStore::connect_options(opts, 4).await.unwrap();
    common::conformance(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_concurrent_writes() {
    let Some(url) = common::postgres_url("postgres_concurrent_writes") else {
        return;
    };
    let (opts, _) = common::pg_schema(&url, "conc").await;
    let store = PostgresStore::connect_options(opts, 8).await.unwrap();
    common::concurrent_writes(&store).await;
}

#[tokio::test]
async fn postgres_newer_schema_is_a_clear_error() {
    let Some(url) = common::postgres_url("postgres_newer_schema_is_a_clear_error") else {
        return;
    };
    let (opts, _) = common::pg_schema(&url, "ver").await;
    let store = PostgresStore::connect_options(opts.clone(), 1)
        .await
        .unwrap();
    sqlx::query("INSERT INTO llmchain_schema (version) VALUES (42)")
        .execute(store.pool())
        .await
        .unwrap();
    let err = PostgresStore::connect_options(opts, 1).await.unwrap_err();
    assert!(
        matches!(err, StoreError::SchemaTooNew { found: 42, .. }),
        "{err}"
    );
}

/// A version-1 database with two open runs on one conversation (allowed then) upgrades
/// to version 2 (the newer run stays open, the older is cancelled with a reason), then
/// to version 3, which cancels the runs left open (they name no profile, so no worker
/// would claim them) saying how to queue them again; the one-open-run rule holds.
#[tokio::test]
async fn sqlite_version_1_upgrades_keeping_the_newest_open_run() {
    use sqlx::Connection;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.db");
    {
        let url = format!("sqlite://{}?mode=rwc", path.display());
        let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
        sqlx::raw_sql(include_str!("../migrations/sqlite/0001_init.sql"))
            .execute(&mut conn)
            .await
            .unwrap();
        sqlx::raw_sql(
            "CREATE TABLE llmchain_schema (version BIGINT NOT NULL); \
             INSERT INTO llmchain_schema VALUES (1); \
             INSERT INTO conversations VALUES ('c', NULL, '{}', '{}', 0, 1, 1); \
             INSERT INTO runs VALUES ('old', 'c', 'pending', '{}', NULL, NULL, 1, 1); \
             INSERT INTO runs VALUES ('new', 'c', 'pending', '{}', NULL, NULL, 2, 2); \
             INSERT INTO runs VALUES ('done', 'c', 'done', '{}', NULL, NULL, 0, 0);",
        )
        .execute(&mut conn)
        .await
        .unwrap();
        conn.close().await.unwrap();
    }
    let store = SqliteStore::open(&path).await.unwrap();
    let status = |id: &'static str| {
        let store = store.clone();
        async move { store.get_run(id).await.unwrap().unwrap() }
    };
    let new = status("new").await;
    assert_eq!(new.state.status, llmchain_store::RunStatus::Cancelled);
    assert!(new.last_error.unwrap().contains("--profile NAME"));
    let old = status("old").await;
    assert_eq!(old.state.status, llmchain_store::RunStatus::Cancelled);
    assert!(old.last_error.unwrap().contains("newer open run"));
    assert_eq!(
        status("done").await.state.status,
        llmchain_store::RunStatus::Done
    );
    store.create_run("c", &Default::default()).await.unwrap();
    assert!(matches!(
        store.create_run("c", &Default::default()).await,
        Err(StoreError::RunAlreadyOpen { .. })
    ));
    // Deleting the conversation takes its runs with it; pruning removes finished runs.
    assert_eq!(
        store.prune_runs(i64::MAX).await.unwrap(),
        3,
        "old, new and done"
    );
    assert!(store.delete_conversation("c").await.unwrap());
    assert!(!store.delete_conversation("c").await.unwrap());
    assert!(store.list_runs("c").await.unwrap().is_empty());
}

/// A new database and its directory are private to the user (0600 / 0700), and so are
/// SQLite's `-wal` and `-shm` files.
#[cfg(unix)]
#[tokio::test]
async fn a_new_database_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("share").join("llmchain");
    let path = data.join("llmchain.db");
    let store = SqliteStore::open(&path).await.unwrap();
    store
        .create_conversation(NewConversation::default())
        .await
        .unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&data), 0o700);
    for suffix in ["", "-wal", "-shm"] {
        let file = std::path::PathBuf::from(format!("{}{suffix}", path.display()));
        assert_eq!(mode(&file), 0o600, "{}", file.display());
    }
}

/// A database file that existed with others allowed to read it (0666, and its `-wal`)
/// is made private when it is opened.
#[cfg(unix)]
#[tokio::test]
async fn an_existing_open_database_is_made_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let store = SqliteStore::open(&path).await.unwrap();
    store
        .create_conversation(NewConversation::default())
        .await
        .unwrap();
    drop(store);
    let wal = std::path::PathBuf::from(format!("{}-wal", path.display()));
    for f in [&path, &wal] {
        if f.exists() {
            std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o666)).unwrap();
        }
    }
    let _store = SqliteStore::open(&path).await.unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600);
    if wal.exists() {
        assert_eq!(mode(&wal), 0o600);
    }
}

/// One call stores a chain's conversation so far and attaches the sink: every later
/// message lands in the store, in order, with the tool statuses.
#[tokio::test]
async fn a_chain_is_persisted_with_one_call() {
    use llmchain::chain::{LLMChain, Mode, ScriptedModel};
    use llmchain::message::{ExecutionStatus, Message};
    use llmchain::provider::Format;
    use llmchain::provider::render::ResponseScript;
    use llmchain::tool::{Tool, ToolOutput};
    use llmchain_store::sink::StoreSink;
    use std::sync::Arc;

    let store = Arc::new(SqliteStore::in_memory().await.unwrap());
    let model = ScriptedModel::new(Format::OPENAI_CHAT)
        .respond(ResponseScript::tool_call("c1", "ping", "{}"))
        .unwrap()
        .respond(ResponseScript::text("pong"))
        .unwrap();
    let ping = Tool::builder("ping")
        .handler(|_, _| async { ToolOutput::text("pong") })
        .build()
        .unwrap();
    let mut chain = LLMChain::new(model)
        .with_system("Be brief.")
        .with_tool(ping);
    chain.add_message(Message::user("ping?")).await.unwrap();
    let (mut chain, id) = StoreSink::persist(store.clone(), chain, Some("ping".into()))
        .await
        .unwrap();
    chain.run(Mode::while_needs_response()).await.unwrap();
    let stored = store.get_conversation(&id).await.unwrap().unwrap();
    assert_eq!(stored.summary.title.as_deref(), Some("ping"));
    assert_eq!(stored.conversation.messages, chain.messages());
    assert_eq!(stored.conversation.messages.len(), 4);
    assert_eq!(
        stored.conversation.messages[1].tool_calls[0].execution_status(),
        ExecutionStatus::Completed.as_str()
    );
}

/// A sink for a run claimed in a new conversation of a new SQLite file (kept while
/// the directory lives).
async fn leased_sink() -> (
    tempfile::TempDir,
    std::sync::Arc<SqliteStore>,
    String,
    llmchain_store::Run,
    llmchain_store::sink::StoreSink<SqliteStore>,
) {
    let dir = tempfile::tempdir().unwrap();
    let store = std::sync::Arc::new(SqliteStore::open(dir.path().join("db")).await.unwrap());
    let id = store
        .create_conversation(NewConversation::default())
        .await
        .unwrap();
    let run = store
        .claim_conversation(
            &id,
            "w",
            std::time::Duration::from_secs(60),
            &llmchain_store::RunState::default(),
        )
        .await
        .unwrap();
    let sink =
        llmchain_store::sink::StoreSink::for_run(store.clone(), &run, "while_needs_response")
            .unwrap();
    (dir, store, id, run, sink)
}

/// A leased sink writes a run state only when it changed, and with its next write (or
/// a flush) rather than in a transaction of its own; a state that pauses the run is
/// written at once.
#[tokio::test]
async fn the_sink_holds_a_run_state_for_its_next_write_and_skips_repeats() {
    use llmchain::chain::{ChainState, ConversationSink, PendingReview};
    use llmchain::message::Message;
    use std::time::Duration;

    let (_dir, store, _, run, sink) = leased_sink().await;
    let stored = || async { store.get_run(&run.id).await.unwrap().unwrap() };
    let claimed = stored().await.updated_at;
    let mut state = ChainState {
        run_count: 1,
        ..Default::default()
    };
    sink.save_state(&state).await.unwrap();
    assert_eq!(stored().await.updated_at, claimed, "a state was not held");
    tokio::time::sleep(Duration::from_millis(5)).await;
    sink.flush().await.unwrap();
    let first = stored().await;
    assert!(
        first.updated_at > claimed,
        "a flush did not write the state"
    );
    assert_eq!(first.state.extra["chain"]["run_count"], 1);
    tokio::time::sleep(Duration::from_millis(5)).await;
    // The same state again, from a clone too (one chain's sinks share what was saved).
    sink.clone().save_state(&state).await.unwrap();
    sink.flush().await.unwrap();
    assert_eq!(
        stored().await.updated_at,
        first.updated_at,
        "an unchanged state was written again"
    );
    // A changed state goes with the next message, in its transaction.
    state.run_count = 2;
    sink.save_state(&state).await.unwrap();
    assert_eq!(stored().await.state.extra["chain"]["run_count"], 1);
    sink.append_message(0, &Message::user("hi")).await.unwrap();
    assert_eq!(stored().await.state.extra["chain"]["run_count"], 2);
    // A state that waits for a person is written at once.
    state.pending_review = Some(PendingReview {
        message_position: 0,
        calls: Vec::new(),
    });
    sink.save_state(&state).await.unwrap();
    let paused = stored().await;
    assert!(paused.state.extra["chain"]["pending_review"].is_object());
}

/// A leased sink writes a call's `executing` status before the tool runs, and its final
/// status with the tool message that follows, in one transaction: a process killed in
/// between leaves the call `executing` (outcome unknown), never `completed` without its
/// result.
#[tokio::test]
async fn the_sink_writes_a_final_status_with_the_tool_message() {
    use llmchain::chain::ConversationSink;
    use llmchain::message::{ExecutionStatus, Message, ToolResult};

    let (_dir, store, id, _, sink) = leased_sink().await;
    let status = || async { store.tool_statuses(&id).await.unwrap().get("c1").copied() };
    sink.set_tool_status("c1", ExecutionStatus::Executing)
        .await
        .unwrap();
    assert_eq!(status().await, Some(ExecutionStatus::Executing));
    sink.set_tool_status("c1", ExecutionStatus::Completed)
        .await
        .unwrap();
    assert_eq!(
        status().await,
        Some(ExecutionStatus::Executing),
        "a final status was written before its tool message"
    );
    let result = Message::tool(vec![ToolResult::text("c1", "sunny")]);
    sink.append_message(0, &result).await.unwrap();
    assert_eq!(status().await, Some(ExecutionStatus::Completed));
    let stored = store.get_conversation(&id).await.unwrap().unwrap();
    assert_eq!(stored.conversation.messages.len(), 1);

    // Held and never written (the process died): the call stays `executing`.
    sink.set_tool_status("c2", ExecutionStatus::Executing)
        .await
        .unwrap();
    sink.set_tool_status("c2", ExecutionStatus::Failed)
        .await
        .unwrap();
    drop(sink);
    let statuses = store.tool_statuses(&id).await.unwrap();
    assert_eq!(statuses.get("c2"), Some(&ExecutionStatus::Executing));
}

/// A sink holding answers writes an assistant message with its first call's
/// `executing` status (before the tool runs), and the last answer with the run's
/// completion: one transaction each instead of two. A held answer whose number the
/// store disagrees with is a conflict, as an append's is.
#[tokio::test]
async fn a_sink_holding_answers_writes_them_with_the_next_write() {
    use llmchain::chain::ConversationSink;
    use llmchain::message::{ExecutionStatus, Message, ToolCall, ToolResult};

    let (_dir, store, id, run, sink) = leased_sink().await;
    let sink = sink.holding_answers();
    let stored = || store.get_conversation(&id);
    let count = || async {
        stored()
            .await
            .unwrap()
            .map(|c| c.conversation.messages.len())
    };
    sink.append_message(0, &Message::user("weather?"))
        .await
        .unwrap();
    let call = ToolCall::function("c1", "weather", serde_json::json!({"city": "Tokyo"})).unwrap();
    let asks = Message::assistant_with_calls("", vec![call]);
    sink.append_message(1, &asks).await.unwrap();
    assert_eq!(count().await, Some(1), "the answer waits");
    sink.set_tool_status("c1", ExecutionStatus::Executing)
        .await
        .unwrap();
    assert_eq!(
        count().await,
        Some(2),
        "written with the call's executing status"
    );
    assert_eq!(
        store.tool_statuses(&id).await.unwrap().get("c1"),
        Some(&ExecutionStatus::Executing)
    );
    sink.set_tool_status("c1", ExecutionStatus::Completed)
        .await
        .unwrap();
    let result = Message::tool(vec![ToolResult::text("c1", "sunny")]);
    sink.append_message(2, &result).await.unwrap();
    sink.append_message(3, &Message::assistant("Sunny in Tokyo."))
        .await
        .unwrap();
    assert_eq!(
        count().await,
        Some(3),
        "the last answer waits for the completion"
    );
    let done = llmchain_store::RunState {
        status: llmchain_store::RunStatus::Done,
        ..run.state.clone()
    };
    sink.complete(&done).await.unwrap();
    assert_eq!(count().await, Some(4));
    let stored = store.get_run(&run.id).await.unwrap().unwrap();
    assert_eq!(stored.state.status, llmchain_store::RunStatus::Done);
    assert!(
        stored.lease_owner.is_none(),
        "the completion released the lease"
    );

    // A held answer numbered otherwise than the chain numbered it: a conflict, and the
    // answer is not written under a lease no longer held.
    let (_dir2, store2, id2, _, sink2) = leased_sink().await;
    let sink2 = sink2.holding_answers();
    sink2
        .append_message(1, &Message::assistant("out of place"))
        .await
        .unwrap();
    let e = sink2.flush().await.unwrap_err();
    assert_eq!(e.kind(), llmchain::chain::SinkErrorKind::Conflict, "{e}");
    assert!(e.to_string().contains("numbered message 1"), "{e}");
    let _ = store2.get_conversation(&id2).await.unwrap();
}

/// A write carrying a held answer that fails puts the answer back: the next write (a
/// parallel call's `executing`) carries it, so no tool starts before the answer naming
/// its call is stored. The chain's parallel `executing` writes go one after the other.
#[tokio::test]
async fn a_held_answer_whose_write_failed_goes_with_the_next_write() {
    use llmchain::chain::ConversationSink;
    use llmchain::message::{ExecutionStatus, Message, ToolCall};

    let (dir, store, id, _, sink) = leased_sink().await;
    let sink = sink.holding_answers();
    // The first call's `executing` write fails (as a dropped connection would).
    rusqlite::Connection::open(dir.path().join("db"))
        .unwrap()
        .execute_batch(
            "CREATE TRIGGER fail_c1 BEFORE INSERT ON tool_calls WHEN NEW.call_id = 'c1' \
             BEGIN SELECT RAISE(ABORT, 'injected'); END;",
        )
        .unwrap();
    sink.append_message(0, &Message::user("two things"))
        .await
        .unwrap();
    let call = |id: &str| ToolCall::function(id, "lookup", serde_json::json!({})).unwrap();
    let asks = Message::assistant_with_calls("", vec![call("c1"), call("c2")]);
    sink.append_message(1, &asks).await.unwrap();
    let (first, second) = tokio::join!(
        sink.set_tool_status("c1", ExecutionStatus::Executing),
        sink.set_tool_status("c2", ExecutionStatus::Executing),
    );
    assert!(first.is_err(), "the injected failure");
    second.unwrap();
    let stored = store.get_conversation(&id).await.unwrap().unwrap();
    assert_eq!(
        stored.conversation.messages.len(),
        2,
        "the answer went with the second call's executing status"
    );
    let statuses = store.tool_statuses(&id).await.unwrap();
    assert_eq!(statuses.get("c2"), Some(&ExecutionStatus::Executing));
    assert_eq!(statuses.get("c1"), None);
}

/// The rows of a version-3 database: a chat `llmchain serve` ran (its run records the
/// server's profile), a CLI conversation, and a chat of a server without a profile.
const V3_ROWS: &str = "INSERT INTO conversations VALUES ('chat', NULL, '{\"x\":1}', '{}', 0, 1, 1); \
     INSERT INTO conversations VALUES ('cli', NULL, '{}', '{}', 0, 1, 1); \
     INSERT INTO conversations VALUES ('anon', NULL, '{}', '{}', 0, 1, 1); \
     INSERT INTO runs (id, conversation_id, status, state, created_at, updated_at, kind) \
       VALUES ('r1', 'chat', 'done', '{\"mode\":\"m\",\"serve\":{\"profile\":\"web\"}}', 1, 1, 'interactive'); \
     INSERT INTO runs (id, conversation_id, status, state, created_at, updated_at, kind) \
       VALUES ('r2', 'cli', 'done', '{\"mode\":\"m\",\"job\":{}}', 1, 1, 'interactive'); \
     INSERT INTO runs (id, conversation_id, status, state, created_at, updated_at, kind) \
       VALUES ('r3', 'anon', 'done', '{\"mode\":\"m\",\"serve\":{\"profile\":null}}', 1, 1, 'interactive');";

/// After the upgrade to version 4, the chats a server ran carry its profile's mark (so
/// it still lists them), and the CLI conversation carries none.
async fn v4_marks_served_chats(store: &impl Store) {
    let mark = |id: &'static str| async move {
        store
            .get_conversation(id)
            .await
            .unwrap()
            .unwrap()
            .summary
            .metadata
            .get("llmchain_serve")
            .cloned()
    };
    assert_eq!(mark("chat").await, Some(serde_json::json!("web")));
    assert_eq!(mark("anon").await, Some(serde_json::json!("")));
    assert_eq!(mark("cli").await, None);
    let listed = store
        .list_conversations_tagged("llmchain_serve", "web", 10)
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, "chat");
    assert_eq!(listed[0].metadata["x"], 1, "the rest of the metadata stays");
    assert!(
        store
            .list_conversations_tagged("bad key'", "web", 10)
            .await
            .is_err()
    );
}

#[tokio::test]
async fn sqlite_version_3_upgrades_marking_served_chats() {
    use sqlx::Connection;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v3.db");
    {
        let url = format!("sqlite://{}?mode=rwc", path.display());
        let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
        for sql in [
            include_str!("../migrations/sqlite/0001_init.sql"),
            include_str!("../migrations/sqlite/0002_run_queue.sql"),
            include_str!("../migrations/sqlite/0003_reviews_and_profiles.sql"),
            "CREATE TABLE llmchain_schema (version BIGINT NOT NULL); \
             INSERT INTO llmchain_schema VALUES (3);",
            V3_ROWS,
        ] {
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                .execute(&mut conn)
                .await
                .unwrap();
        }
        conn.close().await.unwrap();
    }
    let store = SqliteStore::open(&path).await.unwrap();
    v4_marks_served_chats(&store).await;
}

#[tokio::test]
async fn postgres_version_3_upgrades_marking_served_chats() {
    let Some(url) = common::postgres_url("postgres_version_3_upgrades_marking_served_chats") else {
        return;
    };
    let (opts, _) = common::pg_schema(&url, "v3").await;
    {
        use sqlx::ConnectOptions;
        let mut conn = opts.connect().await.unwrap();
        for sql in [
            include_str!("../migrations/postgres/0001_init.sql"),
            include_str!("../migrations/postgres/0002_run_queue.sql"),
            include_str!("../migrations/postgres/0003_reviews_and_profiles.sql"),
            "CREATE TABLE llmchain_schema (version BIGINT NOT NULL); \
             INSERT INTO llmchain_schema VALUES (3);",
            V3_ROWS,
        ] {
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                .execute(&mut conn)
                .await
                .unwrap();
        }
    }
    let store = PostgresStore::connect_options(opts, 2).await.unwrap();
    v4_marks_served_chats(&store).await;
}

/// A secret of the process (a key, a token fetched at run time) that a tool or a model
/// echoes is masked before the message is stored, on both backends.
async fn echoed_secrets_are_not_stored(store: &impl Store) {
    const SECRET: &str = "sk-stored-echo-7c1e93ab55";
    llmchain::secrets::register(SECRET);
    let id = store
        .create_conversation(NewConversation::default())
        .await
        .unwrap();
    let echoed = llmchain::message::Message::tool(vec![llmchain::message::ToolResult::text(
        "c1",
        format!("OPENAI_API_KEY={SECRET}"),
    )]);
    store.append_message(&id, &echoed).await.unwrap();
    let stored = store.get_conversation(&id).await.unwrap().unwrap();
    let text = stored.conversation.messages[0].tool_results[0].content_text();
    assert_eq!(text, "OPENAI_API_KEY=***");
}

#[tokio::test]
async fn sqlite_stores_no_echoed_secret() {
    echoed_secrets_are_not_stored(&SqliteStore::in_memory().await.unwrap()).await;
}

#[tokio::test]
async fn postgres_stores_no_echoed_secret() {
    let Some(url) = common::postgres_url("postgres_stores_no_echoed_secret") else {
        return;
    };
    let (opts, _) = common::pg_schema(&url, "mask").await;
    let store = PostgresStore::connect_options(opts, 2).await.unwrap();
    echoed_secrets_are_not_stored(&store).await;
}

/// A run status written by a newer version reads as paused: listed, open (the
/// conversation gets no second run), and never claimed by this version.
#[tokio::test]
async fn a_run_status_this_version_does_not_know_reads_as_paused_and_is_never_claimed() {
    use llmchain_store::{RunOptions, RunState, RunStatus};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let store = SqliteStore::open(&path).await.unwrap();
    let id = store
        .create_conversation(NewConversation::default())
        .await
        .unwrap();
    let run = store
        .enqueue_run(&id, &RunState::default(), &RunOptions::default())
        .await
        .unwrap();
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute(
            "UPDATE runs SET status = 'escalated' WHERE id = ?1",
            [&run.id],
        )
        .unwrap();
    let read = store.get_run(&run.id).await.unwrap().unwrap();
    assert_eq!(read.state.status, RunStatus::Paused);
    assert_eq!(
        store.run_counts().await.unwrap().get(&RunStatus::Paused),
        Some(&1)
    );
    assert!(
        store
            .claim_run("w", std::time::Duration::from_secs(30))
            .await
            .unwrap()
            .is_none()
    );
}

/// The store's errors show their cause in their own text and do not return it from
/// `source()` too (a reporter walking the chain would print it twice).
#[test]
fn store_errors_show_each_cause_once() {
    use std::error::Error as _;
    let errors = [
        StoreError::Io {
            context: "cannot create /x".into(),
            cause: std::io::Error::other("denied"),
        },
        StoreError::Database(sqlx::Error::RowNotFound),
        StoreError::Sqlite(rusqlite::Error::InvalidQuery),
        StoreError::Serialize {
            what: "a run",
            cause: serde_json::from_str::<u8>("x").unwrap_err(),
        },
    ];
    for e in &errors {
        if let Some(s) = e.source() {
            assert!(!e.to_string().contains(&s.to_string()), "{e} repeats {s}");
        }
    }
}

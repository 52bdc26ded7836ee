//! `llmchain conversations …` against a SQLite file written through the store.

mod common;

use std::path::Path;
use std::process::Output;

use llmchain::conversation::{Conversation, ToolDefinition};
use llmchain::message::{ExecutionStatus, Message, ToolCall, ToolResult};
use llmchain_store::{NewConversation, SqliteStore, Store, Writer};
use serde_json::json;

fn llmchain(args: &[&str], env_db: Option<&str>) -> Output {
    llmchain_env(args, env_db, &[])
}

fn llmchain_env(args: &[&str], env_db: Option<&str>, env: &[(&str, &str)]) -> Output {
    // Hermetic: none of the user's settings, config or data (a home of its own).
    let home = tempfile::tempdir().unwrap();
    let mut cmd = common::llmchain_command(args, home.path());
    cmd.env("LLMCHAIN_CONFIG", "/nonexistent/llmchain-test-config.toml");
    if let Some(url) = env_db {
        cmd.env("LLMCHAIN_DATABASE_URL", url);
    }
    cmd.envs(env.iter().copied());
    cmd.output().unwrap()
}

/// An interactive run of conversation `id` whose process died (its lease ran out),
/// with `state`: what `run` leaves when it is killed.
async fn dead_run(store: &SqliteStore, id: &str, state: &llmchain_store::RunState) {
    store
        .claim_conversation(id, "cli-dead", std::time::Duration::from_millis(1), state)
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// A conversation with a header, a completed call, and a call left executing.
async fn populate(path: &Path) -> (String, Conversation) {
    let store = SqliteStore::open(path).await.unwrap();
    let mut conv = Conversation::new();
    conv.system = Some("Be brief.".into());
    conv.tools.push(ToolDefinition {
        name: "get_weather".into(),
        description: "Weather by city".into(),
        ..Default::default()
    });
    conv.messages
        .push(Message::user("Weather in Paris and send it to Bob?"));
    conv.messages.push(Message::assistant_with_calls(
        "Checking.",
        vec![
            ToolCall::function("call_1", "get_weather", json!({"city": "Paris"})).unwrap(),
            ToolCall::function("call_2", "send_mail", json!({"to": "bob"})).unwrap(),
        ],
    ));
    conv.messages.push(Message::tool(vec![
        ToolResult::text("call_1", "18C").with_name("get_weather"),
    ]));
    let id = store
        .create_conversation(NewConversation::from_conversation(conv.clone()).with_title("weather"))
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
    dead_run(&store, &id, &Default::default()).await;
    store.pool().close().await;
    conv.messages[1].tool_calls[0].set_execution_status("completed");
    conv.messages[1].tool_calls[1].set_execution_status("executing");
    (id, conv)
}

#[tokio::test(flavor = "current_thread")]
async fn list_show_export_resume() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cli.db");
    let (id, conv) = populate(&path).await;
    let url = format!("sqlite://{}", path.display());

    let list = llmchain(&["conversations", "--db", &url, "list"], None);
    assert!(list.status.success(), "{list:?}");
    let text = stdout(&list);
    assert!(
        text.contains(&id) && text.contains("3 messages") && text.contains("weather"),
        "{text}"
    );

    // The environment variable works too, and --json gives one object per line.
    let list = llmchain(&["conversations", "list", "--json"], Some(&url));
    assert!(list.status.success());
    let row: serde_json::Value = serde_json::from_str(stdout(&list).trim()).unwrap();
    assert_eq!(row["id"], json!(id));
    assert_eq!(row["message_count"], json!(3));

    let show = llmchain(&["conversations", "show", &id, "--db", &url], None);
    assert!(show.status.success());
    let text = stdout(&show);
    for needle in [
        "system: Be brief.",
        "tools: get_weather",
        "[0] user: Weather in Paris",
        "-> call_1 get_weather({\"city\":\"Paris\"}) [completed]",
        "-> call_2 send_mail({\"to\":\"bob\"}) [executing]",
        "<- call_1: 18C",
        "run ",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }

    // Export is the storage format's conversation file, statuses included.
    let export = llmchain(&["conversations", "--db", &url, "export", &id], None);
    assert!(export.status.success());
    let exported = Conversation::from_json(&stdout(&export)).unwrap();
    assert_eq!(exported, conv);
    let value: serde_json::Value = serde_json::from_str(&stdout(&export)).unwrap();
    assert_eq!(value["version"], json!(1));
    let file = dir.path().join("out.json");
    let export = llmchain(
        &[
            "conversations",
            "--db",
            &url,
            "export",
            &id,
            "-o",
            file.to_str().unwrap(),
        ],
        None,
    );
    assert!(export.status.success());
    let from_file = Conversation::from_json(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(from_file, conv);

    // Resume answers the call that was executing when the process stopped: its tool is
    // not idempotent, so it is not run again; the outcome is reported unknown.
    let resume = llmchain(&["conversations", "--db", &url, "resume", &id], None);
    let text = stdout(&resume);
    assert!(resume.status.success(), "{text}");
    assert!(
        text.contains("failed call_2: The outcome of this call to send_mail is unknown"),
        "{text}"
    );
    assert!(text.contains("waiting for the model"), "{text}");
    // It is stored: a second resume finds nothing to run.
    let again = llmchain(&["conversations", "--db", &url, "resume", &id], None);
    let text = stdout(&again);
    assert!(!text.contains("call_2"), "{text}");
    let export = llmchain(&["conversations", "--db", &url, "export", &id], None);
    let exported = Conversation::from_json(&stdout(&export)).unwrap();
    assert_eq!(exported.messages.len(), 4);
    assert_eq!(
        exported.messages[1].tool_calls[1].execution_status(),
        "failed"
    );
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("empty.db").display());
    for args in [
        vec!["conversations", "--db", url.as_str(), "show", "nope"],
        vec!["conversations", "--db", "mysql://x/y", "list"],
    ] {
        let out = llmchain(&args, None);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("llmchain: "), "{err}");
    }
    let out = llmchain(&["conversations", "list"], Some(&url));
    assert!(out.status.success());
    assert_eq!(stdout(&out), "");
}

/// The default database is in the data directory; a command that only reads (`list`,
/// `runs list`, `reviews list`) never creates it.
#[test]
fn default_database_is_in_the_data_dir() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        common::bare()
            .args(args)
            .env_remove("LLMCHAIN_DATABASE_URL")
            .env("XDG_DATA_HOME", dir.path())
            .output()
            .unwrap()
    };
    let db = dir.path().join("llmchain").join("llmchain.db");
    for args in [
        &["conversations", "list"][..],
        &["runs", "list"],
        &["reviews", "list"],
    ] {
        let out = run(args);
        assert!(out.status.success(), "{args:?}: {out:?}");
        assert!(!db.exists(), "{args:?} created the database");
    }
    let out = run(&["conversations", "show", "x"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(!db.exists());
    let out = run(&["demo"]);
    assert!(out.status.success(), "{out:?}");
    assert!(db.exists());
}

/// A new database `name` in `dir` holding a conversation whose last message asks for
/// `llmchain__read_file` of notes.txt (never started); returns its URL and the id.
async fn outstanding_call(dir: &Path, name: &str) -> (String, String) {
    let path = dir.join(name);
    let store = SqliteStore::open(&path).await.unwrap();
    let mut conv = Conversation::new();
    conv.messages.push(Message::user("When do we ship?"));
    let call = ToolCall::function(
        "call_9",
        "llmchain__read_file",
        json!({"path": "notes.txt"}),
    )
    .unwrap();
    conv.messages.push(Message::assistant_with_calls(
        "Reading the notes.",
        vec![call],
    ));
    let id = store
        .create_conversation(NewConversation::from_conversation(conv))
        .await
        .unwrap();
    dead_run(&store, &id, &Default::default()).await;
    store.pool().close().await;
    (format!("sqlite://{}", path.display()), id)
}

#[tokio::test(flavor = "current_thread")]
async fn resume_runs_outstanding_calls_with_the_tools_of_mcp_servers() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "Ship on Friday.\n").unwrap();
    // `mcp serve`'s tools collide with the built-in ones: they carry the server's name.
    let server = format!(
        "{} mcp serve --root {}",
        env!("CARGO_BIN_EXE_llmchain"),
        dir.path().display()
    );
    let resume = |url: &str, id: &str, more: &[&str]| {
        let mut args = vec!["conversations", "--db", url, "resume", id];
        args.extend_from_slice(more);
        let out = llmchain(&args, None);
        let text = stdout(&out);
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };

    // Without the server the tool is unknown: the call fails, the model is told which
    // tools there are.
    let (url, id) = outstanding_call(dir.path(), "without.db").await;
    let text = resume(&url, &id, &[]);
    assert!(text.contains("failed call_9"), "{text}");
    assert!(
        text.contains("calculator"),
        "the available tools are named: {text}"
    );

    // With it, but untrusted, the server's read-only claim is not believed: denied
    // without a terminal, saying why.
    let (url, id) = outstanding_call(dir.path(), "untrusted.db").await;
    let text = resume(&url, &id, &["--mcp", &server]);
    assert!(text.contains("denied call_9"), "{text}");
    assert!(
        text.contains("claims it is read-only, but that server is not trusted"),
        "{text}"
    );

    // Trusted, the call runs (read-only, so `--approve auto` needs no terminal) and the
    // result is stored.
    let (url, id) = outstanding_call(dir.path(), "with.db").await;
    let text = resume(&url, &id, &["--mcp", &server, "--trust", "llmchain"]);
    assert!(text.contains("ran call_9: Ship on Friday."), "{text}");
    assert!(text.contains("waiting for the model"), "{text}");
    let export = llmchain(&["conversations", "--db", &url, "export", &id], None);
    let conv = Conversation::from_json(&stdout(&export)).unwrap();
    assert_eq!(conv.messages.len(), 3);
    assert_eq!(
        conv.messages[1].tool_calls[0].execution_status(),
        "completed"
    );
    assert_eq!(
        conv.messages[2].tool_results[0].content_text(),
        "Ship on Friday.\n"
    );

    // --approve never: nothing runs; the call is answered as denied.
    let (url, id) = outstanding_call(dir.path(), "denied.db").await;
    let text = resume(&url, &id, &["--mcp", &server, "--approve", "never"]);
    assert!(
        text.contains("denied call_9: Not run: the user does not allow tool calls in this session (--approve never) (policy rule approve=never)."),
        "{text}"
    );
    assert!(!text.contains("Ship on Friday"), "{text}");
}

/// A PostgreSQL URL nobody answers on fails at once with the real cause, not "pool
/// timed out" after 30 s.
#[test]
fn a_refused_database_connection_says_why() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("postgres://llmchain@127.0.0.1:{port}/x");
    let started = std::time::Instant::now();
    let out = llmchain(&["conversations", "--db", &url, "list"], None);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("Connection refused"), "{err}");
    assert!(!err.contains("pool timed out"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    // Bounded, not a timing assertion: the old behaviour took 30 s.
    assert!(started.elapsed() < std::time::Duration::from_secs(25));
}

/// `show` prints every part: thinking marked, an image as a placeholder with its type
/// and size (in a message and in a tool result), a cut-off message as such.
#[tokio::test(flavor = "current_thread")]
async fn show_prints_thinking_images_and_cut_off_messages() {
    use llmchain::message::{ContentPart, MessageStatus};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cli.db");
    let store = SqliteStore::open(&path).await.unwrap();
    let mut conv = Conversation::new();
    conv.messages.push(Message::user("Describe the chart."));
    let mut answer = Message::assistant("A rising line.");
    answer
        .content
        .insert(0, ContentPart::thinking("Look at the axes first."));
    answer
        .content
        .push(ContentPart::image("iVBORw0KGgoAAAANSUhEUg==", "image/png"));
    answer.status = MessageStatus::Cancelled;
    conv.messages.push(answer);
    let id = store
        .create_conversation(NewConversation::from_conversation(conv))
        .await
        .unwrap();
    store.pool().close().await;
    let url = format!("sqlite://{}", path.display());
    let out = llmchain(&["conversations", "--db", &url, "show", &id[..6]], None);
    let text = stdout(&out);
    assert!(out.status.success(), "{out:?}");
    assert!(
        text.contains("[1] assistant (cut off): (thinking: Look at the axes first.)\nA rising line.\n[image image/png, 16 bytes]"),
        "{text}"
    );
    assert!(
        text.contains("created") && text.contains("2 messages"),
        "{text}"
    );
}

/// `resume` runs the outstanding call, then asks the model with the provider and model
/// the conversation ran with (recorded with its run) at the address the user's own
/// configuration gives, and prints the answer.
#[tokio::test(flavor = "current_thread")]
async fn resume_runs_the_outstanding_call_then_asks_the_model() {
    use llmchain::provider::Format;
    use llmchain::provider::render::{ResponseScript, render_stream};
    let (base, seen) = common::serve(vec![
        render_stream(Format::OPENAI_CHAT, &ResponseScript::text("It is late.")).unwrap(),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cli.db");
    let store = SqliteStore::open(&path).await.unwrap();
    let mut conv = Conversation::new();
    conv.messages.push(Message::user("What time is it?"));
    conv.messages.push(Message::assistant_with_calls(
        "",
        vec![ToolCall::function("call_1", "clock", json!({})).unwrap()],
    ));
    let id = store
        .create_conversation(NewConversation::from_conversation(conv))
        .await
        .unwrap();
    let mut state = llmchain_store::RunState::default();
    state.extra.insert(
        "job".into(),
        json!({"provider": "openai", "model": "recorded-model", "base_url": base, "approve": "auto"}),
    );
    dead_run(&store, &id, &state).await;
    store.pool().close().await;
    let url = format!("sqlite://{}", path.display());
    // The user's own configuration points at the same server (a recorded base URL is
    // compared, never used).
    let out = llmchain_env(
        &["conversations", "--db", &url, "resume", &id],
        None,
        &[("OPENAI_BASE_URL", &base)],
    );
    let text = stdout(&out);
    assert!(out.status.success(), "{out:?}");
    assert!(text.contains("ran call_1"), "{text}");
    assert!(
        text.contains("asking the model, as the conversation ran"),
        "{text}"
    );
    assert!(text.contains("It is late."), "{text}");
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].1["model"], "recorded-model");
    let roles: Vec<&str> = seen[0].1["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool"]);
}

/// Titles, tool names and call ids with line breaks (from a model or a planted row)
/// cannot draw rows of their own in `list` or `show`: one line each, escaped.
#[tokio::test(flavor = "current_thread")]
async fn line_breaks_in_titles_and_names_cannot_draw_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cli.db");
    let store = SqliteStore::open(&path).await.unwrap();
    let mut conv = Conversation::new();
    conv.messages.push(Message::user("hi"));
    conv.messages.push(Message::assistant_with_calls(
        "",
        vec![ToolCall::function("call_1\nFAKE", "rm\n[9] user: approved", json!({})).unwrap()],
    ));
    let id = store
        .create_conversation(
            NewConversation::from_conversation(conv).with_title("title\nfake-id  2026  9 messages"),
        )
        .await
        .unwrap();
    store.pool().close().await;
    let url = format!("sqlite://{}", path.display());
    let list = stdout(&llmchain(&["conversations", "--db", &url, "list"], None));
    assert_eq!(list.lines().count(), 1, "{list}");
    assert!(list.contains("title\\u{a}fake-id"), "{list}");
    let show = stdout(&llmchain(
        &["conversations", "--db", &url, "show", &id],
        None,
    ));
    assert!(!show.lines().any(|l| l.starts_with("[9] user")), "{show}");
    assert!(!show.lines().any(|l| l.starts_with("FAKE")), "{show}");
}

/// `search` finds words in titles, messages, tool arguments and results (ignoring case;
/// a JSON key alone is not a match) with the line they are in; `delete` removes a
/// conversation by a prefix of its id, and refuses while a run of it is open.
#[tokio::test(flavor = "current_thread")]
async fn search_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cli.db");
    let (weather, _) = populate(&path).await;
    let store = SqliteStore::open(&path).await.unwrap();
    let mut c = Conversation::new();
    c.messages.push(Message::user(
        "Plan a trip to Lisbon, 100% by train_and_bus",
    ));
    c.messages
        .push(Message::assistant("Day 1: the Alfama.\nDay 2: Sintra."));
    let trip = store
        .create_conversation(NewConversation::from_conversation(c).with_title("trip"))
        .await
        .unwrap();
    store.pool().close().await;
    let url = format!("sqlite://{}", path.display());
    let search = |text: &str| {
        let o = llmchain(&["conversations", "--db", &url, "search", text], None);
        assert!(o.status.success(), "{o:?}");
        (stdout(&o), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let (out, _) = search("SINTRA");
    assert!(out.contains(&trip) && !out.contains(&weather), "{out}");
    assert!(
        out.contains("assistant: Day 1: the Alfama. Day 2: Sintra."),
        "{out}"
    );
    // Tool arguments and results, and LIKE's wildcards taken literally.
    let (out, _) = search("\"city\":\"paris\"");
    assert!(out.contains(&weather), "{out}");
    let (out, _) = search("18c");
    assert!(out.contains(&weather) && out.contains("tool: 18C"), "{out}");
    let (out, _) = search("100%");
    assert!(out.contains(&trip), "{out}");
    let (out, err) = search("0%b");
    assert!(
        out.is_empty() && err.contains("no conversation holds"),
        "{out}"
    );
    let (out, _) = search("train_and");
    assert!(out.contains(&trip), "{out}");
    // "role" and "content" are keys of every stored message, not text in them.
    let (out, _) = search("content");
    assert!(out.is_empty(), "{out}");
    let json = llmchain(
        &["conversations", "--db", &url, "search", "weather", "--json"],
        None,
    );
    let row: serde_json::Value = serde_json::from_str(stdout(&json).trim()).unwrap();
    assert_eq!(row["id"], json!(weather));
    assert_eq!(row["match"], "title: weather");

    // The weather conversation's dead run is still open (its lease lapsed, not its run).
    let refused = llmchain(&["conversations", "--db", &url, "delete", &weather], None);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("llmchain runs cancel"));
    let deleted = llmchain(&["conversations", "--db", &url, "delete", &trip[..8]], None);
    assert!(deleted.status.success(), "{deleted:?}");
    assert!(stdout(&deleted).contains(&format!("deleted conversation {trip} (trip)")));
    let (out, _) = search("Sintra");
    assert!(out.is_empty(), "{out}");
    let gone = llmchain(&["conversations", "--db", &url, "show", &trip], None);
    assert!(!gone.status.success());
}

/// What a regeneration replaced stays on record, and `conversations export` shows it
/// beside the conversation (under `superseded`, with each call's last status); the file
/// still reads as a conversation file.
#[test]
fn export_keeps_the_answers_a_regeneration_superseded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.db");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let id = rt.block_on(async {
        let store = SqliteStore::open(&path).await.unwrap();
        let mut conversation = Conversation::new();
        conversation.messages = vec![
            Message::user("charge 5"),
            Message::assistant_with_calls(
                "",
                vec![ToolCall::function("k1", "charge", json!({"amount": 5})).unwrap()],
            ),
            Message::tool(vec![ToolResult::text("k1", "charged")]),
            Message::assistant("Charged."),
        ];
        let id = store
            .create_conversation(NewConversation::from_conversation(conversation))
            .await
            .unwrap();
        store
            .set_tool_status(Writer::Conversation(&id), "k1", ExecutionStatus::Completed)
            .await
            .unwrap();
        assert_eq!(
            store
                .supersede_messages(Writer::Conversation(&id), 1)
                .await
                .unwrap(),
            3
        );
        id
    });
    let db = format!("sqlite://{}", path.display());
    let out = common::llmchain(&["conversations", "--db", &db, "export", &id], dir.path());
    assert!(out.status.success(), "{}", common::text(&out));
    let exported: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(exported["messages"].as_array().unwrap().len(), 1);
    let kept = exported["superseded"].as_array().unwrap();
    assert_eq!(kept.len(), 3);
    assert_eq!(kept[0]["position"], 1);
    assert_eq!(
        kept[0]["message"]["tool_calls"][0]["metadata"]["execution_status"],
        "completed"
    );
    let back: Conversation = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(back.messages.len(), 1);
}

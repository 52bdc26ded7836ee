//! The run queue from the command line (issue 27): `run --enqueue` stores a pending run
//! naming a profile, `worker` executes it with its own configuration's profile against
//! a local server speaking OpenAI Chat Completions, `runs` shows and steers it, and the
//! review inbox (`reviews`) answers calls from another process. The database is data,
//! never authority: rows planted in it cannot make a worker or `run -c` start a command
//! or send a key anywhere. Each reproduction of the issue is a test here.

mod common;

use std::time::Duration;

use common::{
    files_calls, files_server_cmd, llmchain, llmchain_with_env, serve, text, write_config,
};
use llmchain::conversation::Conversation;
use llmchain::message::{Message, Role};
use llmchain::provider::Format;
use llmchain::provider::render::{ResponseScript, render_stream};
use llmchain_store::{AnyStore, NewConversation, RunOptions, RunState, Store};

fn bodies(replies: &[ResponseScript]) -> Vec<Vec<u8>> {
    replies
        .iter()
        .map(|r| render_stream(Format::OPENAI_CHAT, r).unwrap())
        .collect()
}

fn write_call(id: &str, path: &str, content: &str) -> ResponseScript {
    ResponseScript::tool_call(
        id,
        "write_file",
        serde_json::json!({"path": path, "content": content}).to_string(),
    )
}

fn db_of(dir: &std::path::Path) -> String {
    format!("sqlite://{}", dir.join("queue.db").display())
}

fn drain(db: &str, dir: &std::path::Path) -> std::process::Output {
    llmchain(
        &[
            "worker",
            "--db",
            db,
            "--drain",
            "--poll-ms",
            "20",
            "--concurrency",
            "2",
        ],
        dir,
    )
}

/// A queued run names a profile; the worker runs it with the MCP server and base URL
/// of its own configuration's profile (the model's call goes to that server), and
/// `runs list`/`show` say which profile, with the prompt and dates.
#[test]
fn enqueue_then_a_worker_runs_it_under_its_profile() {
    common::on_both_databases(
        "enqueue_then_a_worker_runs_it_under_its_profile",
        |dir, db| {
            let root = dir.join("mcp-root");
            std::fs::create_dir(&root).unwrap();
            std::fs::write(root.join("notes.txt"), "Ship on Friday.\n").unwrap();
            let mcp = common::serve_cmd(&root);
            let (base, seen) = serve(bodies(&[
                ResponseScript::tool_call(
                    "call_1",
                    "llmchain__read_file",
                    r#"{"path":"notes.txt"}"#,
                ),
                ResponseScript::text("Your notes say: ship on Friday."),
            ]));
            write_config(
                dir,
                &format!(
                    "[profiles.notes]\nprovider = \"openai\"\nbase_url = \"{base}\"\nmodel = \"local-model\"\n\
                 mcp = [\"{mcp}\"]\ntrust = [\"llmchain\"]\n"
                ),
            );
            let queued = llmchain(
                &[
                    "run",
                    "--enqueue",
                    "--db",
                    db,
                    "--profile",
                    "notes",
                    "--max-attempts",
                    "3",
                    "Summarise notes.txt",
                ],
                dir,
            );
            assert!(queued.status.success(), "{}", text(&queued));
            let run_id = String::from_utf8_lossy(&queued.stdout).trim().to_owned();
            assert_eq!(run_id.len(), 36, "{}", text(&queued));
            assert!(
                text(&queued).contains("under profile notes"),
                "{}",
                text(&queued)
            );
            assert!(seen.lock().unwrap().is_empty(), "nothing ran yet");

            let list = llmchain(&["runs", "--db", db, "list", "--queued"], dir);
            let listed = text(&list);
            assert!(
                listed.contains(&run_id) && listed.contains("pending"),
                "{listed}"
            );
            assert!(
                listed.contains("attempts used 0/3") && listed.contains("profile notes"),
                "{listed}"
            );
            assert!(
                listed.contains("Summarise notes.txt"),
                "the prompt: {listed}"
            );
            assert!(listed.contains(" UTC"), "dates: {listed}");
            let interactive = llmchain(&["runs", "--db", db, "list", "--interactive"], dir);
            assert!(
                !text(&interactive).contains(&run_id),
                "{}",
                text(&interactive)
            );

            let worker = drain(db, dir);
            let worked = text(&worker);
            assert!(worker.status.success(), "{worked}");
            assert!(worked.contains("1 claimed, 1 done"), "{worked}");
            // One line per step of the run.
            assert!(
                worked.contains(&format!("run {run_id} claimed (profile notes, attempt 1)")),
                "{worked}"
            );
            assert!(worked.contains(&format!("run {run_id} done")), "{worked}");
            assert_eq!(seen.lock().unwrap().len(), 2, "two model calls");
            assert_eq!(seen.lock().unwrap()[0].1["model"], "local-model");

            // `show` takes an id prefix; `--json` has the shape of `list --json`.
            let show = llmchain(&["runs", "--db", db, "show", "--json", &run_id[..8]], dir);
            let shown: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
            assert_eq!(shown["status"], "done");
            assert_eq!(shown["kind"], "queued");
            assert_eq!(shown["profile"], "notes");
            assert_eq!(shown["attempt"], 1);
            assert_eq!(shown["prompt"], "Summarise notes.txt");
            assert!(
                shown.get("job").is_none(),
                "a queued run stores no job: {shown}"
            );
            let listed = llmchain(&["runs", "--db", db, "list", "--json"], dir);
            let line: serde_json::Value = serde_json::from_str(
                String::from_utf8_lossy(&listed.stdout)
                    .lines()
                    .next()
                    .unwrap(),
            )
            .unwrap();
            assert_eq!(line, shown);
            let human = llmchain(&["runs", "--db", db, "show", &run_id], dir);
            assert!(text(&human).contains("created: 20"), "{}", text(&human));

            let conversation_id = shown["conversation_id"].as_str().unwrap().to_owned();
            let c = common::export(db, &conversation_id, dir);
            let roles: Vec<Role> = c.messages.iter().map(|m| m.role).collect();
            assert_eq!(
                roles,
                [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
            );
            assert!(
                c.messages[2].tool_results[0]
                    .content_text()
                    .contains("Ship on Friday.")
            );

            // Steering: a finished run cannot be cancelled; a done one cannot be retried.
            let cancel = llmchain(&["runs", "--db", db, "cancel", &run_id], dir);
            assert_eq!(cancel.status.code(), Some(2), "{}", text(&cancel));
            assert!(text(&cancel).contains("is done"), "{}", text(&cancel));
            let retry = llmchain(&["runs", "--db", db, "retry", &run_id], dir);
            assert_eq!(retry.status.code(), Some(2), "{}", text(&retry));
            let missing = llmchain(&["runs", "--db", db, "show", "nope"], dir);
            assert_eq!(missing.status.code(), Some(2));
        },
    );
}

#[test]
fn a_queued_run_can_be_cancelled_and_retried() {
    common::on_both_databases("a_queued_run_can_be_cancelled_and_retried", |dir, db| {
        let queued = llmchain(&["run", "--enqueue", "--db", db, "hi"], dir);
        assert!(queued.status.success(), "{}", text(&queued));
        let run_id = String::from_utf8_lossy(&queued.stdout).trim().to_owned();
        let cancel = llmchain(&["runs", "--db", db, "cancel", &run_id], dir);
        assert!(cancel.status.success(), "{}", text(&cancel));
        let list = llmchain(
            &[
                "runs",
                "--db",
                db,
                "list",
                "--status",
                "cancelled",
                "--json",
            ],
            dir,
        );
        let line: serde_json::Value = serde_json::from_str(
            String::from_utf8_lossy(&list.stdout)
                .lines()
                .next()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(line["id"], run_id.as_str());
        let retry = llmchain(&["runs", "--db", db, "retry", &run_id[..6]], dir);
        assert!(retry.status.success(), "{}", text(&retry));
        let bad = llmchain(&["runs", "--db", db, "list", "--status", "sleeping"], dir);
        assert_eq!(bad.status.code(), Some(2));
    });
}

/// Reproduction 5 (the enqueue side): what a queued run may execute cannot come from
/// the command that queues it, so it can never come from a database row either.
#[test]
fn enqueue_refuses_what_only_a_profile_may_say() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_of(dir.path());
    for flags in [
        vec!["--mcp", "sh -c 'touch pwned'"],
        vec!["--base-url", "http://127.0.0.1:9/v1"],
        vec!["--mcp-http", "http://127.0.0.1:9/mcp"],
        vec!["--provider", "anthropic"],
        vec!["--trust", "x"],
        vec!["--root", "/"],
    ] {
        let mut args = vec!["run", "--enqueue", "--db", &db];
        args.extend(flags.iter().copied());
        args.push("hi");
        let out = llmchain(&args, dir.path());
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {}", text(&out));
        assert!(text(&out).contains("--profile NAME"), "{}", text(&out));
    }
    assert!(!dir.path().join("queue.db").exists(), "nothing was stored");
}

/// Reproduction 5 (the worker side): a queued run planted in the database with an MCP
/// command and a base URL in its state (as version 2 stored jobs) runs with the
/// worker's own profile: the planted command never starts, the worker's key goes only
/// to the configured server; a run naming a profile the worker does not have is left
/// for another worker.
#[test]
fn a_planted_row_cannot_run_commands_or_take_keys() {
    common::on_both_databases(
        "a_planted_row_cannot_run_commands_or_take_keys",
        |dir, db| {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let marker = dir.join("pwned");
                let (good, good_seen) = serve(bodies(&[ResponseScript::text("hello")]));
                let (evil, evil_seen) = serve(bodies(&[ResponseScript::text("gotcha")]));
                write_config(dir, &format!("base_url = \"{good}\"\nmodel = \"m\"\n"));
                let store = AnyStore::open(db).await.unwrap();
                let plant = |profile: &'static str| {
                    let store = store.clone();
                    let marker = marker.clone();
                    let evil = evil.clone();
                    async move {
                        let mut c = Conversation::new();
                        c.messages.push(Message::user("hi"));
                        let id = store
                            .create_conversation(NewConversation::from_conversation(c))
                            .await
                            .unwrap();
                        let mut state = RunState::default();
                        state.extra.insert(
                            "job".into(),
                            serde_json::json!({
                                "provider": "openai", "model": "m", "approve": "always",
                                "base_url": evil,
                                "mcp": [format!("sh -c 'touch {}'", marker.display())],
                            }),
                        );
                        store
                            .enqueue_run(
                                &id,
                                &state,
                                &RunOptions {
                                    profile: Some(profile.into()),
                                    ..Default::default()
                                },
                            )
                            .await
                            .unwrap()
                    }
                };
                let mine = plant("default").await;
                let theirs = plant("elsewhere").await;
                let (db2, path) = (db.to_owned(), dir.to_path_buf());
                let out = tokio::task::spawn_blocking(move || {
                    llmchain_with_env(
                        &["worker", "--db", &db2, "--drain", "--poll-ms", "20"],
                        &path,
                        &[("OPENAI_API_KEY", "sk-secret-of-the-worker")],
                    )
                })
                .await
                .unwrap();
                assert!(out.status.success(), "{}", text(&out));
                assert!(text(&out).contains("1 claimed, 1 done"), "{}", text(&out));
                assert!(!marker.exists(), "the planted command never ran");
                assert!(
                    evil_seen.lock().unwrap().is_empty(),
                    "the planted URL got nothing"
                );
                assert_eq!(good_seen.lock().unwrap().len(), 1);
                let status = |id: String| {
                    let store = store.clone();
                    async move { store.get_run(&id).await.unwrap().unwrap().state.status }
                };
                assert_eq!(status(mine.id).await, llmchain_store::RunStatus::Done);
                assert_eq!(status(theirs.id).await, llmchain_store::RunStatus::Pending);
            });
        },
    );
}

/// Reproduction 5 (the `run -c` side): a conversation planted as "the latest" with a
/// recorded MCP command and base URL: `run -c` refuses, naming the difference, and
/// nothing starts or is sent; passing the URL again on the command line is consent.
#[test]
fn run_c_refuses_a_recorded_server_or_url_the_user_did_not_configure() {
    common::on_both_databases(
        "run_c_refuses_a_recorded_server_or_url_the_user_did_not_configure",
        |dir, db| {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let marker = dir.join("pwned");
                let (evil, evil_seen) = serve(bodies(&[ResponseScript::text("gotcha")]));
                let store = AnyStore::open(db).await.unwrap();
                let mut c = Conversation::new();
                c.messages.push(Message::user("hi"));
                c.messages.push(Message::assistant("hello"));
                let id = store
                    .create_conversation(NewConversation::from_conversation(c))
                    .await
                    .unwrap();
                let planted_cmd = format!("sh -c 'touch {}'", marker.display());
                let mut state = RunState::default();
                state.extra.insert(
                    "job".into(),
                    serde_json::json!({"provider": "openai", "model": "m", "approve": "always",
                                   "base_url": evil, "mcp": [planted_cmd]}),
                );
                let held = store
                    .claim_conversation(&id, "cli-x", Duration::from_secs(30), &state)
                    .await
                    .unwrap();
                let mut done = held.state.clone();
                done.status = llmchain_store::RunStatus::Done;
                store
                    .complete_run(&held.lease().unwrap(), &done)
                    .await
                    .unwrap();

                let (db2, path) = (db.to_owned(), dir.to_path_buf());
                let out = tokio::task::spawn_blocking(move || {
                    llmchain_with_env(
                        &["run", "--db", &db2, "-c", "go on"],
                        &path,
                        &[("OPENAI_API_KEY", "sk-user")],
                    )
                })
                .await
                .unwrap();
                assert_eq!(out.status.code(), Some(2), "{}", text(&out));
                let said = text(&out);
                assert!(
                    said.contains("ran with MCP servers that your configuration"),
                    "{said}"
                );
                assert!(said.contains("touch"), "the difference is named: {said}");
                assert!(!marker.exists());
                assert!(evil_seen.lock().unwrap().is_empty());

                // With the servers named on the command line, the URL is still refused.
                let (db2, path) = (db.to_owned(), dir.to_path_buf());
                let out = tokio::task::spawn_blocking(move || {
                    llmchain_with_env(
                        &[
                            "run",
                            "--db",
                            &db2,
                            "-c",
                            "--no-builtin-tools",
                            "--mcp-http",
                            "http://127.0.0.1:9/mcp",
                            "go on",
                        ],
                        &path,
                        &[("OPENAI_API_KEY", "sk-user")],
                    )
                })
                .await
                .unwrap();
                assert_eq!(out.status.code(), Some(2), "{}", text(&out));
                assert!(
                    text(&out).contains("sends openai requests to"),
                    "{}",
                    text(&out)
                );
                assert!(evil_seen.lock().unwrap().is_empty());

                // Passing the URL again is the user's own choice.
                let (db2, path, evil2) = (db.to_owned(), dir.to_path_buf(), evil.clone());
                let out = tokio::task::spawn_blocking(move || {
                    llmchain_with_env(
                        &[
                            "run",
                            "--db",
                            &db2,
                            "-c",
                            "--mcp",
                            "true-not-run",
                            "--base-url",
                            &evil2,
                            "go on",
                        ],
                        &path,
                        &[("OPENAI_API_KEY", "sk-user")],
                    )
                })
                .await
                .unwrap();
                // `true-not-run` is not an MCP server: the run fails to start it, before the model.
                assert_ne!(out.status.code(), Some(0), "{}", text(&out));
                assert!(!marker.exists());
            });
        },
    );
}

/// Reproduction 6: credentials in URLs are never stored or shown: not in `runs show`,
/// `runs list --json`, nor the errors of an MCP server that cannot be reached.
#[test]
fn credentials_in_urls_are_neither_stored_nor_shown() {
    common::on_both_databases(
        "credentials_in_urls_are_neither_stored_nor_shown",
        |dir, db| {
            let out = llmchain_with_env(
                &[
                    "run",
                    "--db",
                    db,
                    "--no-builtin-tools",
                    "--base-url",
                    "http://u:PW1secret@127.0.0.1:9/v1?api-key=K1secret",
                    "--mcp-http",
                    "http://t:PW2secret@127.0.0.1:9/mcp?token=K2secret",
                    "hi",
                ],
                dir,
                &[("OPENAI_API_KEY", "sk-x")],
            );
            assert_ne!(out.status.code(), Some(0));
            let all = text(&out);
            for secret in ["PW1secret", "K1secret", "PW2secret", "K2secret"] {
                assert!(!all.contains(secret), "{secret} in {all}");
            }
            // The MCP server failed before any run was held; run with a reachable MCP-less
            // start so a run is recorded, and look at what is stored.
            let out = llmchain_with_env(
                &[
                    "run",
                    "--db",
                    db,
                    "--no-builtin-tools",
                    "--base-url",
                    "http://u:PW1secret@127.0.0.1:9/v1?api-key=K1secret",
                    "hi",
                ],
                dir,
                &[("OPENAI_API_KEY", "sk-x")],
            );
            assert_eq!(out.status.code(), Some(1), "{}", text(&out));
            let mut shown = text(&out);
            for args in [
                vec!["runs", "--db", db, "list", "--json"],
                vec!["runs", "--db", db, "list"],
            ] {
                shown.push_str(&text(&llmchain(&args, dir)));
            }
            let id = String::from_utf8_lossy(
                &llmchain(&["runs", "--db", db, "list", "--json"], dir).stdout,
            )
            .lines()
            .next()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .expect("the run is recorded");
            shown.push_str(&text(&llmchain(&["runs", "--db", db, "show", &id], dir)));
            shown.push_str(&text(&llmchain(
                &["runs", "--db", db, "show", "--json", &id],
                dir,
            )));
            for secret in ["PW1secret", "K1secret"] {
                assert!(!shown.contains(secret), "{secret} in {shown}");
            }
            assert!(
                shown.contains("http://127.0.0.1:9/v1?api-key=***"),
                "{shown}"
            );
            // The database's own bytes (SQLite: the file and its write-ahead log).
            if db.starts_with("sqlite") {
                let mut raw = std::fs::read(dir.join("queue.db")).unwrap();
                raw.extend(std::fs::read(dir.join("queue.db-wal")).unwrap_or_default());
                let raw = String::from_utf8_lossy(&raw);
                assert!(
                    !raw.contains("PW1secret") && !raw.contains("K1secret"),
                    "stored"
                );
            }
        },
    );
}

/// Reproduction 7: a `run` that fails while starting (no API key) leaves no `running`
/// run behind, and a later worker claims nothing nobody queued.
#[test]
fn a_failed_start_leaves_no_run_for_a_worker() {
    common::on_both_databases("a_failed_start_leaves_no_run_for_a_worker", |dir, db| {
        let out = llmchain(&["run", "--db", db, "--provider", "anthropic", "hi"], dir);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(text(&out).contains("ANTHROPIC_API_KEY"), "{}", text(&out));
        let list = llmchain(&["runs", "--db", db, "list", "--json"], dir);
        assert!(
            !String::from_utf8_lossy(&list.stdout).contains("\"running\""),
            "{}",
            text(&list)
        );
        let worker = drain(db, dir);
        assert!(text(&worker).contains("0 claimed"), "{}", text(&worker));
    });
}

/// Reproduction 8: `run -c` does not take over a queued run of the conversation: it
/// refuses and says how to cancel it; nothing is appended.
#[test]
fn run_c_refuses_while_a_queued_run_is_open() {
    common::on_both_databases("run_c_refuses_while_a_queued_run_is_open", |dir, db| {
        let queued = llmchain(&["run", "--enqueue", "--db", db, "first"], dir);
        assert!(queued.status.success(), "{}", text(&queued));
        let run_id = String::from_utf8_lossy(&queued.stdout).trim().to_owned();
        let out = llmchain_with_env(
            &[
                "run",
                "--db",
                db,
                "--base-url",
                "http://127.0.0.1:9/v1",
                "-c",
                "second",
            ],
            dir,
            &[("OPENAI_API_KEY", "sk-x")],
        );
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(
            text(&out).contains(&format!("llmchain runs cancel {run_id}")),
            "{}",
            text(&out)
        );
        let show = llmchain(&["runs", "--db", db, "show", "--json", &run_id], dir);
        let shown: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
        assert_eq!(shown["status"], "pending");
        let id = shown["conversation_id"].as_str().unwrap();
        assert_eq!(common::export(db, id, dir).messages.len(), 1);
    });
}

/// Reproductions 3 and 4, and the review inbox end to end from a second process: runs
/// queued under a profile whose policy is `auto` ask (`--approve ask` with --enqueue
/// makes it stricter); a worker with a terminal of its own never asks, it pauses them;
/// each review is answered by `llmchain reviews` (another process) naming its call; a
/// worker resumes each run: each tool ran once, with the decided arguments, and denials
/// are stored `denied`.
#[test]
fn queued_runs_wait_for_the_review_inbox() {
    common::on_both_databases("queued_runs_wait_for_the_review_inbox", |dir, db| {
        let test = "queued_runs_wait_for_the_review_inbox";
        let root = dir.join("files");
        std::fs::create_dir(&root).unwrap();
        let Some(files) = files_server_cmd(test, &root, 0) else {
            return;
        };
        // Each run: one call, then the answer. Runs are taken one at a time.
        let (base, _seen) = serve(bodies(&[
            write_call("c4", "q4.txt", "four"),
            write_call("c5", "q5.txt", "five"),
            write_call("c6", "q6.txt", "six"),
            ResponseScript::text("ok"),
            ResponseScript::text("ok"),
            ResponseScript::text("ok"),
        ]));
        write_config(
            dir,
            &format!(
                "base_url = \"{base}\"\nmodel = \"m\"\nmcp = [\"{files}\"]\nno_builtin_tools = true\n"
            ),
        );
        let mut runs = Vec::new();
        for q in ["q4", "q5", "q6"] {
            let out = llmchain(
                &["run", "--enqueue", "--db", db, "--approve", "ask", q],
                dir,
            );
            assert!(out.status.success(), "{}", text(&out));
            runs.push(String::from_utf8_lossy(&out.stdout).trim().to_owned());
        }
        let worker = llmchain(
            &[
                "worker",
                "--db",
                db,
                "--drain",
                "--poll-ms",
                "20",
                "--concurrency",
                "1",
            ],
            dir,
        );
        let worked = text(&worker);
        assert!(
            worked.contains("3 claimed, 3 paused for review"),
            "{worked}"
        );
        assert_eq!(
            worked.matches("1 call(s) wait for review").count(),
            3,
            "{worked}"
        );
        assert!(files_calls(&root).is_empty(), "nothing ran unreviewed");

        let list = llmchain(&["reviews", "--db", db, "list", "--json"], dir);
        let reviews: Vec<serde_json::Value> = String::from_utf8_lossy(&list.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(reviews.len(), 3, "{}", text(&list));
        let by_call = |call: &str| {
            reviews
                .iter()
                .find(|r| r["call_id"] == call)
                .unwrap_or_else(|| panic!("no review of {call}"))["id"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        // Only q5 is approved: only q5.txt may appear.
        let approve = llmchain(
            &[
                "reviews",
                "--db",
                db,
                "--by",
                "alice",
                "approve",
                &by_call("c5")[..8],
            ],
            dir,
        );
        assert!(approve.status.success(), "{}", text(&approve));
        assert!(
            text(&approve).contains("is queued again"),
            "{}",
            text(&approve)
        );
        let again = llmchain(&["reviews", "--db", db, "approve", &by_call("c5")], dir);
        assert_eq!(again.status.code(), Some(2), "{}", text(&again));
        assert!(text(&again).contains("not pending"), "{}", text(&again));
        // Arguments that break the tool's schema are refused, naming what is wrong, and
        // nothing is decided.
        for bad in [r#"{"path":"q6.txt"}"#, r#"{"path":"q6.txt","content":6}"#] {
            let refused = llmchain(&["reviews", "--db", db, "edit", &by_call("c6"), bad], dir);
            assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
            assert!(text(&refused).contains("do not fit"), "{}", text(&refused));
            assert!(text(&refused).contains("content"), "{}", text(&refused));
        }
        let edit = llmchain(
            &[
                "reviews",
                "--db",
                db,
                "edit",
                &by_call("c6"),
                r#"{"path":"q6.txt","content":"SIX"}"#,
            ],
            dir,
        );
        assert!(edit.status.success(), "{}", text(&edit));
        let deny = llmchain(
            &[
                "reviews",
                "--db",
                db,
                "deny",
                &by_call("c4"),
                "--reason",
                "not q4",
            ],
            dir,
        );
        assert!(deny.status.success(), "{}", text(&deny));

        let worker = drain(db, dir);
        assert!(
            text(&worker).contains("3 claimed, 3 done"),
            "{}",
            text(&worker)
        );
        let calls = files_calls(&root);
        assert_eq!(calls.len(), 2, "{calls:?}");
        assert!(!root.join("q4.txt").exists());
        assert_eq!(
            std::fs::read_to_string(root.join("q5.txt")).unwrap(),
            "five"
        );
        assert_eq!(std::fs::read_to_string(root.join("q6.txt")).unwrap(), "SIX");

        // What is stored is what ran.
        let show = |run: &str| {
            let out = llmchain(&["runs", "--db", db, "show", "--json", run], dir);
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(v["status"], "done", "{v}");
            let id = v["conversation_id"].as_str().unwrap().to_owned();
            let shown = text(&llmchain(&["conversations", "--db", db, "show", &id], dir));
            (common::export(db, &id, dir), shown)
        };
        let (c4, shown4) = show(&runs[0]);
        assert_eq!(c4.messages[1].tool_calls[0].execution_status(), "denied");
        assert!(shown4.contains("[denied]"), "{shown4}");
        assert_eq!(c4.messages[2].tool_results[0].content_text(), "not q4");
        let (c6, shown6) = show(&runs[2]);
        let call = &c6.messages[1].tool_calls[0];
        assert_eq!(call.arguments_as_map()["content"], "SIX");
        assert_eq!(call.original_arguments().unwrap()["content"], "six");
        assert!(shown6.contains("[edited at review"), "{shown6}");
        // The audit trail: who decided what.
        let all = llmchain(&["reviews", "--db", db, "list", "--all", "--json"], dir);
        let all: Vec<serde_json::Value> = String::from_utf8_lossy(&all.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let c5 = all.iter().find(|r| r["call_id"] == "c5").unwrap();
        assert_eq!(c5["status"], "approved");
        assert_eq!(c5["decided_by"], "alice");
        assert_eq!(
            all.iter().find(|r| r["call_id"] == "c4").unwrap()["status"],
            "denied"
        );
    });
}

/// Reproduction 2 (worker side): a worker's `auto` denial of a call that is not
/// read-only is stored `denied`, never `completed`.
#[test]
fn a_workers_auto_denial_is_stored_denied() {
    common::on_both_databases("a_workers_auto_denial_is_stored_denied", |dir, db| {
        let test = "a_workers_auto_denial_is_stored_denied";
        let root = dir.join("files");
        std::fs::create_dir(&root).unwrap();
        let Some(files) = files_server_cmd(test, &root, 0) else {
            return;
        };
        let (base, _seen) = serve(bodies(&[
            write_call("c1", "a.txt", "x"),
            ResponseScript::text("ok"),
        ]));
        write_config(
            dir,
            &format!("base_url = \"{base}\"\nmodel = \"m\"\nmcp = [\"{files}\"]\n"),
        );
        let out = llmchain(&["run", "--enqueue", "--db", db, "write"], dir);
        let run = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        assert!(drain(db, dir).status.success());
        assert!(files_calls(&root).is_empty());
        let v: serde_json::Value = serde_json::from_slice(
            &llmchain(&["runs", "--db", db, "show", "--json", &run], dir).stdout,
        )
        .unwrap();
        let c = common::export(db, v["conversation_id"].as_str().unwrap(), dir);
        assert_eq!(c.messages[1].tool_calls[0].execution_status(), "denied");
    });
}

/// Reproduction 9: with 3-second leases and an MCP server that takes 5 seconds to
/// start, the lease is kept from the claim on: the run completes once, none is lost.
#[test]
fn a_slow_mcp_start_does_not_lose_the_lease() {
    common::on_both_databases("a_slow_mcp_start_does_not_lose_the_lease", |dir, db| {
        let test = "a_slow_mcp_start_does_not_lose_the_lease";
        let root = dir.join("files");
        std::fs::create_dir(&root).unwrap();
        let Some(files) = files_server_cmd(test, &root, 5) else {
            return;
        };
        let (base, _seen) = serve(bodies(&[
            write_call("c1", "a.txt", "x"),
            ResponseScript::text("ok"),
        ]));
        write_config(
            dir,
            &format!(
                "base_url = \"{base}\"\nmodel = \"m\"\nmcp = [\"{files}\"]\napprove = \"always\"\nmcp_start_timeout = 60\n"
            ),
        );
        let out = llmchain(&["run", "--enqueue", "--db", db, "write"], dir);
        assert!(out.status.success(), "{}", text(&out));
        let worker = llmchain(
            &[
                "worker",
                "--db",
                db,
                "--drain",
                "--poll-ms",
                "20",
                "--lease-secs",
                "3",
            ],
            dir,
        );
        let worked = text(&worker);
        assert!(
            worked.contains("1 claimed, 1 done\n")
                || worked.trim_end().ends_with("1 claimed, 1 done"),
            "{worked}"
        );
        assert_eq!(files_calls(&root).len(), 1);
    });
}

/// The id of the first review `reviews list --json` shows.
fn first_review(db: &str, dir: &std::path::Path) -> String {
    let reviews = llmchain(&["reviews", "--db", db, "list", "--json"], dir);
    let line = String::from_utf8_lossy(&reviews.stdout)
        .lines()
        .next()
        .unwrap_or_else(|| panic!("no review listed: {}", text(&reviews)))
        .to_owned();
    let r: serde_json::Value = serde_json::from_str(&line).unwrap();
    r["id"].as_str().unwrap().to_owned()
}

/// `run --approve ask` without a terminal pauses (no one to ask): the call waits in
/// the inbox, an approval from another process is stored, and `conversations resume`
/// (with the servers and address given again) runs the call once and asks the model.
#[test]
fn an_interactive_run_without_a_terminal_waits_for_the_inbox() {
    let test = "an_interactive_run_without_a_terminal_waits_for_the_inbox";
    common::on_both_databases(test, |dir, db| {
        let root = dir.join("files");
        std::fs::create_dir(&root).unwrap();
        let Some(files) = files_server_cmd(test, &root, 0) else {
            return;
        };
        let (base, seen) = serve(bodies(&[
            write_call("c1", "a.txt", "x"),
            ResponseScript::text("Written."),
        ]));
        let run = |args: &[&str]| llmchain_with_env(args, dir, &[("OPENAI_BASE_URL", &base)]);
        let out = run(&[
            "run",
            "--db",
            db,
            "--approve",
            "ask",
            "--no-builtin-tools",
            "--mcp",
            &files,
            "write a.txt",
        ]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        let said = text(&out);
        assert!(
            said.contains("is paused: 1 call(s) wait for review"),
            "{said}"
        );
        assert!(files_calls(&root).is_empty());
        let list = llmchain(
            &["runs", "--db", db, "list", "--json", "--interactive"],
            dir,
        );
        let v: serde_json::Value = serde_json::from_str(
            String::from_utf8_lossy(&list.stdout)
                .lines()
                .next()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(v["status"], "paused");
        let conversation = v["conversation_id"].as_str().unwrap().to_owned();
        let approve = llmchain(
            &["reviews", "--db", db, "approve", &first_review(db, dir)],
            dir,
        );
        assert!(
            text(&approve).contains("conversations"),
            "{}",
            text(&approve)
        );
        // Paused still: an interactive run waits for its own process, not a worker.
        let worker = drain(db, dir);
        assert!(text(&worker).contains("0 claimed"), "{}", text(&worker));
        let out = run(&[
            "conversations",
            "--db",
            db,
            "resume",
            &conversation,
            "--mcp",
            &files,
        ]);
        assert!(out.status.success(), "{}", text(&out));
        assert!(text(&out).contains("ran c1"), "{}", text(&out));
        assert!(text(&out).contains("Written."), "{}", text(&out));
        assert_eq!(files_calls(&root).len(), 1);
        assert_eq!(seen.lock().unwrap().len(), 2);
    });
}

/// Round 5: a profile with an MCP server and `approve = "ask"`, run without a terminal,
/// pauses; after `reviews approve`, exactly the `conversations resume` llmchain printed
/// runs the call with the profile's server (it used to find only the built-in tools,
/// store the call `failed: … tool not found` and use up the approval).
#[test]
fn the_printed_resume_runs_an_approved_call_with_the_profiles_server() {
    let test = "the_printed_resume_runs_an_approved_call_with_the_profiles_server";
    common::on_both_databases(test, |dir, db| {
        let root = dir.join("files");
        std::fs::create_dir(&root).unwrap();
        let Some(files) = files_server_cmd(test, &root, 0) else {
            return;
        };
        let (base, seen) = serve(bodies(&[
            write_call("c1", "a.txt", "x"),
            ResponseScript::text("Written."),
        ]));
        write_config(
            dir,
            &format!(
                "base_url = \"{base}\"\nmodel = \"m\"\nmcp = [\"{files}\"]\n\
                 no_builtin_tools = true\napprove = \"ask\"\n"
            ),
        );
        let out = llmchain(&["run", "--db", db, "write a.txt"], dir);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        let said = text(&out);
        let printed = said
            .split("then go on with `")
            .nth(1)
            .and_then(|rest| rest.split('`').next())
            .unwrap_or_else(|| panic!("no resume command in: {said}"))
            .to_owned();
        let approved = llmchain(
            &["reviews", "--db", db, "approve", &first_review(db, dir)],
            dir,
        );
        assert!(approved.status.success(), "{}", text(&approved));
        let mut words: Vec<&str> = printed.split_whitespace().collect();
        assert_eq!(words[0], "llmchain", "{printed}");
        // The printed `--db` is the URL with its credentials and options redacted (a
        // secret never reaches a terminal); the person puts theirs back, and so do we.
        if let Some(at) = words.iter().position(|w| *w == "--db") {
            assert!(
                !printed.contains(":llmchain@"),
                "a password was printed: {printed}"
            );
            words[at + 1] = db;
        }
        let out = llmchain(&words[1..], dir);
        assert!(out.status.success(), "{printed}: {}", text(&out));
        assert!(text(&out).contains("ran c1"), "{}", text(&out));
        assert!(!text(&out).contains("not found"), "{}", text(&out));
        assert_eq!(files_calls(&root).len(), 1, "the approved call ran once");
        assert!(text(&out).contains("Written."), "{}", text(&out));
        assert_eq!(seen.lock().unwrap().len(), 2);
    });
}

/// The worker's own flags define its profile "default": with no config file, `worker
/// --base-url URL --model M` runs a run queued under "default" against that server.
#[test]
fn a_workers_flags_define_its_default_profile() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_of(dir.path());
    let (base, seen) = serve(bodies(&[ResponseScript::text("hello")]));
    let out = llmchain(&["run", "--enqueue", "--db", &db, "hi"], dir.path());
    assert!(out.status.success(), "{}", text(&out));
    let worker = llmchain(
        &[
            "worker",
            "--db",
            &db,
            "--drain",
            "--poll-ms",
            "20",
            "--base-url",
            &base,
            "--model",
            "flag-model",
        ],
        dir.path(),
    );
    assert!(
        text(&worker).contains("1 claimed, 1 done"),
        "{}",
        text(&worker)
    );
    assert_eq!(seen.lock().unwrap()[0].1["model"], "flag-model");
}

/// A worker that starts while its database cannot be reached retries instead of
/// exiting, and gives up with a clear error after --connect-timeout.
#[test]
fn a_worker_waits_for_its_database() {
    let dir = tempfile::tempdir().unwrap();
    let out = llmchain(
        &[
            "worker",
            "--db",
            "postgres://u:PWsecret@127.0.0.1:9/db",
            "--drain",
            "--connect-timeout",
            "2",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("retrying in"), "{said}");
    assert!(said.contains("gave up after"), "{said}");
    assert!(!said.contains("PWsecret"), "{said}");
}

/// R5: while another process holds the conversation's run, `resume` refuses, and the
/// outstanding call does not run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_is_refused_while_another_process_holds_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("held.db").display());
    let store = AnyStore::open(&db).await.unwrap();
    let mut c = Conversation::new();
    c.messages.push(Message::user("what time is it?"));
    c.messages.push(Message::assistant_with_calls(
        "",
        vec![llmchain::message::ToolCall::function("call_1", "clock", "{}").unwrap()],
    ));
    let id = store
        .create_conversation(NewConversation::from_conversation(c))
        .await
        .unwrap();
    let held = store
        .claim_conversation(
            &id,
            "other-process",
            Duration::from_secs(30),
            &RunState::default(),
        )
        .await
        .unwrap();

    let path = dir.path().to_owned();
    let (db2, id2) = (db.clone(), id.clone());
    let out = tokio::task::spawn_blocking(move || {
        llmchain(&["conversations", "--db", &db2, "resume", &id2], &path)
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("is being run by \"other-process\""),
        "{}",
        text(&out)
    );
    let stored = store.get_conversation(&id).await.unwrap().unwrap();
    assert_eq!(stored.conversation.messages.len(), 2, "nothing ran");

    // Once released, resume runs the call.
    let mut done = held.state.clone();
    done.status = llmchain_store::RunStatus::Done;
    store
        .complete_run(&held.lease().unwrap(), &done)
        .await
        .unwrap();
    let path = dir.path().to_owned();
    let out = tokio::task::spawn_blocking(move || {
        llmchain(&["conversations", "--db", &db, "resume", &id], &path)
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("ran call_1"), "{}", text(&out));
}

/// A profile that names a schema makes the worker's runs answer typed: the provider is
/// asked for it, a wrong answer is sent back, and the stored answer is the checked one.
#[test]
fn a_worker_runs_a_typed_profile() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let db = db_of(dir);
    std::fs::write(
        dir.join("ticket.json"),
        r#"{"title": "Ticket", "type": "object",
            "properties": {"priority": {"enum": ["low", "high"]}, "summary": {"type": "string"}},
            "required": ["priority", "summary"]}"#,
    )
    .unwrap();
    let (base, seen) = serve(bodies(&[
        ResponseScript::text(r#"{"priority": "urgent", "summary": "Printer on fire"}"#),
        ResponseScript::text(r#"{"priority": "high", "summary": "Printer on fire"}"#),
    ]));
    write_config(
        dir,
        &format!(
            "[profiles.triage]\nbase_url = \"{base}\"\nmodel = \"m\"\nno_builtin_tools = true\n\
             schema = \"{}\"\n",
            dir.join("ticket.json").display()
        ),
    );
    let queued = llmchain(
        &[
            "run",
            "--enqueue",
            "--db",
            &db,
            "--profile",
            "triage",
            "The printer is on fire",
        ],
        dir,
    );
    assert!(queued.status.success(), "{}", text(&queued));
    let out = drain(&db, dir);
    assert!(out.status.success(), "{}", text(&out));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "a wrong answer was sent back: {seen:?}");
    assert_eq!(
        seen[0].1["response_format"]["json_schema"]["name"],
        "Ticket"
    );
    let told = seen[1].1["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .to_string();
    assert!(told.contains("/priority"), "{told}");
    let list = llmchain(&["runs", "--db", &db, "list"], dir);
    assert!(text(&list).contains("done"), "{}", text(&list));
}

//! The chaos suite's chat server (issue 36): `llmchain serve` answering many chats at
//! once, each of which calls a non-idempotent tool, while the server is SIGKILLed and
//! started again, over and over, at whatever point each chat happens to be. Afterwards
//! every chat is answered at once (no chat stays blocked by a dead server's lease), no
//! call ran twice, and every conversation is one a strict provider accepts (the model
//! server refuses unpaired calls, as OpenAI does). `LLMCHAIN_CHAOS_CHATS` and
//! `LLMCHAIN_CHAOS_KILLS` make it longer (`scripts/fault-suite.sh`).

mod common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::response::Response;
use common::{Served, files_server_cmd, post_chat, user_message, write_config};
use llmchain::provider::Format;
use llmchain::provider::render::{ResponseScript, render_stream};
use llmchain_store::{AnyStore, Store};

fn setting(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A model server that answers by what it is asked: a chat's first message with a call
/// to `write_file` of the chat's own file, a tool result with text streamed slowly (a
/// window for the kills), a "status" message with text; a request with a call left
/// without its result with OpenAI's 400.
fn model_server() -> String {
    let calls = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let app = Router::new().fallback(move |body: Bytes| {
                let calls = calls.clone();
                async move {
                    let request: serde_json::Value =
                        serde_json::from_slice(&body).unwrap_or_default();
                    if let Some(why) = common::unpaired(&request) {
                        return Response::builder()
                            .status(StatusCode::BAD_REQUEST)
                            .body(Body::from(
                                serde_json::json!({"error": {"message": why}}).to_string(),
                            ))
                            .unwrap();
                    }
                    let last = request["messages"]
                        .as_array()
                        .and_then(|m| m.last())
                        .cloned()
                        .unwrap_or_default();
                    let text = last["content"].as_str().unwrap_or("").to_owned();
                    let script = if last["role"] == "user" && text.starts_with("chat-") {
                        let n = calls.fetch_add(1, Ordering::SeqCst);
                        ResponseScript::tool_call(
                            format!("call_{n}"),
                            "write_file",
                            serde_json::json!({"path": format!("{text}.txt"), "content": text})
                                .to_string(),
                        )
                    } else {
                        ResponseScript::text(
                            "Done: the file is written, and this answer takes a while to stream.",
                        )
                    };
                    let sse =
                        String::from_utf8(render_stream(Format::OPENAI_CHAT, &script).unwrap())
                            .unwrap();
                    let events: Vec<String> =
                        sse.split_inclusive("\n\n").map(str::to_owned).collect();
                    use futures_util::StreamExt;
                    let chunks = futures_util::stream::iter(events).then(|e| async move {
                        tokio::time::sleep(Duration::from_millis(15)).await;
                        Ok::<_, std::io::Error>(Bytes::from(e))
                    });
                    Response::builder()
                        .header("content-type", "text/event-stream")
                        .body(Body::from_stream(chunks))
                        .unwrap()
                }
            });
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    format!("http://{}/v1", rx.recv().unwrap())
}

/// One chat message posted to the server; the whole answer (empty when the connection
/// failed: the server was being killed).
fn post(base: &str, chat: &str, text: &str) -> String {
    post_chat(base, &user_message(chat, &format!("{chat}-{text}"), text))
}

#[test]
fn chats_survive_a_server_killed_and_restarted_under_load() {
    let chats = setting("LLMCHAIN_CHAOS_CHATS", 16);
    let kills = setting("LLMCHAIN_CHAOS_KILLS", 6);
    common::on_both_databases(
        "chats_survive_a_server_killed_and_restarted_under_load",
        |dir, db| {
            let root = dir.join("files");
            std::fs::create_dir_all(&root).unwrap();
            let Some(files) = files_server_cmd("serve_chaos", &root, 0) else {
                return;
            };
            let base = model_server();
            write_config(
                dir,
                &format!(
                    "base_url = \"{base}\"\nmodel = \"m\"\nmcp = [\"{files}\"]\nno_builtin_tools = true\n\
                 approve = \"always\"\n"
                ),
            );
            let served = Arc::new(Mutex::new(Served::start(dir, &["--db", db])));
            let url = served.lock().unwrap().base.clone();
            // Four clients, each going through its share of the chats, while the server is
            // killed and started again.
            let next = Arc::new(AtomicUsize::new(0));
            let clients: Vec<_> = (0..4)
                .map(|_| {
                    let (next, url) = (next.clone(), url.clone());
                    std::thread::spawn(move || {
                        loop {
                            let n = next.fetch_add(1, Ordering::SeqCst);
                            if n >= chats {
                                return;
                            }
                            // Until the server took the message (it may be down for a
                            // moment); an answer cut by a kill is left as it is.
                            for _ in 0..400 {
                                if !post(&url, &format!("c{n}"), &format!("chat-{n}")).is_empty() {
                                    break;
                                }
                                std::thread::sleep(Duration::from_millis(25));
                            }
                        }
                    })
                })
                .collect();
            for _ in 0..kills {
                std::thread::sleep(Duration::from_millis(400));
                served.lock().unwrap().restart();
            }
            for c in clients {
                c.join().unwrap();
            }
            // Every chat goes on at once: answered, no error, no wait for a dead lease.
            for n in 0..chats {
                let started = Instant::now();
                let answer = post(&url, &format!("c{n}"), "status?");
                assert!(
                    answer.starts_with("HTTP/1.1 200") && !answer.contains("\"type\":\"error\""),
                    "chat c{n}: {answer}\n{}",
                    served.lock().unwrap().log()
                );
                assert!(answer.contains("Done"), "chat c{n}: {answer}");
                assert!(
                    started.elapsed() < Duration::from_secs(20),
                    "chat c{n} waited for a dead server's lease"
                );
            }
            // No call ran twice.
            let started = std::fs::read_to_string(root.join(".started")).unwrap_or_default();
            let mut runs: HashMap<String, usize> = HashMap::new();
            for line in started.lines() {
                let args: serde_json::Value = serde_json::from_str(line).unwrap();
                *runs
                    .entry(args["path"].as_str().unwrap().to_owned())
                    .or_default() += 1;
            }
            for (path, n) in &runs {
                assert_eq!(*n, 1, "{path} was written {n} times");
            }
            // Every conversation pairs its calls and results.
            let db = db.to_owned();
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let store = AnyStore::open(&db).await.unwrap();
                for c in store.list_conversations(1000).await.unwrap() {
                    let stored = store.get_conversation(&c.id).await.unwrap().unwrap();
                    assert!(
                        stored.conversation.inconsistencies().is_empty(),
                        "{}: {:?}",
                        c.id,
                        stored.conversation.inconsistencies()
                    );
                }
            });
            eprintln!(
                "serve chaos: {chats} chats, {kills} kills, {} calls ran once each",
                runs.len()
            );
        },
    );
}

/// Issue 36's fourth reproduction: at the common limit of 1,024 open files, 1,100
/// connections that never send a byte used to stop the server answering anyone. Now the
/// connections it serves are capped below its file limit and a silent one is closed
/// after the header timeout: a request sent behind the flood is answered.
#[test]
fn a_flood_of_silent_connections_at_the_file_limit_does_not_stop_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    write_config(dir, "base_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n");
    let db = format!("sqlite://{}", dir.join("chats.db").display());
    let served = Served::start_limited(dir, &["--db", &db], Some(1024));
    let addr = served.base.trim_start_matches("http://").to_owned();
    let mut silent = Vec::new();
    for _ in 0..1_100 {
        match std::net::TcpStream::connect(&addr) {
            Ok(s) => silent.push(s),
            // This test's own file limit: the flood is as large as it can be.
            Err(_) => break,
        }
    }
    assert!(
        silent.len() >= 900,
        "only {} connections opened",
        silent.len()
    );
    let started = Instant::now();
    let mut tcp = std::net::TcpStream::connect(&addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        tcp,
        "GET /api/chats HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    let _ = tcp.read_to_string(&mut answer);
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "not answered behind {} silent connections ({:?}): {answer:?}\n{}",
        silent.len(),
        started.elapsed(),
        served.log()
    );
    drop(silent);
}

//! `llmchain run` against a local server speaking OpenAI Chat Completions.

use std::collections::VecDeque;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use llmchain::provider::Format;
use llmchain::provider::render::{ResponseScript, render_stream};

type Seen = Arc<Mutex<Vec<(String, serde_json::Value)>>>;

/// Serves the scripted SSE bodies in order on a background thread.
fn serve(bodies: Vec<Vec<u8>>) -> (String, Seen) {
    let queue = Arc::new(Mutex::new(VecDeque::from(bodies)));
    let seen: Seen = Arc::default();
    let (tx, rx) = std::sync::mpsc::channel();
    let s = seen.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let app = Router::new().fallback(move |uri: Uri, body: Bytes| {
                let queue = queue.clone();
                let s = s.clone();
                async move {
                    s.lock().unwrap().push((
                        uri.to_string(),
                        serde_json::from_slice(&body).unwrap_or_default(),
                    ));
                    let next = queue.lock().unwrap().pop_front();
                    match next {
                        Some(b) => Response::builder()
                            .header("content-type", "text/event-stream")
                            .body(Body::from(b))
                            .unwrap(),
                        None => Response::builder()
                            .status(StatusCode::INTERNAL_SERVER_ERROR)
                            .body(Body::from(r#"{"error":{"message":"no more replies"}}"#))
                            .unwrap(),
                    }
                }
            });
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    let addr = rx.recv().unwrap();
    (format!("http://{addr}/v1"), seen)
}

fn llmchain(args: &[&str], dir: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_llmchain"))
        .args(args)
        .current_dir(dir)
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("ANTHROPIC_BASE_URL")
        .output()
        .expect("the binary runs")
}

#[test]
fn run_streams_text_and_tool_activity_and_reports_usage() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "Ship on Friday.\n").unwrap();
    let first = ResponseScript::tool_call("call_1", "read_file", r#"{"path":"notes.txt"}"#)
        .with_text("Reading your notes.")
        .with_usage(50, 10);
    let second = ResponseScript::text("Your notes say: ship on Friday.").with_usage(80, 9);
    let (base, seen) = serve(vec![
        render_stream(Format::OpenAiChat, &first).unwrap(),
        render_stream(Format::OpenAiChat, &second).unwrap(),
    ]);
    let out = llmchain(
        &[
            "run",
            "--base-url",
            &base,
            "--model",
            "local-model",
            "--system",
            "Be brief.",
            "Summarise notes.txt",
        ],
        dir.path(),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("Your notes say: ship on Friday."),
        "{stdout}"
    );
    assert!(
        stderr.contains("→ read_file({\"path\":\"notes.txt\"})"),
        "{stderr}"
    );
    assert!(stderr.contains("✓ read_file: Ship on Friday."), "{stderr}");
    assert!(
        stderr.contains("usage: 130 input / 19 output tokens in 2 model call(s)"),
        "{stderr}"
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].0, "/v1/chat/completions");
    assert_eq!(seen[0].1["model"], "local-model");
    assert_eq!(seen[0].1["messages"][0]["content"], "Be brief.");
    // The tool result went back to the model.
    let msgs = seen[1].1["messages"].as_array().unwrap();
    assert!(
        msgs.iter()
            .any(|m| m["role"] == "tool" && m["content"].to_string().contains("Ship on Friday."))
    );
}

#[test]
fn a_missing_key_says_what_to_set() {
    let dir = tempfile::tempdir().unwrap();
    let out = llmchain(&["run", "--provider", "anthropic", "hello"], dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("ANTHROPIC_API_KEY"), "{stderr}");
}

#[test]
fn an_unreachable_server_says_what_to_set() {
    let dir = tempfile::tempdir().unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let base = format!("http://127.0.0.1:{port}/v1");
    let out = llmchain(&["run", "--base-url", &base, "hello"], dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("could not reach openai"), "{stderr}");
    assert!(stderr.contains("OPENAI_BASE_URL"), "{stderr}");
}

#[test]
fn an_unknown_provider_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = llmchain(&["run", "--provider", "nope", "hello"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown --provider 'nope'"));
}

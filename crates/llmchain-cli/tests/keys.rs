//! `llmchain keys`: a key stored from stdin goes into a 0600 file, reaches the provider
//! in its auth header, and never the terminal or the database; the environment wins; a
//! file others may read is refused; `remove` forgets it.

mod common;

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::http::HeaderMap;
use axum::response::Response;
use common::llmchain_command;
use llmchain::provider::Format;
use llmchain::provider::render::{ResponseScript, render_stream};

/// A model server recording each request's `Authorization` header.
fn server() -> (String, Arc<Mutex<Vec<String>>>) {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let s = seen.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let app = Router::new().fallback(move |headers: HeaderMap| {
                let s = s.clone();
                async move {
                    s.lock().unwrap().push(
                        headers
                            .get("authorization")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or("")
                            .to_owned(),
                    );
                    let body = render_stream(Format::OPENAI_CHAT, &ResponseScript::text("Hello."))
                        .unwrap();
                    Response::builder()
                        .header("content-type", "text/event-stream")
                        .body(Body::from(body))
                        .unwrap()
                }
            });
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    (format!("http://{}/v1", rx.recv().unwrap()), seen)
}

fn run(
    dir: &std::path::Path,
    args: &[&str],
    stdin: &str,
    env: &[(&str, &str)],
) -> (i32, String, String) {
    use std::io::Write;
    let mut child = llmchain_command(args, dir)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const KEY: &str = "sk-from-the-keys-file-4242";

#[test]
fn a_stored_key_is_used_never_shown_and_the_environment_wins() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (code, out, err) = run(d, &["keys", "set", "openai"], &format!("{KEY}\n"), &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains(KEY) && !err.contains(KEY), "{out}{err}");
    let file = d.join("llmchain/keys.json");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let (_, out, _) = run(d, &["keys", "list"], "", &[]);
    assert!(
        out.contains("openai") && out.contains("keys file") && !out.contains(KEY),
        "{out}"
    );

    // A run uses it: the server sees it; the database does not hold it.
    let (base, seen) = server();
    let db = format!("sqlite://{}", d.join("k.db").display());
    let (code, out, err) = run(d, &["run", "--base-url", &base, "--db", &db, "hi"], "", &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Hello.") && !out.contains(KEY) && !err.contains(KEY));
    assert_eq!(
        seen.lock().unwrap().last().unwrap(),
        &format!("Bearer {KEY}")
    );
    let stored = std::fs::read(d.join("k.db")).unwrap();
    assert!(
        !stored.windows(KEY.len()).any(|w| w == KEY.as_bytes()),
        "the key is in the database"
    );

    // The environment wins.
    let env = [("OPENAI_API_KEY", "sk-env-1")];
    let (code, _, _) = run(
        d,
        &["run", "--base-url", &base, "--db", &db, "hi"],
        "",
        &env,
    );
    assert_eq!(code, 0);
    assert_eq!(seen.lock().unwrap().last().unwrap(), "Bearer sk-env-1");
    let (_, out, _) = run(d, &["keys", "list"], "", &env);
    assert!(
        out.contains("OPENAI_API_KEY (environment; the keys file's is not used)"),
        "{out}"
    );

    // A file others may read is refused, saying how to fix it.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let (code, _, err) = run(d, &["run", "--base-url", &base, "--db", &db, "hi"], "", &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("chmod 600"), "{err}");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    }

    // Bad input and providers without keys say so.
    let (code, _, err) = run(d, &["keys", "set", "openai"], "two words\n", &[]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run(d, &["keys", "set", "ollama"], "x\n", &[]);
    assert_eq!(code, 2);
    assert!(err.contains("takes no key"), "{err}");

    let (code, _, _) = run(d, &["keys", "remove", "openai"], "", &[]);
    assert_eq!(code, 0);
    let (_, out, _) = run(d, &["keys", "list"], "", &[]);
    assert!(out.trim().is_empty(), "{out}");
    let (code, _, err) = run(d, &["keys", "remove", "openai"], "", &[]);
    assert_eq!(code, 2);
    assert!(err.contains("no key stored for openai"), "{err}");
}

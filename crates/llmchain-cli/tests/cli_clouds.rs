//! A whole `llmchain run` with a tool call through each cloud provider, configured the way
//! a user does it (environment variables, key files), against local servers that check
//! what they receive: `--provider bedrock` (SigV4 verified by botocore), `vertex` and
//! `vertex-anthropic` (a service-account JWT verified by PyJWT, then only the tokens that
//! server issued), and `azure` (the `api-key` header and the v1 route).
//!
//! The Bedrock and Vertex servers need `LLMCHAIN_TEST_CLOUD_PYTHON` (`.ci/third-party`);
//! without it those tests print `SKIPPED`.

mod common;

use common::cloud_mock::{CloudMock, python as cloud_python};
use common::{cloud_server, llmchain_with_env, serve};
use llmchain::provider::Format;
use llmchain::provider::render::{ResponseScript, render_stream};
use serde_json::{Value, json};

const NOTES: &str = "Ship on Friday.\n";

fn workdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), NOTES).unwrap();
    dir
}

/// Runs the turn and checks what the terminal shows: the call, its result, the answer.
fn run(dir: &std::path::Path, provider: &str, model: &str, env: &[(&str, &str)]) {
    let out = llmchain_with_env(
        &[
            "run",
            "--provider",
            provider,
            "--model",
            model,
            "Summarise notes.txt",
        ],
        dir,
        env,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{provider}: {stdout}\n{stderr}");
    assert!(
        stderr.contains("→ read_file({\"path\":\"notes.txt\"})"),
        "{provider}: {stderr}"
    );
    assert!(
        stderr.contains("✓ read_file: Ship on Friday."),
        "{provider}: {stderr}"
    );
    assert!(
        stdout.contains("Your notes say: ship on Friday."),
        "{provider}: {stdout}"
    );
}

/// The model requests a server logged (not its token requests).
fn model_requests(mock: &CloudMock) -> Vec<Value> {
    mock.requests()
        .into_iter()
        .filter(|r| r["path"] != "/token")
        .collect()
}

#[test]
fn run_with_bedrock_signs_calls_a_tool_and_sends_its_result_back() {
    let test = "run_with_bedrock_signs_calls_a_tool_and_sends_its_result_back";
    let Some(python) = cloud_python(test) else {
        return;
    };
    let ev = |kind: &str, payload: Value| json!({"type": kind, "payload": payload});
    let dir = workdir();
    let script = json!({
        "credentials": {"access_key": "AKIAEXAMPLE", "secret_key": "secret/EXAMPLE+key",
                        "region": "eu-west-1"},
        "turns": [
            {"stream": [
                ev("messageStart", json!({"role": "assistant"})),
                ev("contentBlockStart", json!({"contentBlockIndex": 0,
                    "start": {"toolUse": {"toolUseId": "tooluse_n1", "name": "read_file"}}})),
                ev("contentBlockDelta", json!({"contentBlockIndex": 0,
                    "delta": {"toolUse": {"input": "{\"path\":"}}})),
                ev("contentBlockDelta", json!({"contentBlockIndex": 0,
                    "delta": {"toolUse": {"input": "\"notes.txt\"}"}}})),
                ev("contentBlockStop", json!({"contentBlockIndex": 0})),
                ev("messageStop", json!({"stopReason": "tool_use"})),
                ev("metadata", json!({"usage": {"inputTokens": 50, "outputTokens": 10, "totalTokens": 60}})),
            ], "split": 9},
            {"stream": [
                ev("messageStart", json!({"role": "assistant"})),
                ev("contentBlockDelta", json!({"contentBlockIndex": 0,
                    "delta": {"text": "Your notes say: ship on Friday."}})),
                ev("contentBlockStop", json!({"contentBlockIndex": 0})),
                ev("messageStop", json!({"stopReason": "end_turn"})),
            ]},
        ]
    });
    let mock = CloudMock::start(
        &python,
        &cloud_server("bedrock_server.py"),
        &script,
        dir.path(),
    );
    let home = dir.path().display().to_string();
    run(
        dir.path(),
        "bedrock",
        "anthropic.claude-3-5-sonnet-20241022-v2:0",
        &[
            ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", &mock.base),
            ("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE"),
            ("AWS_SECRET_ACCESS_KEY", "secret/EXAMPLE+key"),
            ("AWS_REGION", "eu-west-1"),
            ("HOME", &home),
        ],
    );
    let seen = model_requests(&mock);
    assert_eq!(seen.len(), 2, "{seen:#?}");
    for r in &seen {
        assert_eq!(r["auth"], "sigv4-ok", "{r}");
        assert_eq!(
            r["path"],
            "/model/anthropic.claude-3-5-sonnet-20241022-v2%3A0/converse-stream"
        );
    }
    let result = &seen[1]["body"]["messages"][2]["content"][0]["toolResult"];
    assert_eq!(result["toolUseId"], "tooluse_n1", "{}", seen[1]["body"]);
    assert!(result["content"].to_string().contains("Ship on Friday."));
}

/// A service-account key whose token URI is `mock`'s.
fn key_file(python: &str, dir: &std::path::Path) -> (Value, String) {
    let made = std::process::Command::new(python)
        .arg(cloud_server("vertex_server.py"))
        .arg("--make-key")
        .arg(dir.join("key"))
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let sa: Value =
        serde_json::from_slice(&std::fs::read(dir.join("key/sa.json")).unwrap()).unwrap();
    (sa, dir.join("key/public.pem").display().to_string())
}

/// Runs `provider` on Vertex with the two turns, a key file and a location.
fn run_on_vertex(test: &str, provider: &str, model: &str, turns: Value) -> Option<Vec<Value>> {
    let python = cloud_python(test)?;
    let dir = workdir();
    let (mut sa, public) = key_file(&python, dir.path());
    let script = json!({"client_email": sa["client_email"], "private_key_id": sa["private_key_id"],
                        "public_key_pem": public, "turns": turns});
    let mock = CloudMock::start(
        &python,
        &cloud_server("vertex_server.py"),
        &script,
        dir.path(),
    );
    sa["token_uri"] = json!(format!("{}/token", mock.base));
    let key = dir.path().join("key/sa.json");
    std::fs::write(&key, sa.to_string()).unwrap();
    let key = key.display().to_string();
    run(
        dir.path(),
        provider,
        model,
        &[
            ("GOOGLE_VERTEX_BASE_URL", &mock.base),
            ("GOOGLE_APPLICATION_CREDENTIALS", &key),
            ("GOOGLE_VERTEX_LOCATION", "europe-west4"),
        ],
    );
    let all = mock.requests();
    let tokens = all.iter().filter(|r| r["path"] == "/token").count();
    assert_eq!(tokens, 1, "one token for the whole run: {all:#?}");
    let seen = model_requests(&mock);
    assert_eq!(seen.len(), 2, "{seen:#?}");
    for r in &seen {
        assert_eq!(r["auth"], "bearer-ok", "{r}");
        assert_eq!(r["route"]["project"], "llmchain-test");
        assert_eq!(r["route"]["location"], "europe-west4");
    }
    Some(seen)
}

fn sse(chunks: &[Value]) -> String {
    chunks
        .iter()
        .map(|c| format!("data: {c}\r\n\r\n"))
        .collect()
}

#[test]
fn run_with_vertex_gemini_and_a_service_account_calls_a_tool() {
    let call = sse(&[
        json!({"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": "read_file", "args": {"path": "notes.txt"}}}]},
        "finishReason": "STOP"}]}),
    ]);
    let text = sse(&[
        json!({"candidates": [{"content": {"role": "model", "parts": [
        {"text": "Your notes say: ship on Friday."}]}, "finishReason": "STOP"}]}),
    ]);
    let Some(seen) = run_on_vertex(
        "run_with_vertex_gemini_and_a_service_account_calls_a_tool",
        "vertex",
        "gemini-2.5-flash",
        json!([{"sse": call, "split": 13}, {"sse": text}]),
    ) else {
        return;
    };
    assert_eq!(seen[0]["route"]["method"], "streamGenerateContent");
    let parts = &seen[1]["body"]["contents"][2]["parts"][0]["functionResponse"];
    assert_eq!(parts["name"], "read_file", "{}", seen[1]["body"]);
    assert!(parts.to_string().contains("Ship on Friday."));
}

#[test]
fn run_with_vertex_anthropic_calls_a_tool() {
    let event = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let call = [
        event("message_start", json!({"type": "message_start", "message": {"id": "msg_v1",
            "type": "message", "role": "assistant", "model": "claude", "content": [],
            "usage": {"input_tokens": 40, "output_tokens": 1}}})),
        event("content_block_start", json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_v1", "name": "read_file", "input": {}}})),
        event("content_block_delta", json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": "{\"path\":\"notes.txt\"}"}})),
        event("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
        event("message_delta", json!({"type": "message_delta",
            "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 8}})),
        event("message_stop", json!({"type": "message_stop"})),
    ]
    .concat();
    let text = [
        event(
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_v2",
            "type": "message", "role": "assistant", "model": "claude", "content": [],
            "usage": {"input_tokens": 60, "output_tokens": 1}}}),
        ),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
        ),
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": "Your notes say: ship on Friday."}}),
        ),
        event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        event(
            "message_delta",
            json!({"type": "message_delta",
            "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 9}}),
        ),
        event("message_stop", json!({"type": "message_stop"})),
    ]
    .concat();
    let Some(seen) = run_on_vertex(
        "run_with_vertex_anthropic_calls_a_tool",
        "vertex-anthropic",
        "claude-sonnet-4-5@20250929",
        json!([{"sse": call, "split": 5}, {"sse": text}]),
    ) else {
        return;
    };
    assert_eq!(seen[0]["route"]["method"], "streamRawPredict");
    assert_eq!(seen[0]["route"]["publisher"], "anthropic");
    let blocks = seen[1]["body"]["messages"][2]["content"].to_string();
    assert!(
        blocks.contains("toolu_v1") && blocks.contains("Ship on Friday."),
        "{blocks}"
    );
}

#[test]
fn run_with_azure_sends_the_api_key_to_the_v1_route() {
    let dir = workdir();
    let first = ResponseScript::tool_call("call_1", "read_file", r#"{"path":"notes.txt"}"#);
    let second = ResponseScript::text("Your notes say: ship on Friday.");
    let (base, seen) = serve(vec![
        render_stream(Format::OPENAI_CHAT, &first).unwrap(),
        render_stream(Format::OPENAI_CHAT, &second).unwrap(),
    ]);
    // The helper's base ends in /v1; Azure's endpoint is the resource's root.
    let root = base.trim_end_matches("/v1");
    run(
        dir.path(),
        "azure",
        "my-gpt-deployment",
        &[
            ("AZURE_OPENAI_ENDPOINT", root),
            ("AZURE_OPENAI_API_KEY", "azure-key-abcdef"),
        ],
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    for (path, body) in seen.iter() {
        assert_eq!(path, "/openai/v1/chat/completions");
        assert_eq!(body["model"], "my-gpt-deployment");
    }
}

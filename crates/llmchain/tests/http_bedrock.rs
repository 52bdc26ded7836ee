//! The HTTP client against a scripted Bedrock Runtime (`tests/servers/bedrock_server.py`)
//! that checks every request with independent code: botocore's own SigV4 signer
//! re-signs what arrived and compares, and the stream's frames come from an encoder of
//! the server's own. Model ids with `:` and `/` (an inference-profile ARN) sign
//! correctly; credentials come from the environment and from the shared files; a Bedrock
//! API key goes as a bearer token; ConverseStream split in 5-byte pieces decodes; an
//! exception frame and an HTTP error are typed errors; a corrupt frame is a clear one.
//!
//! Needs `LLMCHAIN_TEST_CLOUD_PYTHON` (a Python with botocore: `.ci/third-party`), else
//! it prints `SKIPPED`.

use llmchain::chain::{ChatModel, ModelError, collect_stream};
use llmchain::conversation::Conversation;
use llmchain::http::aws::BEDROCK;
use llmchain::http::{HttpModel, HttpModelConfig, RetryPolicy};
use llmchain::message::Message;
use llmchain::provider::StopReason;
use serde_json::{Value, json};

#[path = "servers/cloud_mock.rs"]
mod cloud_mock;

use cloud_mock::CloudMock;

struct Mock {
    server: CloudMock,
    base: String,
    _dir: tempfile::TempDir,
}

impl Mock {
    fn start(test: &str, script: Value) -> Option<Mock> {
        let python = cloud_mock::python(test)?;
        let dir = tempfile::tempdir().unwrap();
        let server = CloudMock::start(
            &python,
            std::path::Path::new(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/servers/bedrock_server.py"
            )),
            &script,
            dir.path(),
        );
        Some(Mock {
            base: server.base.clone(),
            server,
            _dir: dir,
        })
    }

    fn requests(&self) -> Vec<Value> {
        self.server.requests()
    }
}

const KEY: &str = "AKIAIOSFODNN7EXAMPLE";
const SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
const TOKEN: &str = "FwoGZXIvYXdzEBYaDHsessiontoken+/=";

fn credentials() -> Value {
    json!({"access_key": KEY, "secret_key": SECRET, "session_token": TOKEN,
           "region": "us-west-2", "bearer": "ABSKbedrockapikey123"})
}

fn ev(kind: &str, payload: Value) -> Value {
    json!({"type": kind, "payload": payload})
}

/// A stream: text, then two calls in parallel.
fn tool_stream() -> Value {
    json!([
        ev("messageStart", json!({"role": "assistant"})),
        ev(
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"text": "Checking both."}})
        ),
        ev("contentBlockStop", json!({"contentBlockIndex": 0})),
        ev(
            "contentBlockStart",
            json!({"contentBlockIndex": 1, "start": {"toolUse": {"toolUseId": "tooluse_a1", "name": "weather"}}})
        ),
        ev(
            "contentBlockDelta",
            json!({"contentBlockIndex": 1, "delta": {"toolUse": {"input": "{\"city\":"}}})
        ),
        ev(
            "contentBlockStart",
            json!({"contentBlockIndex": 2, "start": {"toolUse": {"toolUseId": "tooluse_b2", "name": "weather"}}})
        ),
        ev(
            "contentBlockDelta",
            json!({"contentBlockIndex": 2, "delta": {"toolUse": {"input": "{\"city\":\"Oslo\"}"}}})
        ),
        ev(
            "contentBlockDelta",
            json!({"contentBlockIndex": 1, "delta": {"toolUse": {"input": "\"Lima\"}"}}})
        ),
        ev("contentBlockStop", json!({"contentBlockIndex": 1})),
        ev("contentBlockStop", json!({"contentBlockIndex": 2})),
        ev("messageStop", json!({"stopReason": "tool_use"})),
        ev(
            "metadata",
            json!({"usage": {"inputTokens": 30, "outputTokens": 12, "totalTokens": 42, "cacheReadInputTokens": 8}, "metrics": {"latencyMs": 99}})
        ),
    ])
}

fn env_lookup(base: &str, extra: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let mut vars: Vec<(String, String)> = vec![
        ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME".into(), base.to_owned()),
        ("AWS_REGION".into(), "us-west-2".into()),
        ("HOME".into(), "/nonexistent".into()),
    ];
    vars.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    move |k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
}

fn ask() -> Conversation {
    let mut c = Conversation::new();
    c.system = Some("Be brief.".into());
    c.messages.push(Message::user("Weather in Lima and Oslo?"));
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_requests_for_model_ids_with_colons_and_arns_stream_parallel_calls() {
    let test = "signed_requests_for_model_ids_with_colons_and_arns_stream_parallel_calls";
    let Some(mock) = Mock::start(
        test,
        json!({"credentials": credentials(), "turns": [
            {"stream": tool_stream(), "split": 5},
            {"stream": tool_stream(), "split": 3},
            {"response": {"output": {"message": {"role": "assistant", "content": [{"text": "Lima: sunny."}]}},
                          "stopReason": "end_turn", "usage": {"inputTokens": 5, "outputTokens": 3, "totalTokens": 8}}},
        ]}),
    ) else {
        return;
    };
    let env = env_lookup(
        &mock.base,
        &[
            ("AWS_ACCESS_KEY_ID", KEY),
            ("AWS_SECRET_ACCESS_KEY", SECRET),
            ("AWS_SESSION_TOKEN", TOKEN),
        ],
    );
    for model in [
        "anthropic.claude-3-5-sonnet-20241022-v2:0",
        "arn:aws:bedrock:us-west-2:123456789012:inference-profile/us.anthropic.claude-3-5-sonnet-20241022-v2:0",
    ] {
        let config = HttpModelConfig::from_lookup_for(BEDROCK, model, &env).unwrap();
        assert!(!format!("{config:?}").contains(SECRET));
        let out = collect_stream(HttpModel::new(config).unwrap().stream(&ask()), |_| {})
            .await
            .unwrap();
        assert_eq!(out.message.text().as_deref(), Some("Checking both."));
        let calls: Vec<(String, Value)> = out
            .message
            .tool_calls
            .iter()
            .map(|c| {
                (
                    c.call_id.clone().unwrap(),
                    Value::Object(c.arguments_as_map()),
                )
            })
            .collect();
        assert_eq!(
            calls,
            [
                ("tooluse_a1".into(), json!({"city": "Lima"})),
                ("tooluse_b2".into(), json!({"city": "Oslo"})),
            ]
        );
        assert_eq!(out.stop_reason, Some(StopReason::ToolCalls));
        let usage = out.usage.unwrap();
        assert_eq!((usage.input_tokens, usage.cache_read_tokens), (30, Some(8)));
    }
    // Unstreamed: /converse.
    let config = HttpModelConfig::from_lookup_for(BEDROCK, "amazon.nova-pro-v1:0", &env)
        .unwrap()
        .stream(false);
    let out = collect_stream(HttpModel::new(config).unwrap().stream(&ask()), |_| {})
        .await
        .unwrap();
    assert_eq!(out.message.text().as_deref(), Some("Lima: sunny."));

    let seen = mock.requests();
    assert_eq!(seen.len(), 3);
    for r in &seen {
        assert_eq!(r["auth"], "sigv4-ok", "{r}");
        assert_eq!(r["headers"]["x-amz-security-token"], TOKEN);
    }
    assert_eq!(
        seen[0]["path"],
        "/model/anthropic.claude-3-5-sonnet-20241022-v2%3A0/converse-stream"
    );
    assert_eq!(
        seen[1]["path"],
        "/model/arn%3Aaws%3Abedrock%3Aus-west-2%3A123456789012%3Ainference-profile%2Fus.anthropic.claude-3-5-sonnet-20241022-v2%3A0/converse-stream"
    );
    assert_eq!(seen[2]["path"], "/model/amazon.nova-pro-v1%3A0/converse");
    assert_eq!(seen[0]["body"]["system"], json!([{"text": "Be brief."}]));
    assert!(seen[0]["body"].get("model").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_from_the_shared_files_and_a_bedrock_api_key() {
    let test = "credentials_from_the_shared_files_and_a_bedrock_api_key";
    let done = json!({"stream": [
        ev("contentBlockDelta", json!({"contentBlockIndex": 0, "delta": {"text": "ok"}})),
        ev("messageStop", json!({"stopReason": "end_turn"})),
    ]});
    let Some(mock) = Mock::start(
        test,
        json!({"credentials": {"access_key": KEY, "secret_key": SECRET, "region": "eu-central-1",
                               "bearer": "ABSKbedrockapikey123"},
               "turns": [done.clone(), done]}),
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("credentials"),
        format!("[default]\naws_access_key_id = nope\naws_secret_access_key = nope\n\n[work]\naws_access_key_id = {KEY}\naws_secret_access_key = {SECRET}\n"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("config"),
        "[profile work]\nregion = eu-central-1 ; from the profile\n",
    )
    .unwrap();
    let creds = dir.path().join("credentials").display().to_string();
    let config_file = dir.path().join("config").display().to_string();
    let vars: Vec<(String, String)> = vec![
        ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME".into(), mock.base.clone()),
        ("AWS_PROFILE".into(), "work".into()),
        ("AWS_SHARED_CREDENTIALS_FILE".into(), creds),
        ("AWS_CONFIG_FILE".into(), config_file),
    ];
    let env = move |k: &str| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let config = HttpModelConfig::from_lookup_for(BEDROCK, "m:1", &env).unwrap();
    assert_eq!(config.settings["region"], "eu-central-1");
    collect_stream(HttpModel::new(config).unwrap().stream(&ask()), |_| {})
        .await
        .unwrap();
    // A Bedrock API key needs no signature.
    let env = env_lookup(
        &mock.base,
        &[("AWS_BEARER_TOKEN_BEDROCK", "ABSKbedrockapikey123")],
    );
    let config = HttpModelConfig::from_lookup_for(BEDROCK, "m:1", &env).unwrap();
    collect_stream(HttpModel::new(config).unwrap().stream(&ask()), |_| {})
        .await
        .unwrap();
    let seen = mock.requests();
    assert_eq!(seen[0]["auth"], "sigv4-ok", "{}", seen[0]);
    assert_eq!(seen[1]["auth"], "bearer-ok", "{}", seen[1]);
}

#[test]
fn missing_credentials_and_regions_say_what_to_set() {
    let none = |_: &str| None;
    let e = HttpModelConfig::from_lookup_for(BEDROCK, "m", none)
        .unwrap_err()
        .to_string();
    assert!(e.contains("AWS_REGION"), "{e}");
    let e = HttpModelConfig::from_lookup_for(BEDROCK, "m", |k| {
        (k == "AWS_REGION").then(|| "us-east-1".to_owned())
    })
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("AWS_ACCESS_KEY_ID") && e.contains("AWS_BEARER_TOKEN_BEDROCK"),
        "{e}"
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("config"),
        "[profile sso]\nsso_session = corp\nregion = us-east-1\n",
    )
    .unwrap();
    let path = dir.path().join("config").display().to_string();
    let e = HttpModelConfig::from_lookup_for(BEDROCK, "m", |k| match k {
        "AWS_PROFILE" => Some("sso".to_owned()),
        "AWS_CONFIG_FILE" => Some(path.clone()),
        _ => None,
    })
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("sso_session") && e.contains("export-credentials"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exceptions_errors_and_corrupt_frames_are_typed() {
    let test = "exceptions_errors_and_corrupt_frames_are_typed";
    let Some(mock) = Mock::start(
        test,
        json!({"credentials": credentials(), "turns": [
            {"stream": [
                ev("contentBlockDelta", json!({"contentBlockIndex": 0, "delta": {"text": "Partial"}})),
                {"exception": "modelStreamErrorException", "message": "The model stopped unexpectedly."},
            ]},
            {"status": 400, "body": {"message": "The provided model identifier is invalid."},
             "error_type": "ValidationException"},
            {"stream": tool_stream(), "split": 7, "corrupt_crc": true},
        ]}),
    ) else {
        return;
    };
    let env = env_lookup(
        &mock.base,
        &[
            ("AWS_ACCESS_KEY_ID", KEY),
            ("AWS_SECRET_ACCESS_KEY", SECRET),
            ("AWS_SESSION_TOKEN", TOKEN),
        ],
    );
    let model = || {
        HttpModel::new(
            HttpModelConfig::from_lookup_for(BEDROCK, "m:0", &env)
                .unwrap()
                .retry(RetryPolicy::none()),
        )
        .unwrap()
    };
    let out = collect_stream(model().stream(&ask()), |_| {}).await;
    let text = format!("{out:?}");
    assert!(
        text.contains("modelStreamErrorException") && text.contains("stopped unexpectedly"),
        "{text}"
    );
    let e = collect_stream(model().stream(&ask()), |_| {})
        .await
        .unwrap_err();
    match &e {
        ModelError::Http {
            status: 400,
            message,
            ..
        } => {
            assert!(message.contains("model identifier is invalid"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    let e = collect_stream(model().stream(&ask()), |_| {})
        .await
        .unwrap_err();
    assert!(e.to_string().contains("checksum"), "{e}");
}

//! The HTTP client against a scripted Vertex AI (`tests/servers/vertex_server.py`): its
//! OAuth token endpoint verifies our service-account JWTs with PyJWT and the key's public
//! half, and only tokens it issued (and has not seen expire) open the model routes.
//! Gemini on a project (token from a service-account key file, cached, fetched again
//! when it nears expiry), Gemini's express mode (an API key), Anthropic on Vertex
//! (`streamRawPredict` and `rawPredict`, no `model`, `anthropic_version`), a token the
//! application supplies, and what a failing token endpoint or a missing project says.
//!
//! Needs `LLMCHAIN_TEST_CLOUD_PYTHON` (a Python with PyJWT: `.ci/third-party`), else it
//! prints `SKIPPED`.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use llmchain::chain::{ChatModel, collect_stream};
use llmchain::conversation::Conversation;
use llmchain::http::vertex::{VERTEX, VERTEX_ANTHROPIC};
use llmchain::http::{
    ApiKey, BearerTokens, HttpModel, HttpModelConfig, Provider, RetryPolicy, Token,
};
use llmchain::message::Message;
use llmchain::provider::StopReason;
use serde_json::{Value, json};

const SERVER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/servers/vertex_server.py"
);

#[path = "servers/cloud_mock.rs"]
mod cloud_mock;

use cloud_mock::CloudMock;

struct Mock {
    server: CloudMock,
    base: String,
    /// The service-account key file, its `token_uri` this server's.
    key_file: String,
    _dir: tempfile::TempDir,
}

impl Mock {
    /// `script` gets the key's `client_email`, `private_key_id` and public key.
    fn start(test: &str, mut script: Value) -> Option<Mock> {
        let python = cloud_mock::python(test)?;
        let dir = tempfile::tempdir().unwrap();
        let made = Command::new(&python)
            .args([SERVER, "--make-key"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(made.status.success(), "{made:?}");
        let sa_path = dir.path().join("sa.json");
        let mut sa: Value = serde_json::from_slice(&std::fs::read(&sa_path).unwrap()).unwrap();
        script["client_email"] = sa["client_email"].clone();
        script["private_key_id"] = sa["private_key_id"].clone();
        script["public_key_pem"] = json!(dir.path().join("public.pem").display().to_string());
        let server = CloudMock::start(&python, Path::new(SERVER), &script, dir.path());
        let base = server.base.clone();
        sa["token_uri"] = json!(format!("{base}/token"));
        std::fs::write(&sa_path, sa.to_string()).unwrap();
        Some(Mock {
            server,
            base,
            key_file: sa_path.display().to_string(),
            _dir: dir,
        })
    }

    fn requests(&self) -> Vec<Value> {
        self.server.requests()
    }

    /// An environment pointing the provider at this server.
    fn env(&self, extra: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let mut vars: Vec<(String, String)> = vec![
            ("GOOGLE_VERTEX_BASE_URL".into(), self.base.clone()),
            ("GOOGLE_VERTEX_LOCATION".into(), "us-east5".into()),
        ];
        vars.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        move |k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    fn model(&self, spec: &'static dyn Provider, model: &str, extra: &[(&str, &str)]) -> HttpModel {
        let config = HttpModelConfig::from_lookup_for(spec, model, self.env(extra))
            .unwrap()
            .retry(RetryPolicy::none());
        HttpModel::new(config).unwrap()
    }
}

fn ask() -> Conversation {
    let mut c = Conversation::new();
    c.system = Some("Be brief.".into());
    c.messages.push(Message::user("Weather in Lima?"));
    c
}

/// Gemini's SSE: text, then a call.
fn gemini_call() -> Value {
    let chunks = [
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Checking."}]}}]}),
        json!({"candidates": [{"content": {"role": "model", "parts": [
                {"functionCall": {"name": "weather", "args": {"city": "Lima"}}}]},
               "finishReason": "STOP"}],
               "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 5, "totalTokenCount": 17}}),
    ];
    let sse: String = chunks
        .iter()
        .map(|c| format!("data: {c}\r\n\r\n"))
        .collect();
    json!({"sse": sse, "split": 7})
}

fn gemini_text(text: &str) -> Value {
    json!({"json": {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
                                     "finishReason": "STOP"}]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_with_a_service_account_key_caches_its_token() {
    let test = "gemini_with_a_service_account_key_caches_its_token";
    let Some(mock) = Mock::start(
        test,
        json!({"turns": [gemini_call(), gemini_text("Sunny.")]}),
    ) else {
        return;
    };
    let creds = [("GOOGLE_APPLICATION_CREDENTIALS", mock.key_file.as_str())];
    let config =
        HttpModelConfig::from_lookup_for(VERTEX, "gemini-2.5-flash", mock.env(&creds)).unwrap();
    // The project comes from the key file; the host from the location.
    assert_eq!(config.settings["project"], "llmchain-test");
    assert_eq!(
        config.default_base_url().unwrap(),
        "https://us-east5-aiplatform.googleapis.com"
    );
    let model = HttpModel::new(config).unwrap();
    let out = collect_stream(model.stream(&ask()), |_| {}).await;
    let out = out.unwrap_or_else(|e| panic!("{e}: {:#?}", mock.requests()));
    assert_eq!(out.message.text().as_deref(), Some("Checking."));
    let call = &out.message.tool_calls[0];
    assert_eq!(call.name.as_deref(), Some("weather"));
    assert_eq!(
        Value::Object(call.arguments_as_map()),
        json!({"city": "Lima"})
    );
    assert_eq!(out.stop_reason, Some(StopReason::ToolCalls));
    assert_eq!(out.usage.unwrap().input_tokens, 12);

    let config = HttpModelConfig::from_lookup_for(VERTEX, "gemini-2.5-flash", mock.env(&creds))
        .unwrap()
        .stream(false);
    let model2 = HttpModel::new(config).unwrap();
    let out = collect_stream(model2.stream(&ask()), |_| {}).await.unwrap();
    assert_eq!(out.message.text().as_deref(), Some("Sunny."));

    let seen = mock.requests();
    let tokens: Vec<&Value> = seen.iter().filter(|r| r["path"] == "/token").collect();
    // One model, one token for its call; the second model (another key object) its own.
    assert_eq!(tokens.len(), 2, "{seen:#?}");
    for t in &tokens {
        assert_eq!(t["auth"], "jwt-ok", "{t}");
        assert_eq!(
            t["body"]["grant_type"],
            "urn:ietf:params:oauth:grant-type:jwt-bearer"
        );
    }
    let calls: Vec<&Value> = seen.iter().filter(|r| r.get("route").is_some()).collect();
    assert_eq!(
        calls[0]["path"],
        "/v1/projects/llmchain-test/locations/us-east5/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(
        calls[1]["path"],
        "/v1/projects/llmchain-test/locations/us-east5/publishers/google/models/gemini-2.5-flash:generateContent"
    );
    for c in &calls {
        assert_eq!(c["auth"], "bearer-ok", "{c}");
    }
    assert_eq!(
        calls[0]["body"]["systemInstruction"]["parts"][0]["text"],
        "Be brief."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_reused_until_they_near_expiry_then_fetched_again() {
    let test = "tokens_are_reused_until_they_near_expiry_then_fetched_again";
    for (expires_in, fetches) in [(3600, 1), (10, 3)] {
        let Some(mock) = Mock::start(
            test,
            json!({"expires_in": expires_in,
                   "turns": [gemini_text("a"), gemini_text("b"), gemini_text("c")]}),
        ) else {
            return;
        };
        let creds = [("GOOGLE_APPLICATION_CREDENTIALS", mock.key_file.as_str())];
        let config = HttpModelConfig::from_lookup_for(VERTEX, "gemini-2.5-pro", mock.env(&creds))
            .unwrap()
            .stream(false);
        let model = HttpModel::new(config).unwrap();
        for _ in 0..3 {
            collect_stream(model.stream(&ask()), |_| {}).await.unwrap();
        }
        let seen = mock.requests();
        let n = seen.iter().filter(|r| r["path"] == "/token").count();
        assert_eq!(n, fetches, "tokens good for {expires_in} s: {seen:#?}");
        assert!(
            seen.iter()
                .filter(|r| r.get("route").is_some())
                .all(|r| r["auth"] == "bearer-ok")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn express_mode_sends_the_key_and_no_project() {
    let test = "express_mode_sends_the_key_and_no_project";
    let Some(mock) = Mock::start(
        test,
        json!({"express_key": "AQ.express-key-123", "turns": [gemini_call()]}),
    ) else {
        return;
    };
    let env = mock.env(&[
        ("GOOGLE_VERTEX_API_KEY", "AQ.express-key-123"),
        ("GOOGLE_CLOUD_PROJECT", "ignored-project"),
    ]);
    let config = HttpModelConfig::from_lookup_for(VERTEX, "gemini-2.5-flash", env).unwrap();
    assert!(!format!("{config:?}").contains("AQ.express"));
    assert_eq!(
        config.default_base_url().unwrap(),
        "https://aiplatform.googleapis.com"
    );
    let out = collect_stream(HttpModel::new(config).unwrap().stream(&ask()), |_| {})
        .await
        .unwrap();
    assert_eq!(out.message.tool_calls.len(), 1);
    let seen = mock.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0]["auth"], "api-key-ok");
    assert_eq!(
        seen[0]["path"],
        "/v1/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_on_vertex_streams_a_call_and_answers_unstreamed() {
    let test = "anthropic_on_vertex_streams_a_call_and_answers_unstreamed";
    let sse = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_vrtx_01\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5-20250929\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":20,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_vrtx_01\",\"name\":\"weather\",\"input\":{}}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"city\\\": \\\"Li\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"ma\\\"}\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":9}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    let unary = json!({"id": "msg_vrtx_02", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5-20250929", "content": [{"type": "text", "text": "Sunny."}],
        "stop_reason": "end_turn", "usage": {"input_tokens": 30, "output_tokens": 2}});
    let Some(mock) = Mock::start(
        test,
        json!({"turns": [{"sse": sse, "split": 11}, {"json": unary}]}),
    ) else {
        return;
    };
    let creds = [
        ("GOOGLE_APPLICATION_CREDENTIALS", mock.key_file.as_str()),
        ("GOOGLE_VERTEX_PROJECT", "proj-7"),
    ];
    let model = mock.model(VERTEX_ANTHROPIC, "claude-sonnet-4-5@20250929", &creds);
    let out = collect_stream(model.stream(&ask()), |_| {}).await.unwrap();
    let call = &out.message.tool_calls[0];
    assert_eq!(call.call_id.as_deref(), Some("toolu_vrtx_01"));
    assert_eq!(
        Value::Object(call.arguments_as_map()),
        json!({"city": "Lima"})
    );
    assert_eq!(out.stop_reason, Some(StopReason::ToolCalls));
    let config = HttpModelConfig::from_lookup_for(
        VERTEX_ANTHROPIC,
        "claude-sonnet-4-5@20250929",
        mock.env(&creds),
    )
    .unwrap()
    .stream(false);
    let out = collect_stream(HttpModel::new(config).unwrap().stream(&ask()), |_| {})
        .await
        .unwrap();
    assert_eq!(out.message.text().as_deref(), Some("Sunny."));

    let seen = mock.requests();
    let calls: Vec<&Value> = seen.iter().filter(|r| r.get("route").is_some()).collect();
    assert_eq!(calls.len(), 2, "{seen:#?}");
    assert_eq!(
        calls[0]["path"],
        "/v1/projects/proj-7/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5%4020250929:streamRawPredict"
    );
    assert!(calls[1]["path"].as_str().unwrap().ends_with(":rawPredict"));
    for c in &calls {
        assert_eq!(c["auth"], "bearer-ok", "{c}");
        assert_eq!(c["body"]["anthropic_version"], "vertex-2023-10-16");
        assert!(c["body"].get("model").is_none(), "{c}");
        assert_eq!(c["body"]["system"], "Be brief.");
    }
    assert_eq!(calls[0]["body"]["stream"], true);
    assert!(calls[0]["headers"].get("anthropic-version").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_the_application_supplies_is_used_as_is() {
    let test = "a_token_the_application_supplies_is_used_as_is";
    let Some(mock) = Mock::start(test, json!({"turns": [gemini_text("a"), gemini_text("b")]}))
    else {
        return;
    };
    // The application got a token elsewhere: here, from the server through a key file.
    let creds = [("GOOGLE_APPLICATION_CREDENTIALS", mock.key_file.as_str())];
    collect_stream(
        HttpModel::new(
            HttpModelConfig::from_lookup_for(VERTEX, "g", mock.env(&creds))
                .unwrap()
                .stream(false),
        )
        .unwrap()
        .stream(&ask()),
        |_| {},
    )
    .await
    .unwrap();
    let issued = mock
        .requests()
        .into_iter()
        .find_map(|r| r["token"].as_str().map(str::to_owned))
        .unwrap();
    let supplied = BearerTokens::from_fn(move || {
        let t = issued.clone();
        async move {
            Ok(Token {
                secret: ApiKey::new(t),
                expires_in: None,
            })
        }
    });
    // Even with a key file in the environment, the caller's auth wins.
    let config = HttpModelConfig::for_provider(VERTEX, "g")
        .auth(Arc::new(supplied))
        .setting("project", "app-project")
        .read_env(mock.env(&creds))
        .unwrap()
        .stream(false);
    config.validate().unwrap();
    collect_stream(HttpModel::new(config).unwrap().stream(&ask()), |_| {})
        .await
        .unwrap();
    let seen = mock.requests();
    assert_eq!(seen.iter().filter(|r| r["path"] == "/token").count(), 1);
    let last = seen.last().unwrap();
    assert_eq!(last["auth"], "bearer-ok");
    assert_eq!(last["route"]["project"], "app-project");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_token_endpoint_and_a_missing_project_say_what_to_do() {
    let test = "a_failing_token_endpoint_and_a_missing_project_say_what_to_do";
    let refused = json!({"status": 400, "body": {"error": "invalid_grant",
                          "error_description": "Invalid JWT Signature."}});
    let Some(mock) = Mock::start(
        test,
        json!({"token_errors": vec![refused; 8], "turns": [gemini_text("never")]}),
    ) else {
        return;
    };
    let creds = [("GOOGLE_APPLICATION_CREDENTIALS", mock.key_file.as_str())];
    let e = collect_stream(mock.model(VERTEX, "g", &creds).stream(&ask()), |_| {})
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("Google access token"), "{e}");
    assert!(
        mock.requests().iter().all(|r| r.get("route").is_none()),
        "no model request without a token"
    );

    // No project anywhere (ADC, no key file): said before any request.
    let e = HttpModelConfig::from_lookup_for(VERTEX, "g", |_| None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("GOOGLE_VERTEX_PROJECT") && e.contains("GOOGLE_VERTEX_API_KEY"),
        "{e}"
    );
    let e = HttpModelConfig::from_lookup_for(VERTEX_ANTHROPIC, "c", |_| None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("GOOGLE_VERTEX_PROJECT") && !e.contains("API_KEY"),
        "{e}"
    );
    // A user's own credentials in GOOGLE_APPLICATION_CREDENTIALS: what to do instead.
    let dir = tempfile::tempdir().unwrap();
    let user = dir.path().join("user.json");
    std::fs::write(
        &user,
        r#"{"type":"authorized_user","client_id":"c","client_secret":"s","refresh_token":"r"}"#,
    )
    .unwrap();
    let user = user.display().to_string();
    let e = HttpModelConfig::from_lookup_for(VERTEX, "g", |k| {
        (k == "GOOGLE_APPLICATION_CREDENTIALS").then(|| user.clone())
    })
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("authorized_user") && e.contains("application-default login"),
        "{e}"
    );
    // A project id that would change the path is refused.
    let e = HttpModelConfig::for_provider(VERTEX, "g")
        .setting("project", "p/../../x")
        .api_key("k")
        .setting("location", "us-east5");
    let e = HttpModel::new(e).unwrap_err().to_string();
    assert!(e.contains("project"), "{e}");
}

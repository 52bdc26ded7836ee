//! `llmchain models`: each provider's model list read from its API (OpenAI, Anthropic,
//! Gemini, Ollama), a provider that has none says so; `[aliases]` of the config file are
//! listed and `--model ALIAS` runs the model (and provider) it names.

mod common;

use common::{Reply, llmchain_with_env, serve, serve_replies};
use llmchain::provider::Format;
use llmchain::provider::render::{ResponseScript, render_stream};

fn models(dir: &std::path::Path, provider: &str, base: &str) -> (String, String, Option<i32>) {
    let out = llmchain_with_env(
        &["models", "--provider", provider, "--base-url", base],
        dir,
        &[("LLMCHAIN_CONFIG", "/nonexistent/llmchain.toml")],
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code(),
    )
}

#[test]
fn each_provider_lists_its_models() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &'static str, &str, &str); 4] = [
        (
            "openai",
            r#"{"object":"list","data":[{"id":"gpt-4.1","object":"model"},{"id":"gpt-4.1-mini","object":"model"}]}"#,
            "/v1/models",
            "gpt-4.1\ngpt-4.1-mini\n",
        ),
        (
            "anthropic",
            r#"{"data":[{"type":"model","id":"claude-sonnet-4-5","display_name":"Claude Sonnet 4.5"}],"has_more":false}"#,
            "/v1/models?limit=1000",
            "claude-sonnet-4-5\n",
        ),
        (
            "gemini",
            r#"{"models":[{"name":"models/gemini-2.5-flash","supportedGenerationMethods":["generateContent","countTokens"]},{"name":"models/text-embedding-004","supportedGenerationMethods":["embedContent"]}]}"#,
            "/v1beta/models?pageSize=1000",
            "gemini-2.5-flash\n",
        ),
        (
            "ollama",
            r#"{"models":[{"name":"qwen3:8b","size":1},{"name":"llama3.2:latest","size":2}]}"#,
            "/api/tags",
            "llama3.2:latest\nqwen3:8b\n",
        ),
    ];
    for (provider, body, path, listed) in cases {
        let (base, seen) = serve_replies(vec![Reply::Status(200, body)]);
        let root = base.trim_end_matches("/v1");
        let base = if provider == "openai" {
            base.as_str()
        } else {
            root
        };
        let (out, err, code) = models(dir.path(), provider, base);
        assert_eq!(code, Some(0), "{provider}: {err}");
        assert_eq!(out, listed, "{provider}");
        assert_eq!(seen.lock().unwrap()[0].0, path, "{provider}");
    }
    let (_, err, code) = models(dir.path(), "bedrock", "http://127.0.0.1:9");
    assert_eq!(code, Some(1));
    assert!(err.contains("does not list its models"), "{err}");
    // A server that answers something else is a clear error.
    let (base, _) = serve_replies(vec![Reply::Status(200, r#"{"unexpected":true}"#)]);
    let (_, err, code) = models(dir.path(), "openai", &base);
    assert_eq!(code, Some(1));
    assert!(err.contains("not a list of models"), "{err}");
}

#[test]
fn an_alias_names_a_provider_and_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        "[aliases]\nfast = \"anthropic:claude-haiku-4-5\"\nlocal = \"qwen3:8b\"\n",
    )
    .unwrap();
    let config = config.display().to_string();
    let (base, seen) = serve(vec![
        render_stream(Format::ANTHROPIC, &ResponseScript::text("Hi from Haiku.")).unwrap(),
    ]);
    let root = base.trim_end_matches("/v1");
    let out = llmchain_with_env(
        &["run", "--model", "fast", "--base-url", root, "hi"],
        dir.path(),
        &[("LLMCHAIN_CONFIG", &config)],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("Hi from Haiku."), "{stdout}");
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0].0, "/v1/messages");
    assert_eq!(seen[0].1["model"], "claude-haiku-4-5");
    // `models` lists the aliases; a model id with a `:` that is no provider stays whole.
    let (base, _) = serve_replies(vec![Reply::Status(200, r#"{"data":[]}"#)]);
    let out = llmchain_with_env(
        &["models", "--base-url", &base, "--json"],
        dir.path(),
        &[("LLMCHAIN_CONFIG", &config)],
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["aliases"]["local"], "qwen3:8b");
    assert_eq!(v["provider"], "openai");
}

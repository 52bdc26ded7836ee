//! Azure OpenAI against a local server: the v1 routes (Chat and Responses, the model
//! being the deployment), the deployment routes with `api-version`, the `api-key`
//! header, an Entra ID token instead (a token source, cached), the settings read from
//! the environment, and Azure's content-filter annotations in a stream (an opening chunk
//! with empty `choices`, `content_filter_results`, a `content_filter` finish) decoded as
//! a typed stop reason.

mod http_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use http_support::*;
use llmchain::chain::{ChatModel, collect_stream};
use llmchain::http::azure::{AZURE, AZURE_RESPONSES};
use llmchain::http::{ApiKey, BearerTokens, HttpModel, HttpModelConfig, RetryPolicy, Token};
use llmchain::provider::Format;
use llmchain::provider::StopReason;
use llmchain::provider::render::{ResponseScript, render_stream};

fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |k| {
        vars.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    }
}

#[tokio::test]
async fn the_v1_api_sends_the_deployment_as_model_and_the_key_in_api_key() {
    let body = render_stream(Format::OPENAI_CHAT, &ResponseScript::text("hi")).unwrap();
    let server = Server::start(vec![Reply::sse(body)]).await;
    // A base URL given with Azure's own `/openai/v1` is not doubled.
    let config = HttpModelConfig::for_provider(AZURE, "my-gpt-deployment")
        .base_url(format!("{}/openai/v1/", server.base))
        .api_key("azure-key-123456");
    let model = HttpModel::new(config).unwrap();
    let out = collect_stream(model.stream(&ask("hi")), |_| {})
        .await
        .unwrap();
    assert_eq!(out.message.text().as_deref(), Some("hi"));
    let seen = &server.seen()[0];
    assert_eq!(seen.uri, "/openai/v1/chat/completions");
    assert_eq!(seen.header("api-key"), Some("azure-key-123456"));
    assert_eq!(seen.header("authorization"), None);
    assert_eq!(seen.body["model"], "my-gpt-deployment");
}

#[tokio::test]
async fn an_api_version_uses_the_deployment_url() {
    let body = render_stream(Format::OPENAI_CHAT, &ResponseScript::text("ok")).unwrap();
    let server = Server::start(vec![
        Reply::sse(body.clone()),
        Reply::sse(render_stream(Format::OPENAI_RESPONSES, &ResponseScript::text("ok")).unwrap()),
    ])
    .await;
    let base: &'static str = Box::leak(server.base.clone().into_boxed_str());
    let vars: &'static [(&'static str, &'static str)] = Box::leak(Box::new([
        ("AZURE_OPENAI_ENDPOINT", base),
        ("AZURE_OPENAI_API_KEY", "k-abcdef"),
        ("AZURE_OPENAI_API_VERSION", "2024-10-21"),
    ]));
    let config = HttpModelConfig::from_lookup_for(AZURE, "dep/with space", env(vars)).unwrap();
    let model = HttpModel::new(config).unwrap();
    collect_stream(model.stream(&ask("x")), |_| {})
        .await
        .unwrap();
    let config = HttpModelConfig::from_lookup_for(AZURE_RESPONSES, "dep", env(vars)).unwrap();
    let model = HttpModel::new(config).unwrap();
    collect_stream(model.stream(&ask("x")), |_| {})
        .await
        .unwrap();
    let seen = server.seen();
    assert_eq!(
        seen[0].uri,
        "/openai/deployments/dep%2Fwith%20space/chat/completions?api-version=2024-10-21"
    );
    assert_eq!(seen[1].uri, "/openai/responses?api-version=2024-10-21");
    assert_eq!(seen[1].header("api-key"), Some("k-abcdef"));
}

#[test]
fn the_resource_builds_the_host_and_its_absence_says_what_to_set() {
    let config = HttpModelConfig::from_lookup_for(
        AZURE,
        "d",
        env(&[
            ("AZURE_OPENAI_RESOURCE", "contoso"),
            ("AZURE_OPENAI_API_KEY", "k-123456"),
        ]),
    )
    .unwrap();
    let model = HttpModel::new(config).unwrap();
    assert_eq!(
        model.url(),
        "https://contoso.openai.azure.com/openai/v1/chat/completions"
    );
    let e = HttpModelConfig::from_lookup_for(AZURE, "d", env(&[("AZURE_OPENAI_API_KEY", "k")]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("AZURE_OPENAI_RESOURCE") && e.contains("AZURE_OPENAI_ENDPOINT"),
        "{e}"
    );
    // A resource that is not a host name is refused, not spliced into the URL.
    let e = HttpModelConfig::from_lookup_for(
        AZURE,
        "d",
        env(&[
            ("AZURE_OPENAI_RESOURCE", "evil.com/x?"),
            ("AZURE_OPENAI_API_KEY", "k"),
        ]),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("host name"), "{e}");
    let e =
        HttpModelConfig::from_lookup_for(AZURE, "d", env(&[("AZURE_OPENAI_RESOURCE", "contoso")]))
            .unwrap_err()
            .to_string();
    assert!(e.contains("AZURE_OPENAI_API_KEY"), "{e}");
}

#[tokio::test]
async fn an_entra_token_goes_as_a_bearer_token_and_is_fetched_once() {
    let body = render_stream(Format::OPENAI_CHAT, &ResponseScript::text("ok")).unwrap();
    let server = Server::start(vec![Reply::sse(body.clone()), Reply::sse(body)]).await;
    let fetched = Arc::new(AtomicU32::new(0));
    let f = fetched.clone();
    let tokens = BearerTokens::from_fn(move || {
        f.fetch_add(1, Ordering::SeqCst);
        async {
            Ok(Token {
                secret: ApiKey::new("entra-token-xyz"),
                expires_in: Some(Duration::from_secs(3600)),
            })
        }
    });
    let config = HttpModelConfig::for_provider(AZURE, "d")
        .base_url(&server.base)
        .auth(Arc::new(tokens))
        .retry(RetryPolicy::none());
    let model = HttpModel::new(config).unwrap();
    for _ in 0..2 {
        collect_stream(model.stream(&ask("x")), |_| {})
            .await
            .unwrap();
    }
    assert_eq!(fetched.load(Ordering::SeqCst), 1);
    for seen in server.seen() {
        assert_eq!(seen.header("authorization"), Some("Bearer entra-token-xyz"));
        assert_eq!(seen.header("api-key"), None);
    }
    // From the environment: AZURE_OPENAI_AD_TOKEN when there is no key.
    let config = HttpModelConfig::from_lookup_for(
        AZURE,
        "d",
        env(&[
            ("AZURE_OPENAI_RESOURCE", "contoso"),
            ("AZURE_OPENAI_AD_TOKEN", "ad-token-1234"),
        ]),
    )
    .unwrap();
    assert!(config.auth.is_some());
    assert!(!format!("{config:?}").contains("ad-token-1234"));
}

/// Azure's stream: an opening chunk with no choices and the prompt's filter results,
/// chunks with filter annotations and no delta, and output stopped by the filter.
#[tokio::test]
async fn content_filtered_output_is_a_typed_stop_reason() {
    let body = concat!(
        "data: {\"choices\":[],\"created\":0,\"id\":\"\",\"model\":\"\",\"object\":\"\",\"prompt_filter_results\":[{\"prompt_index\":0,\"content_filter_results\":{\"hate\":{\"filtered\":false,\"severity\":\"safe\"}}}]}\n\n",
        "data: {\"choices\":[{\"content_filter_results\":{},\"delta\":{\"content\":\"\",\"role\":\"assistant\"},\"finish_reason\":null,\"index\":0}],\"created\":1,\"id\":\"c1\",\"model\":\"gpt-4o\",\"object\":\"chat.completion.chunk\"}\n\n",
        "data: {\"choices\":[{\"content_filter_results\":{\"hate\":{\"filtered\":false,\"severity\":\"safe\"}},\"delta\":{\"content\":\"Here is\"},\"finish_reason\":null,\"index\":0}],\"created\":1,\"id\":\"c1\",\"model\":\"gpt-4o\",\"object\":\"chat.completion.chunk\"}\n\n",
        "data: {\"choices\":[{\"content_filter_results\":{\"violence\":{\"filtered\":true,\"severity\":\"high\"}},\"delta\":{},\"finish_reason\":\"content_filter\",\"index\":0}],\"created\":1,\"id\":\"c1\",\"model\":\"gpt-4o\",\"object\":\"chat.completion.chunk\"}\n\n",
        "data: [DONE]\n\n",
    );
    let server = Server::start(vec![Reply::sse(body.as_bytes().to_vec())]).await;
    let config = HttpModelConfig::for_provider(AZURE, "d")
        .base_url(&server.base)
        .api_key("k-123456");
    let model = HttpModel::new(config).unwrap();
    let out = collect_stream(model.stream(&ask("x")), |_| {})
        .await
        .unwrap();
    assert_eq!(out.stop_reason, Some(StopReason::ContentFilter));
    assert_eq!(out.message.text().as_deref(), Some("Here is"));
}

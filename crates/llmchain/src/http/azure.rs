//! Azure OpenAI: the v1 API (`https://{resource}.openai.azure.com/openai/v1/...`, the
//! model being the deployment's name, no dated `api-version`) and, when an API version
//! is set, the deployment URLs (`/openai/deployments/{deployment}/chat/completions
//! ?api-version=...`). A key goes in `api-key`; an Entra ID token as a bearer token
//! ([`BearerTokens`](super::auth::BearerTokens) in the library, `AZURE_OPENAI_AD_TOKEN`
//! from the environment). Streams are OpenAI Chat (or Responses) with Azure's content
//! filter annotations, which the codec reads.

use std::sync::Arc;

use super::auth::{Auth, KeyHeader};
use super::config::{ApiKey, HttpModelConfig};
use super::providers::{
    ModelList, OPENAI_SPEC, ProviderSpec, Route, RouteContext, SettingSpec, data_ids, key_auth,
};
use crate::model::ModelError;
use crate::provider::{Codec, Format};

const SETTINGS: &[SettingSpec] = &[
    SettingSpec {
        key: "resource",
        env: &["AZURE_OPENAI_RESOURCE"],
        default: None,
        about: "the resource name ({resource}.openai.azure.com), unless AZURE_OPENAI_ENDPOINT is set",
    },
    SettingSpec {
        key: "api_version",
        env: &["AZURE_OPENAI_API_VERSION"],
        default: None,
        about: "an API version (e.g. 2024-10-21) to use the deployment URLs; unset: the v1 API",
    },
];

fn chat_route(c: &RouteContext<'_>) -> Result<Route, ModelError> {
    Ok(match c.setting("api_version") {
        Some(v) => Route::path(format!(
            "/openai/deployments/{}/chat/completions",
            c.model_segment
        ))
        .query("api-version", v),
        None => Route::path("/openai/v1/chat/completions"),
    })
}

fn responses_route(c: &RouteContext<'_>) -> Result<Route, ModelError> {
    Ok(match c.setting("api_version") {
        Some(v) => Route::path("/openai/responses").query("api-version", v),
        None => Route::path("/openai/v1/responses"),
    })
}

fn auth(config: &HttpModelConfig) -> Result<Option<Arc<dyn Auth>>, ModelError> {
    key_auth(config, "api-key", "")
}

/// Without a key, an Entra ID token from `AZURE_OPENAI_AD_TOKEN` (a bearer token).
fn from_env(
    config: &mut HttpModelConfig,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(), ModelError> {
    if config.api_key.is_none()
        && config.auth.is_none()
        && let Some(token) = lookup("AZURE_OPENAI_AD_TOKEN")
    {
        config.auth = Some(Arc::new(KeyHeader::bearer(&ApiKey::new(token.trim()))?));
    }
    Ok(())
}

fn chat_codec() -> &'static dyn Codec {
    Format::OPENAI_CHAT.codec()
}

fn responses_codec() -> &'static dyn Codec {
    Format::OPENAI_RESPONSES.codec()
}

/// Azure OpenAI, Chat Completions.
pub static AZURE: ProviderSpec = AZURE_SPEC;

/// Azure OpenAI, Responses.
pub static AZURE_RESPONSES: ProviderSpec = ProviderSpec {
    name: "azure_responses",
    aliases: &[],
    summary: "Azure OpenAI, Responses",
    codec: responses_codec,
    route: responses_route,
    ..AZURE_SPEC
};

const AZURE_SPEC: ProviderSpec = ProviderSpec {
    name: "azure",
    genai_name: "azure.ai.openai",
    aliases: &["azure_openai"],
    summary: "Azure OpenAI, Chat Completions (model = deployment name)",
    codec: chat_codec,
    default_model: "gpt-4.1",
    default_base_url: "https://{resource}.openai.azure.com",
    base_url_env: &["AZURE_OPENAI_ENDPOINT"],
    key_env: &["AZURE_OPENAI_API_KEY"],
    key_required: true,
    settings: SETTINGS,
    route: chat_route,
    auth,
    from_env: Some(from_env),
    trim_base_suffixes: &["/openai/v1", "/openai"],
    // The v1 API lists the resource's models (a deployment's name is what --model takes).
    models: Some(ModelList {
        route: |_| Ok(Route::path("/openai/v1/models")),
        parse: data_ids,
    }),
    ..OPENAI_SPEC
};

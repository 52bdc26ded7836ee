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
    ModelList, OpenAiApi, Provider, Route, RouteContext, SettingSpec, data_ids, key_auth,
};
use crate::model::ModelError;
use crate::provider::Codec;

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

fn chat_route(c: &RouteContext<'_>) -> Route {
    match c.setting("api_version") {
        Some(v) => Route::path(format!(
            "/openai/deployments/{}/chat/completions",
            c.model_segment
        ))
        .query("api-version", v),
        None => Route::path("/openai/v1/chat/completions"),
    }
}

fn responses_route(c: &RouteContext<'_>) -> Route {
    match c.setting("api_version") {
        Some(v) => Route::path("/openai/responses").query("api-version", v),
        None => Route::path("/openai/v1/responses"),
    }
}

/// Azure OpenAI, speaking Chat Completions or Responses.
struct Azure {
    api: OpenAiApi,
}

impl Provider for Azure {
    fn name(&self) -> &'static str {
        match self.api {
            OpenAiApi::Chat => "azure",
            OpenAiApi::Responses => "azure_responses",
        }
    }
    fn codec(&self) -> &'static dyn Codec {
        self.api.codec()
    }
    fn default_model(&self) -> &'static str {
        "gpt-4.1"
    }
    fn base_url_template(&self) -> &'static str {
        "https://{resource}.openai.azure.com"
    }
    fn route(&self, c: &RouteContext<'_>) -> Result<Route, ModelError> {
        Ok(match self.api {
            OpenAiApi::Chat => chat_route(c),
            OpenAiApi::Responses => responses_route(c),
        })
    }
    fn aliases(&self) -> &'static [&'static str] {
        match self.api {
            OpenAiApi::Chat => &["azure_openai"],
            OpenAiApi::Responses => &[],
        }
    }
    fn genai_name(&self) -> &'static str {
        "azure.ai.openai"
    }
    fn summary(&self) -> &'static str {
        match self.api {
            OpenAiApi::Chat => "Azure OpenAI, Chat Completions (model = deployment name)",
            OpenAiApi::Responses => "Azure OpenAI, Responses",
        }
    }
    fn base_url_env(&self) -> &'static [&'static str] {
        &["AZURE_OPENAI_ENDPOINT"]
    }
    fn key_env(&self) -> &'static [&'static str] {
        &["AZURE_OPENAI_API_KEY"]
    }
    fn settings(&self) -> &'static [SettingSpec] {
        SETTINGS
    }
    fn auth(&self, config: &HttpModelConfig) -> Result<Option<Arc<dyn Auth>>, ModelError> {
        key_auth(config, "api-key", "")
    }
    /// Without a key, an Entra ID token from `AZURE_OPENAI_AD_TOKEN` (a bearer token).
    fn read_env(
        &self,
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
    fn models(&self) -> Option<ModelList> {
        // The v1 API lists the resource's models (a deployment's name is what --model takes).
        Some(ModelList {
            route: |_| Ok(Route::path("/openai/v1/models")),
            parse: data_ids,
        })
    }
    fn trim_base_suffixes(&self) -> &'static [&'static str] {
        &["/openai/v1", "/openai"]
    }
}

/// Azure OpenAI, Chat Completions.
pub static AZURE: &dyn Provider = &Azure {
    api: OpenAiApi::Chat,
};

/// Azure OpenAI, Responses.
pub static AZURE_RESPONSES: &dyn Provider = &Azure {
    api: OpenAiApi::Responses,
};

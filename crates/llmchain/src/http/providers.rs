//! The registry of providers: each one a [`ProviderSpec`], the whole description of how
//! to reach a service — its wire format (the codec), where requests go for a model and
//! whether they stream, how they authenticate, its headers, its default model and the
//! environment variables it reads, and its names. The HTTP client, the CLI (names,
//! `--help`, default models, key errors) and the docs read this list; nothing else holds
//! a `match` over providers.
//!
//! A provider outside this crate is a `static` [`ProviderSpec`] of its own (its codec
//! any [`Codec`], its auth any [`Auth`]), given to
//! [`HttpModelConfig::for_provider`](super::HttpModelConfig::for_provider).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use super::auth::{Auth, KeyHeader};
use super::config::{ApiKey, HttpModelConfig};
use crate::model::ModelError;
use crate::provider::{Codec, Format};

/// Where a request goes, relative to the base URL: a path (starting with `/`) and
/// query pairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The path after the base URL's own.
    pub path: String,
    /// Query pairs to append.
    pub query: Vec<(String, String)>,
}

impl Route {
    /// A path with no query.
    pub fn path(path: impl Into<String>) -> Self {
        Route {
            path: path.into(),
            query: Vec::new(),
        }
    }

    /// Adds a query pair.
    #[must_use]
    pub fn query(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.query.push((key.into(), value.into()));
        self
    }
}

/// What a route is built from.
#[derive(Debug, Clone, Copy)]
pub struct RouteContext<'a> {
    /// The model id as one percent-encoded path segment (it cannot change the endpoint).
    pub model_segment: &'a str,
    /// The model id as given.
    pub model: &'a str,
    /// A streamed response is asked for.
    pub stream: bool,
    /// The provider's settings (region, project, location, API version...).
    pub settings: &'a BTreeMap<String, String>,
}

impl RouteContext<'_> {
    /// A setting, if set.
    pub fn setting(&self, key: &str) -> Option<&str> {
        self.settings.get(key).map(String::as_str)
    }
}

/// A setting of a provider read from the environment: its key in
/// [`HttpModelConfig::settings`], the variables tried in order, and its default.
#[derive(Debug, Clone, Copy)]
pub struct SettingSpec {
    /// The key (`region`, `project`, `location`, `api_version`, `resource`).
    pub key: &'static str,
    /// The environment variables, first set wins.
    pub env: &'static [&'static str],
    /// Used when none is set; `None`: required where the base URL or route uses it.
    pub default: Option<&'static str>,
    /// For `--help` and errors.
    pub about: &'static str,
}

/// Reads the environment for a provider's own needs beyond key, base URL and settings
/// (credentials from files, extra headers): `lookup` is the environment.
pub type FromEnvFn =
    fn(&mut HttpModelConfig, &dyn Fn(&str) -> Option<String>) -> Result<(), ModelError>;

/// A provider's default auth: from the config's key, or `None` for no auth.
pub type AuthFn = fn(&HttpModelConfig) -> Result<Option<Arc<dyn Auth>>, ModelError>;

/// Computes a provider's default base URL from its settings, when a template with
/// `{setting}` placeholders cannot (Vertex AI's host depends on the location's kind).
pub type BaseUrlFn = fn(&ProviderSpec, &BTreeMap<String, String>) -> Result<String, ModelError>;

/// How a provider lists the models it serves: `GET` at `route` (built from the
/// settings), the body read by `parse` into model ids as `--model` takes them.
#[derive(Debug, Clone, Copy)]
pub struct ModelList {
    /// Where the list is, relative to the base URL.
    pub route: fn(&BTreeMap<String, String>) -> Result<Route, ModelError>,
    /// The ids in the answer, or what is wrong with it.
    pub parse: fn(&[u8]) -> Result<Vec<String>, String>,
}

/// `{"data": [{"id": ...}, ...]}` (OpenAI, Anthropic, and the compatible servers).
pub fn data_ids(body: &[u8]) -> Result<Vec<String>, String> {
    #[derive(serde::Deserialize)]
    struct Item {
        id: String,
    }
    #[derive(serde::Deserialize)]
    struct List {
        data: Vec<Item>,
    }
    serde_json::from_slice::<List>(body)
        .map(|l| l.data.into_iter().map(|i| i.id).collect())
        .map_err(|e| format!("not a list of models ({e})"))
}

/// Gemini's `{"models": [{"name": "models/...", "supportedGenerationMethods": [...]}]}`:
/// those that generate content, without the `models/` prefix.
fn gemini_ids(body: &[u8]) -> Result<Vec<String>, String> {
    #[derive(serde::Deserialize)]
    struct Item {
        name: String,
        #[serde(rename = "supportedGenerationMethods", default)]
        methods: Vec<String>,
    }
    #[derive(serde::Deserialize)]
    struct List {
        #[serde(default)]
        models: Vec<Item>,
    }
    serde_json::from_slice::<List>(body)
        .map(|l| {
            l.models
                .into_iter()
                .filter(|m| {
                    m.methods.is_empty() || m.methods.iter().any(|x| x == "generateContent")
                })
                .map(|m| m.name.strip_prefix("models/").unwrap_or(&m.name).to_owned())
                .collect()
        })
        .map_err(|e| format!("not a list of models ({e})"))
}

/// Ollama's `{"models": [{"name": ...}]}`.
fn ollama_ids(body: &[u8]) -> Result<Vec<String>, String> {
    #[derive(serde::Deserialize)]
    struct Item {
        name: String,
    }
    #[derive(serde::Deserialize)]
    struct List {
        #[serde(default)]
        models: Vec<Item>,
    }
    serde_json::from_slice::<List>(body)
        .map(|l| l.models.into_iter().map(|m| m.name).collect())
        .map_err(|e| format!("not a list of models ({e})"))
}

const OPENAI_MODELS: ModelList = ModelList {
    route: |_| Ok(Route::path("/models")),
    parse: data_ids,
};

/// Adjusts an encoded request body for a provider.
pub type PrepareBodyFn = fn(Vec<u8>) -> Result<Vec<u8>, ModelError>;

/// Everything about one provider.
pub struct ProviderSpec {
    /// The name `--provider` takes and errors show (`openai`, `bedrock`...).
    pub name: &'static str,
    /// Other names it answers to.
    pub aliases: &'static [&'static str],
    /// Its name in the OpenTelemetry GenAI conventions (`gen_ai.provider.name`:
    /// `openai`, `aws.bedrock`, `gcp.vertex_ai`, `azure.ai.openai`…).
    pub genai_name: &'static str,
    /// One line for `--help`.
    pub summary: &'static str,
    /// Its codec (encoder, decoder, framing).
    pub codec: fn() -> &'static dyn Codec,
    /// The model used when none is named.
    pub default_model: &'static str,
    /// The base URL, with `{setting}` placeholders (`https://{location}-aiplatform...`).
    pub default_base_url: &'static str,
    /// Computes the default base URL instead of the template, when set.
    pub default_base_url_fn: Option<BaseUrlFn>,
    /// Variables a base URL is read from.
    pub base_url_env: &'static [&'static str],
    /// Variables a key is read from.
    pub key_env: &'static [&'static str],
    /// A key (or other credentials) is needed at the default base URL.
    pub key_required: bool,
    /// Other ways to give credentials, named in the error when there are none (empty:
    /// only the key variables).
    pub credentials_help: &'static str,
    /// Settings read from the environment.
    pub settings: &'static [SettingSpec],
    /// Headers sent on every request (a header the caller sets replaces one here).
    pub headers: &'static [(&'static str, &'static str)],
    /// The `Accept` header of a streamed request.
    pub stream_accept: &'static str,
    /// A streamed response may come as `application/json` (Ollama's NDJSON does).
    pub stream_may_be_json: bool,
    /// Where a request for a model goes.
    pub route: fn(&RouteContext<'_>) -> Result<Route, ModelError>,
    /// The default auth when the caller sets none: from the key, or `None`.
    pub auth: AuthFn,
    /// Reads what else the provider needs from the environment.
    pub from_env: Option<FromEnvFn>,
    /// Adjusts the encoded body (Anthropic on Vertex: no `model`, an `anthropic_version`).
    pub prepare_body: Option<PrepareBodyFn>,
    /// How it lists its models (`None`: it does not, over this API).
    pub models: Option<ModelList>,
    /// A bare `host:port` base URL gets this scheme (`OLLAMA_HOST`).
    pub bare_host_scheme: Option<&'static str>,
    /// Endings of a base URL that the routes add themselves (Azure's `/openai/v1`):
    /// cut from a base URL given with them.
    pub trim_base_suffixes: &'static [&'static str],
}

impl ProviderSpec {
    /// The wire format of its codec.
    pub fn format(&self) -> Format {
        (self.codec)().format()
    }

    /// Whether `name` names it.
    pub fn is_named(&self, name: &str) -> bool {
        self.name.eq_ignore_ascii_case(name)
            || self.aliases.iter().any(|a| a.eq_ignore_ascii_case(name))
    }

    /// The variables of its settings, for `--help` and errors.
    pub fn env_vars(&self) -> Vec<&'static str> {
        let mut v: Vec<&'static str> = self.key_env.to_vec();
        v.extend(self.base_url_env);
        for s in self.settings {
            v.extend(s.env);
        }
        v
    }
}

impl fmt::Debug for ProviderSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderSpec")
            .field("name", &self.name)
            .field("format", &self.format())
            .finish_non_exhaustive()
    }
}

impl PartialEq for ProviderSpec {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

/// `Authorization: Bearer KEY` when there is a key.
pub fn bearer_auth(config: &HttpModelConfig) -> Result<Option<Arc<dyn Auth>>, ModelError> {
    key_auth(config, "authorization", "Bearer ")
}

/// `name: {prefix}KEY` when there is a key.
pub fn key_auth(
    config: &HttpModelConfig,
    name: &'static str,
    prefix: &str,
) -> Result<Option<Arc<dyn Auth>>, ModelError> {
    config
        .api_key
        .as_ref()
        .map(|k| Ok(Arc::new(KeyHeader::new(name, prefix, k)?) as Arc<dyn Auth>))
        .transpose()
}

fn chat_route(_: &RouteContext<'_>) -> Result<Route, ModelError> {
    Ok(Route::path("/chat/completions"))
}

fn responses_route(_: &RouteContext<'_>) -> Result<Route, ModelError> {
    Ok(Route::path("/responses"))
}

fn messages_route(_: &RouteContext<'_>) -> Result<Route, ModelError> {
    Ok(Route::path("/v1/messages"))
}

fn ollama_route(_: &RouteContext<'_>) -> Result<Route, ModelError> {
    Ok(Route::path("/api/chat"))
}

fn openai_from_env(
    config: &mut HttpModelConfig,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(), ModelError> {
    if let Some(org) = lookup("OPENAI_ORG_ID") {
        config.headers.push(("OpenAI-Organization".into(), org));
    }
    if let Some(p) = lookup("OPENAI_PROJECT_ID") {
        config.headers.push(("OpenAI-Project".into(), p));
    }
    Ok(())
}

fn openai_chat_codec() -> &'static dyn Codec {
    Format::OPENAI_CHAT.codec()
}

fn openai_responses_codec() -> &'static dyn Codec {
    Format::OPENAI_RESPONSES.codec()
}

fn anthropic_codec() -> &'static dyn Codec {
    Format::ANTHROPIC.codec()
}

fn gemini_codec() -> &'static dyn Codec {
    Format::GEMINI.codec()
}

fn ollama_codec() -> &'static dyn Codec {
    Format::OLLAMA.codec()
}

fn gemini_route(c: &RouteContext<'_>) -> Result<Route, ModelError> {
    Ok(if c.stream {
        Route::path(format!(
            "/v1beta/models/{}:streamGenerateContent",
            c.model_segment
        ))
        .query("alt", "sse")
    } else {
        Route::path(format!(
            "/v1beta/models/{}:generateContent",
            c.model_segment
        ))
    })
}

/// OpenAI Chat Completions.
pub static OPENAI: ProviderSpec = OPENAI_SPEC;

/// [`OPENAI`], as a constant the OpenAI-compatible providers start from.
pub const OPENAI_SPEC: ProviderSpec = ProviderSpec {
    name: "openai",
    genai_name: "openai",
    aliases: &["openai_chat", "chat"],
    summary: "OpenAI Chat Completions (and any compatible server: --base-url)",
    codec: openai_chat_codec,
    default_model: "gpt-4.1",
    default_base_url: "https://api.openai.com/v1",
    default_base_url_fn: None,
    base_url_env: &["OPENAI_BASE_URL"],
    key_env: &["OPENAI_API_KEY"],
    key_required: true,
    credentials_help: "",
    settings: &[],
    headers: &[],
    stream_accept: "text/event-stream",
    stream_may_be_json: false,
    route: chat_route,
    auth: bearer_auth,
    from_env: Some(openai_from_env),
    prepare_body: None,
    models: Some(OPENAI_MODELS),
    bare_host_scheme: None,
    trim_base_suffixes: &[],
};

/// OpenAI Responses.
pub static OPENAI_RESPONSES: ProviderSpec = ProviderSpec {
    name: "openai_responses",
    genai_name: "openai",
    aliases: &["responses"],
    summary: "OpenAI Responses",
    codec: openai_responses_codec,
    default_model: "gpt-5",
    route: responses_route,
    ..OPENAI_SPEC
};

/// Anthropic Messages.
pub static ANTHROPIC: ProviderSpec = ProviderSpec {
    name: "anthropic",
    genai_name: "anthropic",
    aliases: &[],
    summary: "Anthropic Messages",
    codec: anthropic_codec,
    default_model: "claude-sonnet-4-5",
    default_base_url: "https://api.anthropic.com",
    default_base_url_fn: None,
    base_url_env: &["ANTHROPIC_BASE_URL"],
    key_env: &["ANTHROPIC_API_KEY"],
    key_required: true,
    credentials_help: "",
    settings: &[],
    headers: &[("anthropic-version", "2023-06-01")],
    stream_accept: "text/event-stream",
    stream_may_be_json: false,
    route: messages_route,
    auth: |c| key_auth(c, "x-api-key", ""),
    from_env: None,
    prepare_body: None,
    models: Some(ModelList {
        route: |_| Ok(Route::path("/v1/models").query("limit", "1000")),
        parse: data_ids,
    }),
    bare_host_scheme: None,
    trim_base_suffixes: &[],
};

/// Google Gemini (the Gemini API; Gemini on Vertex AI is `vertex`).
pub static GEMINI: ProviderSpec = ProviderSpec {
    name: "gemini",
    genai_name: "gcp.gemini",
    aliases: &["google"],
    summary: "Google Gemini API",
    codec: gemini_codec,
    default_model: "gemini-2.5-flash",
    default_base_url: "https://generativelanguage.googleapis.com",
    default_base_url_fn: None,
    base_url_env: &["GEMINI_BASE_URL"],
    key_env: &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
    key_required: true,
    credentials_help: "",
    settings: &[],
    headers: &[],
    stream_accept: "text/event-stream",
    stream_may_be_json: false,
    route: gemini_route,
    auth: |c| key_auth(c, "x-goog-api-key", ""),
    from_env: None,
    prepare_body: None,
    models: Some(ModelList {
        route: |_| Ok(Route::path("/v1beta/models").query("pageSize", "1000")),
        parse: gemini_ids,
    }),
    bare_host_scheme: None,
    trim_base_suffixes: &[],
};

/// Ollama's native `/api/chat`.
pub static OLLAMA: ProviderSpec = ProviderSpec {
    name: "ollama",
    genai_name: "ollama",
    aliases: &[],
    summary: "Ollama's native API (no key)",
    codec: ollama_codec,
    default_model: "llama3.2",
    default_base_url: "http://127.0.0.1:11434",
    default_base_url_fn: None,
    base_url_env: &["OLLAMA_HOST"],
    key_env: &[],
    key_required: false,
    credentials_help: "",
    settings: &[],
    headers: &[],
    stream_accept: "application/x-ndjson",
    stream_may_be_json: true,
    route: ollama_route,
    auth: bearer_auth,
    from_env: None,
    prepare_body: None,
    models: Some(ModelList {
        route: |_| Ok(Route::path("/api/tags")),
        parse: ollama_ids,
    }),
    bare_host_scheme: Some("http"),
    trim_base_suffixes: &[],
};

/// An OpenAI-compatible service by name: its base URL and key variable.
macro_rules! compatible {
    ($id:ident, $name:literal, $genai:literal, $summary:literal, $url:literal, $key:literal, $model:literal) => {
        #[doc = concat!($summary, " (OpenAI-compatible: `", $url, "`, key `", $key, "`).")]
        pub static $id: ProviderSpec = ProviderSpec {
            name: $name,
            genai_name: $genai,
            aliases: &[],
            summary: $summary,
            default_model: $model,
            default_base_url: $url,
            base_url_env: &[],
            key_env: &[$key],
            from_env: None,
            ..OPENAI_SPEC
        };
    };
}

compatible!(
    MISTRAL,
    "mistral",
    "mistral_ai",
    "Mistral",
    "https://api.mistral.ai/v1",
    "MISTRAL_API_KEY",
    "mistral-large-latest"
);
compatible!(
    DEEPSEEK,
    "deepseek",
    "deepseek",
    "DeepSeek",
    "https://api.deepseek.com/v1",
    "DEEPSEEK_API_KEY",
    "deepseek-chat"
);
compatible!(
    GROQ,
    "groq",
    "groq",
    "Groq",
    "https://api.groq.com/openai/v1",
    "GROQ_API_KEY",
    "llama-3.3-70b-versatile"
);
compatible!(
    XAI,
    "xai",
    "x_ai",
    "xAI",
    "https://api.x.ai/v1",
    "XAI_API_KEY",
    "grok-4"
);
compatible!(
    OPENROUTER,
    "openrouter",
    "openrouter",
    "OpenRouter",
    "https://openrouter.ai/api/v1",
    "OPENROUTER_API_KEY",
    "openai/gpt-4.1"
);
compatible!(
    TOGETHER,
    "together",
    "together_ai",
    "Together AI",
    "https://api.together.xyz/v1",
    "TOGETHER_API_KEY",
    "meta-llama/Llama-3.3-70B-Instruct-Turbo"
);

/// Every provider llmchain knows, in the order `--help` lists them.
pub static PROVIDERS: &[&ProviderSpec] = &[
    &OPENAI,
    &OPENAI_RESPONSES,
    &ANTHROPIC,
    &GEMINI,
    &OLLAMA,
    &super::azure::AZURE,
    &super::azure::AZURE_RESPONSES,
    #[cfg(feature = "bedrock")]
    &super::aws::BEDROCK,
    #[cfg(feature = "vertex")]
    &super::vertex::VERTEX,
    #[cfg(feature = "vertex")]
    &super::vertex::VERTEX_ANTHROPIC,
    &MISTRAL,
    &DEEPSEEK,
    &GROQ,
    &XAI,
    &OPENROUTER,
    &TOGETHER,
];

/// The provider named `name` (or one of its aliases), ignoring case.
pub fn provider(name: &str) -> Option<&'static ProviderSpec> {
    PROVIDERS.iter().copied().find(|p| p.is_named(name))
}

/// The provider named `name`, or an error listing the names.
pub fn provider_or_err(name: &str) -> Result<&'static ProviderSpec, ModelError> {
    provider(name).ok_or_else(|| {
        ModelError::Config(format!(
            "unknown provider {name:?}: expected one of {}",
            names().join(", ")
        ))
    })
}

/// Every provider's name, in order.
pub fn names() -> Vec<&'static str> {
    PROVIDERS.iter().map(|p| p.name).collect()
}

/// The built-in provider that speaks `format` at its own service: the first of
/// [`PROVIDERS`] whose codec it is (OpenAI for OpenAI Chat, Bedrock for Bedrock
/// Converse…). An error naming the format when none does (a format defined outside
/// this crate, or one whose provider's feature is off): give such a format a
/// [`ProviderSpec`] of its own and use [`HttpModelConfig::for_provider`].
pub fn for_format(format: Format) -> Result<&'static ProviderSpec, ModelError> {
    PROVIDERS
        .iter()
        .copied()
        .find(|p| p.format() == format)
        .ok_or_else(|| {
            ModelError::Config(format!(
                "no built-in provider speaks the {} format ({format}){}: describe the service \
                 with a ProviderSpec and use HttpModelConfig::for_provider",
                format.title(),
                if Format::ALL.contains(&format) {
                    ", its provider's feature is off"
                } else {
                    ""
                }
            ))
        })
}

/// A key read from the first of `vars` that is set.
pub(crate) fn key_from(vars: &[&str], lookup: &dyn Fn(&str) -> Option<String>) -> Option<ApiKey> {
    vars.iter()
        .find_map(|k| lookup(k))
        .map(|k| ApiKey::new(k.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found_with_their_aliases() {
        let mut all: Vec<String> = Vec::new();
        for p in PROVIDERS {
            all.push(p.name.to_ascii_lowercase());
            all.extend(p.aliases.iter().map(|a| a.to_ascii_lowercase()));
        }
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n, "a name or alias is used twice");
        assert_eq!(provider("OpenAI_Chat").unwrap().name, "openai");
        assert_eq!(provider("google").unwrap().name, "gemini");
        assert!(provider("nope").is_none());
        assert!(
            provider_or_err("nope")
                .unwrap_err()
                .to_string()
                .contains("bedrock")
                || !names().contains(&"bedrock")
        );
    }

    #[test]
    fn each_format_has_its_own_provider_and_default_model() {
        assert_eq!(for_format(Format::OPENAI_CHAT).unwrap().name, "openai");
        assert_eq!(
            for_format(Format::OPENAI_RESPONSES).unwrap().name,
            "openai_responses"
        );
        #[cfg(feature = "bedrock")]
        {
            let bedrock = for_format(Format::BEDROCK_CONVERSE).unwrap();
            assert_eq!(bedrock.name, "bedrock");
            assert!(!bedrock.default_model.starts_with("gpt"));
        }
        #[cfg(not(feature = "bedrock"))]
        assert!(
            for_format(Format::BEDROCK_CONVERSE)
                .unwrap_err()
                .to_string()
                .contains("bedrock_converse")
        );
        for f in Format::ALL {
            if let Ok(p) = for_format(*f) {
                assert_eq!(p.format(), *f);
            }
        }
    }

    #[test]
    fn providers_carry_the_conventions_names() {
        let genai = |name: &str| provider(name).map(|p| p.genai_name);
        assert_eq!(genai("openai"), Some("openai"));
        assert_eq!(genai("openai_responses"), Some("openai"));
        assert_eq!(genai("gemini"), Some("gcp.gemini"));
        assert_eq!(genai("azure"), Some("azure.ai.openai"));
        assert_eq!(genai("azure_responses"), Some("azure.ai.openai"));
        assert_eq!(genai("mistral"), Some("mistral_ai"));
        assert_eq!(genai("xai"), Some("x_ai"));
        #[cfg(feature = "bedrock")]
        assert_eq!(genai("bedrock"), Some("aws.bedrock"));
        #[cfg(feature = "vertex")]
        {
            assert_eq!(genai("vertex"), Some("gcp.vertex_ai"));
            assert_eq!(genai("vertex-anthropic"), Some("gcp.vertex_ai"));
        }
        for p in PROVIDERS {
            assert!(!p.genai_name.is_empty(), "{}", p.name);
        }
    }

    #[test]
    fn every_provider_has_a_model_and_a_codec() {
        for p in PROVIDERS {
            assert!(!p.default_model.is_empty(), "{}", p.name);
            assert!(!p.summary.is_empty(), "{}", p.name);
            let _ = p.format();
        }
    }
}

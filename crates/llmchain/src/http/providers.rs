//! The registry of providers: each one a [`Provider`], the whole description of how
//! to reach a service — its wire format (the codec), where requests go for a model and
//! whether they stream, how they authenticate, its headers, its default model and the
//! environment variables it reads, and its names. The HTTP client, the CLI (names,
//! `--help`, default models, key errors) and the docs read this list; nothing else holds
//! a `match` over providers.
//!
//! A provider outside this crate implements [`Provider`] (five methods; its codec any
//! [`Codec`], its auth any [`Auth`]) in a `static`, given to
//! [`HttpModelConfig::for_provider`](super::HttpModelConfig::for_provider).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use super::auth::{Auth, KeyHeader};
use super::config::{ApiKey, HttpModelConfig};
use crate::model::ModelError;
use crate::provider::{Codec, Format, Framing};

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

/// How to reach one service: its wire format (the codec), where a request for a model
/// goes, how it authenticates, its headers, default model and base URL, and the
/// environment variables it reads. Five methods say what is the provider's own; the
/// others have the defaults of a bearer-key HTTP API whose streaming follows its
/// codec's framing (as async-openai's `Config` is a trait with defaults, not a struct
/// every provider must spell out).
///
/// ```
/// use llmchain::http::providers::{Provider, Route, RouteContext};
/// use llmchain::model::ModelError;
/// use llmchain::provider::{Codec, Format};
///
/// /// A gateway speaking OpenAI Chat under its own path.
/// struct Gateway;
///
/// impl Provider for Gateway {
///     fn name(&self) -> &'static str { "gateway" }
///     fn codec(&self) -> &'static dyn Codec { Format::OPENAI_CHAT.codec() }
///     fn default_model(&self) -> &'static str { "large" }
///     fn base_url_template(&self) -> &'static str { "https://llm.example.internal" }
///     fn route(&self, c: &RouteContext<'_>) -> Result<Route, ModelError> {
///         Ok(Route::path(format!("/v2/models/{}/chat", c.model_segment)))
///     }
///     fn key_env(&self) -> &'static [&'static str] { &["GATEWAY_KEY"] }
/// }
///
/// static GATEWAY: Gateway = Gateway;
/// let config = llmchain::http::HttpModelConfig::for_provider(&GATEWAY, "large");
/// assert_eq!(config.spec.format(), Format::OPENAI_CHAT);
/// ```
pub trait Provider: Send + Sync + 'static {
    /// The name `--provider` takes and errors show (`openai`, `bedrock`...).
    fn name(&self) -> &'static str;

    /// Its codec (encoder, decoder, framing).
    fn codec(&self) -> &'static dyn Codec;

    /// The model used when none is named.
    fn default_model(&self) -> &'static str;

    /// The base URL, with `{setting}` placeholders
    /// (`https://bedrock-runtime.{region}.amazonaws.com`).
    fn base_url_template(&self) -> &'static str;

    /// Where a request for a model goes, relative to the base URL.
    fn route(&self, c: &RouteContext<'_>) -> Result<Route, ModelError>;

    /// Other names it answers to.
    fn aliases(&self) -> &'static [&'static str] {
        &[]
    }

    /// Its name in the OpenTelemetry GenAI conventions (`gen_ai.provider.name`:
    /// `openai`, `aws.bedrock`, `gcp.vertex_ai`, `azure.ai.openai`…); default: its name.
    fn genai_name(&self) -> &'static str {
        self.name()
    }

    /// One line for `--help`; default: its format's title.
    fn summary(&self) -> &'static str {
        self.codec().format().title()
    }

    /// The default base URL with the settings filled in; default: the
    /// [template](Self::base_url_template)'s placeholders replaced, or an error naming
    /// the variable to set.
    fn default_base_url(&self, settings: &BTreeMap<String, String>) -> Result<String, ModelError> {
        fill(self.base_url_template(), self.name(), self, settings)
    }

    /// Variables a base URL is read from.
    fn base_url_env(&self) -> &'static [&'static str] {
        &[]
    }

    /// Variables a key is read from.
    fn key_env(&self) -> &'static [&'static str] {
        &[]
    }

    /// A key (or other credentials) is needed at the default base URL; default: when it
    /// reads a key.
    fn key_required(&self) -> bool {
        !self.key_env().is_empty()
    }

    /// Other ways to give credentials, named in the error when there are none (empty:
    /// only the key variables).
    fn credentials_help(&self) -> &'static str {
        ""
    }

    /// Settings read from the environment.
    fn settings(&self) -> &'static [SettingSpec] {
        &[]
    }

    /// Headers sent on every request (a header the caller sets replaces one here).
    fn headers(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }

    /// The `Accept` header of a streamed request; default: its codec's framing's type.
    fn stream_accept(&self) -> &'static str {
        match self.codec().format().framing() {
            Framing::Sse => "text/event-stream",
            Framing::Ndjson => "application/x-ndjson",
            Framing::EventStream => "application/vnd.amazon.eventstream",
            _ => "*/*",
        }
    }

    /// A streamed response may come as `application/json`; default: when its framing is
    /// NDJSON (Ollama's is).
    fn stream_may_be_json(&self) -> bool {
        self.codec().format().framing() == Framing::Ndjson
    }

    /// The auth when the caller sets none; default: `Authorization: Bearer KEY` when
    /// there is a key ([`bearer_auth`]).
    fn auth(&self, config: &HttpModelConfig) -> Result<Option<Arc<dyn Auth>>, ModelError> {
        bearer_auth(config)
    }

    /// Reads what else it needs from the environment (`lookup`) beyond key, base URL
    /// and settings: credentials files, extra headers. Default: nothing.
    fn read_env(
        &self,
        config: &mut HttpModelConfig,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), ModelError> {
        let _ = (config, lookup);
        Ok(())
    }

    /// Adjusts the encoded body (Anthropic on Vertex: no `model`, an
    /// `anthropic_version`); default: as encoded.
    fn prepare_body(&self, body: Vec<u8>) -> Result<Vec<u8>, ModelError> {
        Ok(body)
    }

    /// How it lists its models (`None`, the default: it does not, over this API).
    fn models(&self) -> Option<ModelList> {
        None
    }

    /// A bare `host:port` base URL gets this scheme (`OLLAMA_HOST`).
    fn bare_host_scheme(&self) -> Option<&'static str> {
        None
    }

    /// Endings of a base URL that the routes add themselves (Azure's `/openai/v1`): cut
    /// from a base URL given with them.
    fn trim_base_suffixes(&self) -> &'static [&'static str] {
        &[]
    }
}

impl dyn Provider {
    /// The wire format of its codec.
    pub fn format(&self) -> Format {
        self.codec().format()
    }

    /// Whether `name` names it.
    pub fn is_named(&self, name: &str) -> bool {
        self.name().eq_ignore_ascii_case(name)
            || self.aliases().iter().any(|a| a.eq_ignore_ascii_case(name))
    }

    /// The variables it reads, for `--help` and errors.
    pub fn env_vars(&self) -> Vec<&'static str> {
        let mut v: Vec<&'static str> = self.key_env().to_vec();
        v.extend(self.base_url_env());
        for s in self.settings() {
            v.extend(s.env);
        }
        v
    }

    /// Whether `self` and `other` are the same provider.
    pub fn same(&self, other: &dyn Provider) -> bool {
        std::ptr::addr_eq(self, other)
    }
}

impl fmt::Debug for dyn Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Provider")
            .field("name", &self.name())
            .field("format", &self.format())
            .finish_non_exhaustive()
    }
}

/// `template` with each `{setting}` replaced by its value, or an error naming the
/// variable to set.
fn fill(
    template: &str,
    name: &str,
    spec: &(impl Provider + ?Sized),
    settings: &BTreeMap<String, String>,
) -> Result<String, ModelError> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        let key = &rest[open + 1..open + close];
        match settings.get(key).filter(|v| !v.is_empty()) {
            Some(v) if v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') => out.push_str(v),
            Some(v) => {
                return Err(ModelError::Config(format!(
                    "the {key} setting of {name} is {v:?}: only letters, digits and '-' make a host name"
                )));
            }
            None => {
                let vars = spec
                    .settings()
                    .iter()
                    .find(|s| s.key == key)
                    .map(|s| s.env.join(" or "))
                    .unwrap_or_default();
                let base = spec
                    .base_url_env()
                    .first()
                    .map(|v| format!(", or the whole base URL with {v}"))
                    .unwrap_or_default();
                return Err(ModelError::Config(format!(
                    "{name} needs its {key}: set {vars}{base} (or HttpModelConfig::setting(\"{key}\", ...))"
                )));
            }
        }
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    Ok(out)
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

/// Which OpenAI API an OpenAI-shaped provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpenAiApi {
    /// Chat Completions.
    Chat,
    /// Responses.
    Responses,
}

impl OpenAiApi {
    pub(crate) fn codec(self) -> &'static dyn Codec {
        match self {
            OpenAiApi::Chat => Format::OPENAI_CHAT.codec(),
            OpenAiApi::Responses => Format::OPENAI_RESPONSES.codec(),
        }
    }

    pub(crate) fn route(self) -> Route {
        match self {
            OpenAiApi::Chat => Route::path("/chat/completions"),
            OpenAiApi::Responses => Route::path("/responses"),
        }
    }
}

/// OpenAI and the services that speak its API at their own base URL with a bearer key.
struct OpenAiLike {
    name: &'static str,
    genai_name: &'static str,
    aliases: &'static [&'static str],
    summary: &'static str,
    api: OpenAiApi,
    default_model: &'static str,
    base_url: &'static str,
    base_url_env: &'static [&'static str],
    key_env: &'static [&'static str],
    /// Reads `OPENAI_ORG_ID` and `OPENAI_PROJECT_ID` into their headers.
    organization: bool,
}

impl Provider for OpenAiLike {
    fn name(&self) -> &'static str {
        self.name
    }
    fn codec(&self) -> &'static dyn Codec {
        self.api.codec()
    }
    fn default_model(&self) -> &'static str {
        self.default_model
    }
    fn base_url_template(&self) -> &'static str {
        self.base_url
    }
    fn route(&self, _: &RouteContext<'_>) -> Result<Route, ModelError> {
        Ok(self.api.route())
    }
    fn aliases(&self) -> &'static [&'static str] {
        self.aliases
    }
    fn genai_name(&self) -> &'static str {
        self.genai_name
    }
    fn summary(&self) -> &'static str {
        self.summary
    }
    fn base_url_env(&self) -> &'static [&'static str] {
        self.base_url_env
    }
    fn key_env(&self) -> &'static [&'static str] {
        self.key_env
    }
    fn read_env(
        &self,
        config: &mut HttpModelConfig,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), ModelError> {
        if !self.organization {
            return Ok(());
        }
        if let Some(org) = lookup("OPENAI_ORG_ID") {
            config.headers.push(("OpenAI-Organization".into(), org));
        }
        if let Some(p) = lookup("OPENAI_PROJECT_ID") {
            config.headers.push(("OpenAI-Project".into(), p));
        }
        Ok(())
    }
    fn models(&self) -> Option<ModelList> {
        Some(OPENAI_MODELS)
    }
}

/// OpenAI Chat Completions.
pub static OPENAI: &dyn Provider = &OpenAiLike {
    name: "openai",
    genai_name: "openai",
    aliases: &["openai_chat", "chat"],
    summary: "OpenAI Chat Completions (and any compatible server: --base-url)",
    api: OpenAiApi::Chat,
    default_model: "gpt-4.1",
    base_url: "https://api.openai.com/v1",
    base_url_env: &["OPENAI_BASE_URL"],
    key_env: &["OPENAI_API_KEY"],
    organization: true,
};

/// OpenAI Responses.
pub static OPENAI_RESPONSES: &dyn Provider = &OpenAiLike {
    name: "openai_responses",
    genai_name: "openai",
    aliases: &["responses"],
    summary: "OpenAI Responses",
    api: OpenAiApi::Responses,
    default_model: "gpt-5",
    base_url: "https://api.openai.com/v1",
    base_url_env: &["OPENAI_BASE_URL"],
    key_env: &["OPENAI_API_KEY"],
    organization: true,
};

/// An OpenAI-compatible service by name: its base URL and key variable.
macro_rules! compatible {
    ($id:ident, $name:literal, $genai:literal, $summary:literal, $url:literal, $key:literal, $model:literal) => {
        #[doc = concat!($summary, " (OpenAI-compatible: `", $url, "`, key `", $key, "`).")]
        pub static $id: &dyn Provider = &OpenAiLike {
            name: $name,
            genai_name: $genai,
            aliases: &[],
            summary: $summary,
            api: OpenAiApi::Chat,
            default_model: $model,
            base_url: $url,
            base_url_env: &[],
            key_env: &[$key],
            organization: false,
        };
    };
}

/// Anthropic Messages.
struct Anthropic;

impl Provider for Anthropic {
    fn name(&self) -> &'static str {
        "anthropic"
    }
    fn codec(&self) -> &'static dyn Codec {
        Format::ANTHROPIC.codec()
    }
    fn default_model(&self) -> &'static str {
        "claude-sonnet-4-5"
    }
    fn base_url_template(&self) -> &'static str {
        "https://api.anthropic.com"
    }
    fn route(&self, _: &RouteContext<'_>) -> Result<Route, ModelError> {
        Ok(Route::path("/v1/messages"))
    }
    fn summary(&self) -> &'static str {
        "Anthropic Messages"
    }
    fn base_url_env(&self) -> &'static [&'static str] {
        &["ANTHROPIC_BASE_URL"]
    }
    fn key_env(&self) -> &'static [&'static str] {
        &["ANTHROPIC_API_KEY"]
    }
    fn headers(&self) -> &'static [(&'static str, &'static str)] {
        &[("anthropic-version", "2023-06-01")]
    }
    fn auth(&self, config: &HttpModelConfig) -> Result<Option<Arc<dyn Auth>>, ModelError> {
        key_auth(config, "x-api-key", "")
    }
    fn models(&self) -> Option<ModelList> {
        Some(ModelList {
            route: |_| Ok(Route::path("/v1/models").query("limit", "1000")),
            parse: data_ids,
        })
    }
}

/// Anthropic Messages.
pub static ANTHROPIC: &dyn Provider = &Anthropic;

/// The Gemini API.
struct Gemini;

impl Provider for Gemini {
    fn name(&self) -> &'static str {
        "gemini"
    }
    fn codec(&self) -> &'static dyn Codec {
        Format::GEMINI.codec()
    }
    fn default_model(&self) -> &'static str {
        "gemini-2.5-flash"
    }
    fn base_url_template(&self) -> &'static str {
        "https://generativelanguage.googleapis.com"
    }
    fn route(&self, c: &RouteContext<'_>) -> Result<Route, ModelError> {
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
    fn aliases(&self) -> &'static [&'static str] {
        &["google"]
    }
    fn genai_name(&self) -> &'static str {
        "gcp.gemini"
    }
    fn summary(&self) -> &'static str {
        "Google Gemini API"
    }
    fn base_url_env(&self) -> &'static [&'static str] {
        &["GEMINI_BASE_URL"]
    }
    fn key_env(&self) -> &'static [&'static str] {
        &["GEMINI_API_KEY", "GOOGLE_API_KEY"]
    }
    fn auth(&self, config: &HttpModelConfig) -> Result<Option<Arc<dyn Auth>>, ModelError> {
        key_auth(config, "x-goog-api-key", "")
    }
    fn models(&self) -> Option<ModelList> {
        Some(ModelList {
            route: |_| Ok(Route::path("/v1beta/models").query("pageSize", "1000")),
            parse: gemini_ids,
        })
    }
}

/// Google Gemini (the Gemini API; Gemini on Vertex AI is `vertex`).
pub static GEMINI: &dyn Provider = &Gemini;

/// Ollama's native API.
struct Ollama;

impl Provider for Ollama {
    fn name(&self) -> &'static str {
        "ollama"
    }
    fn codec(&self) -> &'static dyn Codec {
        Format::OLLAMA.codec()
    }
    fn default_model(&self) -> &'static str {
        "llama3.2"
    }
    fn base_url_template(&self) -> &'static str {
        "http://127.0.0.1:11434"
    }
    fn route(&self, _: &RouteContext<'_>) -> Result<Route, ModelError> {
        Ok(Route::path("/api/chat"))
    }
    fn summary(&self) -> &'static str {
        "Ollama's native API (no key)"
    }
    fn base_url_env(&self) -> &'static [&'static str] {
        &["OLLAMA_HOST"]
    }
    fn models(&self) -> Option<ModelList> {
        Some(ModelList {
            route: |_| Ok(Route::path("/api/tags")),
            parse: ollama_ids,
        })
    }
    fn bare_host_scheme(&self) -> Option<&'static str> {
        Some("http")
    }
}

/// Ollama's native `/api/chat`.
pub static OLLAMA: &dyn Provider = &Ollama;

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
pub static PROVIDERS: &[&dyn Provider] = &[
    OPENAI,
    OPENAI_RESPONSES,
    ANTHROPIC,
    GEMINI,
    OLLAMA,
    super::azure::AZURE,
    super::azure::AZURE_RESPONSES,
    #[cfg(feature = "bedrock")]
    super::aws::BEDROCK,
    #[cfg(feature = "vertex")]
    super::vertex::VERTEX,
    #[cfg(feature = "vertex")]
    super::vertex::VERTEX_ANTHROPIC,
    MISTRAL,
    DEEPSEEK,
    GROQ,
    XAI,
    OPENROUTER,
    TOGETHER,
];

/// The provider named `name` (or one of its aliases), ignoring case.
pub fn provider(name: &str) -> Option<&'static dyn Provider> {
    PROVIDERS.iter().copied().find(|p| p.is_named(name))
}

/// The provider named `name`, or an error listing the names.
pub fn provider_or_err(name: &str) -> Result<&'static dyn Provider, ModelError> {
    provider(name).ok_or_else(|| {
        ModelError::Config(format!(
            "unknown provider {name:?}: expected one of {}",
            names().join(", ")
        ))
    })
}

/// Every provider's name, in order.
pub fn names() -> Vec<&'static str> {
    PROVIDERS.iter().map(|p| p.name()).collect()
}

/// The built-in provider that speaks `format` at its own service: the first of
/// [`PROVIDERS`] whose codec it is (OpenAI for OpenAI Chat, Bedrock for Bedrock
/// Converse…). An error naming the format when none does (a format defined outside
/// this crate, or one whose provider's feature is off): give such a format a
/// [`Provider`] of its own and use [`HttpModelConfig::for_provider`].
pub fn for_format(format: Format) -> Result<&'static dyn Provider, ModelError> {
    PROVIDERS
        .iter()
        .copied()
        .find(|p| p.format() == format)
        .ok_or_else(|| {
            ModelError::Config(format!(
                "no built-in provider speaks the {} format ({format}){}: describe the service \
                 with a Provider and use HttpModelConfig::for_provider",
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
            all.push(p.name().to_ascii_lowercase());
            all.extend(p.aliases().iter().map(|a| a.to_ascii_lowercase()));
        }
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n, "a name or alias is used twice");
        assert_eq!(provider("OpenAI_Chat").unwrap().name(), "openai");
        assert_eq!(provider("google").unwrap().name(), "gemini");
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
        assert_eq!(for_format(Format::OPENAI_CHAT).unwrap().name(), "openai");
        assert_eq!(
            for_format(Format::OPENAI_RESPONSES).unwrap().name(),
            "openai_responses"
        );
        #[cfg(feature = "bedrock")]
        {
            let bedrock = for_format(Format::BEDROCK_CONVERSE).unwrap();
            assert_eq!(bedrock.name(), "bedrock");
            assert!(!bedrock.default_model().starts_with("gpt"));
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
        let genai = |name: &str| provider(name).map(|p| p.genai_name());
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
            assert!(!p.genai_name().is_empty(), "{}", p.name());
        }
    }

    #[test]
    fn the_defaults_follow_the_codec() {
        assert_eq!(OPENAI.stream_accept(), "text/event-stream");
        assert!(!OPENAI.stream_may_be_json());
        assert_eq!(OLLAMA.stream_accept(), "application/x-ndjson");
        assert!(OLLAMA.stream_may_be_json());
        #[cfg(feature = "bedrock")]
        assert_eq!(
            super::super::aws::BEDROCK.stream_accept(),
            "application/vnd.amazon.eventstream"
        );

        /// A provider that says only the five things that are its own.
        struct Least;
        impl Provider for Least {
            fn name(&self) -> &'static str {
                "least"
            }
            fn codec(&self) -> &'static dyn Codec {
                Format::ANTHROPIC.codec()
            }
            fn default_model(&self) -> &'static str {
                "m"
            }
            fn base_url_template(&self) -> &'static str {
                "https://{host}.example"
            }
            fn route(&self, _: &RouteContext<'_>) -> Result<Route, ModelError> {
                Ok(Route::path("/x"))
            }
        }
        static LEAST: Least = Least;
        let p: &dyn Provider = &LEAST;
        assert_eq!(p.genai_name(), "least");
        assert_eq!(p.summary(), Format::ANTHROPIC.title());
        assert!(!p.key_required());
        assert!(p.models().is_none());
        assert_eq!(p.prepare_body(b"{}".to_vec()).unwrap(), b"{}");
        let e = p
            .default_base_url(&BTreeMap::new())
            .unwrap_err()
            .to_string();
        assert!(e.contains("least needs its host"), "{e}");
        let settings = BTreeMap::from([("host".to_owned(), "eu-1".to_owned())]);
        assert_eq!(
            p.default_base_url(&settings).unwrap(),
            "https://eu-1.example"
        );
        let bad = BTreeMap::from([("host".to_owned(), "evil.com/".to_owned())]);
        assert!(p.default_base_url(&bad).is_err());
        assert!(p.same(&LEAST) && !p.same(OPENAI));
        assert!(format!("{p:?}").contains("least"));
    }

    #[test]
    fn every_provider_has_a_model_and_a_codec() {
        for p in PROVIDERS {
            assert!(!p.default_model().is_empty(), "{}", p.name());
            assert!(!p.summary().is_empty(), "{}", p.name());
            let _ = p.format();
        }
    }
}

//! [`HttpModelConfig`]: what an [`HttpModel`](super::HttpModel) needs — format, model, key,
//! base URL, headers, timeouts, retries — and how it is read from the environment.

use std::fmt;
use std::time::Duration;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::auth::Auth;
use super::providers::{self, Provider};
use crate::model::ModelError;
use crate::provider::Format;

/// An API key. Its `Debug` prints `[redacted]`; it has no `Display` and no `Serialize`,
/// so it cannot end up in logs or error messages by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key, and registers it with the process's masker
    /// ([`secrets`](crate::secrets)): wherever it is echoed, it is masked before it is
    /// stored, printed or logged.
    pub fn new(key: impl Into<String>) -> Self {
        let key = key.into();
        crate::secrets::register(&key);
        ApiKey(key)
    }

    /// The key itself: only for building the auth header.
    pub fn expose_secret(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Connect and read timeouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Limit on opening the TCP/TLS connection.
    pub connect: Duration,
    /// Limit on waiting for the next bytes (response headers or the next chunk of a
    /// stream): an idle timeout, so a long stream that keeps sending is never cut by it.
    pub read: Duration,
    /// Overall deadline of one model call, retries and the whole stream included: a
    /// server trickling keep-alives or text cannot hold a call open past it (default 10
    /// minutes).
    pub total: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(10),
            read: Duration::from_secs(120),
            total: Duration::from_secs(600),
        }
    }
}

/// Retries of retryable failures (429, 5xx, 529/overloaded, connect errors and timeouts
/// before any response): jittered exponential backoff under a total deadline, honouring
/// `Retry-After`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all (1 = no retry).
    pub max_attempts: u32,
    /// Delay before the first retry (doubled each time, then jittered).
    pub base_delay: Duration,
    /// Cap on one backoff delay (a longer `Retry-After` is still honoured if it fits
    /// the deadline).
    pub max_delay: Duration,
    /// No retry starts once waiting for it would pass this much time since the call began.
    pub total_deadline: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(20),
            total_deadline: Duration::from_secs(120),
        }
    }
}

impl RetryPolicy {
    /// No retries.
    pub fn none() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..Default::default()
        }
    }

    /// The backoff before retry number `retry` (1-based): `base * 2^(retry-1)` capped at
    /// `max_delay`, with "equal jitter" (a random point in the upper half).
    pub fn backoff(&self, retry: u32) -> Duration {
        let exp = self
            .base_delay
            .saturating_mul(1u32 << retry.saturating_sub(1).min(20));
        let capped = exp.min(self.max_delay);
        let half = capped / 2;
        half + half.mul_f64(fastrand::f64())
    }
}

/// Everything an [`HttpModel`](super::HttpModel) is configured with.
///
/// ```
/// use llmchain::http::{HttpModelConfig, RetryPolicy};
///
/// let config = HttpModelConfig::anthropic("claude-sonnet-4-5")
///     .api_key("sk-ant-secret")
///     .header("anthropic-beta", "fine-grained-tool-streaming-2025-05-14")
///     .retry(RetryPolicy::none());
/// assert!(!format!("{config:?}").contains("sk-ant-secret"));
/// ```
#[derive(Clone)]
pub struct HttpModelConfig {
    /// The provider: its codec, routes, auth, defaults ([`providers`](super::providers)).
    pub spec: &'static dyn Provider,
    /// The model id (a deployment name on Azure, a model or inference-profile id or ARN
    /// on Bedrock).
    pub model: String,
    /// The key (none for Ollama and keyless compatible servers).
    pub api_key: Option<ApiKey>,
    /// How requests authenticate, replacing the provider's default (the key in its
    /// header): a token source, request signing, a scheme of your own.
    pub auth: Option<Arc<dyn Auth>>,
    /// The base URL; empty: the provider's default (which may be built from
    /// [`settings`](Self::settings), as Bedrock's region). OpenAI formats: up to and
    /// including `/v1` (as `OPENAI_BASE_URL`); Anthropic, Gemini and Ollama: the host
    /// root.
    pub base_url: String,
    /// The provider's settings: `region`, `project`, `location`, `api_version`,
    /// `resource` (see each provider's [`SettingSpec`](super::providers::SettingSpec)s).
    pub settings: BTreeMap<String, String>,
    /// Extra headers sent on every request (organization, project, `anthropic-version`,
    /// `anthropic-beta`, ...). A header set here replaces the default of the same name.
    pub headers: Vec<(String, String)>,
    /// Connect and read timeouts.
    pub timeouts: Timeouts,
    /// Retries.
    pub retry: RetryPolicy,
    /// Stream the response (default) or ask for one JSON document.
    pub stream: bool,
    /// Output token cap.
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Extra top-level body fields; a key given here replaces the typed one.
    pub extra: Map<String, Value>,
    /// A display name for the provider in errors and traces (default: the provider's
    /// name).
    pub provider: String,
    /// Cap on a response's body, streamed or not (default [`DEFAULT_MAX_RESPONSE_BYTES`]).
    pub max_response_bytes: usize,
}

/// The default cap on a response's body: 64 MiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 64 << 20;

/// Prints no secret: the key as `[redacted]`, the base URL without its password or
/// query values, extra headers by name only (an `Authorization` header set here is as
/// secret as the key).
impl fmt::Debug for HttpModelConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let base = self
            .resolved_base_url()
            .ok()
            .and_then(|u| super::endpoint::Endpoint::new(&u, "", &[]).ok())
            .map(|e| e.shown)
            .unwrap_or_else(|| "(not a URL)".to_owned());
        let headers: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("HttpModelConfig")
            .field("provider", &self.spec.name())
            .field("model", &self.model)
            .field("api_key", &self.api_key)
            .field("auth", &self.auth)
            .field("base_url", &base)
            .field("settings", &self.settings)
            .field("headers", &headers)
            .field("timeouts", &self.timeouts)
            .field("retry", &self.retry)
            .field("stream", &self.stream)
            .field("max_tokens", &self.max_tokens)
            .field("temperature", &self.temperature)
            .field("extra", &self.extra.keys().collect::<Vec<_>>())
            .field("max_response_bytes", &self.max_response_bytes)
            .finish()
    }
}

impl HttpModelConfig {
    /// A config with defaults for the built-in provider of `format` (OpenAI for OpenAI
    /// Chat, Bedrock for Bedrock Converse…, [`providers::for_format`]): its base URL,
    /// no key, streaming. An error naming the format when no built-in provider speaks
    /// it.
    pub fn new(format: Format, model: impl Into<String>) -> Result<Self, ModelError> {
        Ok(Self::for_provider(providers::for_format(format)?, model))
    }

    /// A config with defaults for `spec`, one of [`providers::PROVIDERS`] or a
    /// provider of your own.
    pub fn for_provider(spec: &'static dyn Provider, model: impl Into<String>) -> Self {
        HttpModelConfig {
            spec,
            model: model.into(),
            api_key: None,
            auth: None,
            base_url: String::new(),
            settings: spec
                .settings()
                .iter()
                .filter_map(|s| Some((s.key.to_owned(), s.default?.to_owned())))
                .collect(),
            headers: Vec::new(),
            timeouts: Timeouts::default(),
            retry: RetryPolicy::default(),
            stream: true,
            max_tokens: None,
            temperature: None,
            extra: Map::new(),
            provider: spec.name().to_owned(),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }

    /// The provider named `name` ([`providers::provider`]), with its defaults.
    pub fn named(name: &str, model: impl Into<String>) -> Result<Self, ModelError> {
        Ok(Self::for_provider(providers::provider_or_err(name)?, model))
    }

    /// OpenAI Chat Completions (also any compatible server: set [`base_url`](Self::base_url)).
    pub fn openai(model: impl Into<String>) -> Self {
        Self::for_provider(providers::OPENAI, model)
    }

    /// OpenAI Responses.
    pub fn openai_responses(model: impl Into<String>) -> Self {
        Self::for_provider(providers::OPENAI_RESPONSES, model)
    }

    /// Anthropic Messages.
    pub fn anthropic(model: impl Into<String>) -> Self {
        Self::for_provider(providers::ANTHROPIC, model)
    }

    /// Google Gemini.
    pub fn gemini(model: impl Into<String>) -> Self {
        Self::for_provider(providers::GEMINI, model)
    }

    /// Ollama's native `/api/chat` (no key).
    pub fn ollama(model: impl Into<String>) -> Self {
        Self::for_provider(providers::OLLAMA, model)
    }

    /// The wire format.
    pub fn format(&self) -> Format {
        self.spec.format()
    }

    /// A config for the built-in provider of `format` from the environment
    /// ([`from_env_for`](Self::from_env_for)).
    pub fn from_env(format: Format, model: impl Into<String>) -> Result<Self, ModelError> {
        Self::from_env_for(providers::for_format(format)?, model)
    }

    /// A config for `spec` from the environment: its key, base URL and settings from
    /// the variables it names (`OPENAI_API_KEY`, `ANTHROPIC_BASE_URL`, `AWS_REGION`...),
    /// and what else it reads (`OPENAI_ORG_ID`, credentials files). A missing key is an
    /// error only when the check in [`validate`](Self::validate) says so (the
    /// provider's own endpoint).
    pub fn from_env_for(
        spec: &'static dyn Provider,
        model: impl Into<String>,
    ) -> Result<Self, ModelError> {
        Self::from_lookup_for(spec, model, |k| std::env::var(k).ok())
    }

    /// As [`from_env`](Self::from_env) with a custom variable lookup (for tests).
    pub fn from_lookup(
        format: Format,
        model: impl Into<String>,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ModelError> {
        Self::from_lookup_for(providers::for_format(format)?, model, lookup)
    }

    /// As [`from_env_for`](Self::from_env_for) with a custom variable lookup.
    pub fn from_lookup_for(
        spec: &'static dyn Provider,
        model: impl Into<String>,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ModelError> {
        let c = Self::for_provider(spec, model).read_env(lookup)?;
        c.validate()?;
        Ok(c)
    }

    /// Reads what the provider takes from the environment (`lookup`), without
    /// [`validate`](Self::validate): its key, base URL and settings from the variables
    /// it names, and what else it reads (headers, credentials files). For a caller that
    /// sets more (a base URL of its own) before validating.
    pub fn read_env(mut self, lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ModelError> {
        let spec = self.spec;
        let get = |k: &str| lookup(k).filter(|v| !v.trim().is_empty());
        if let Some(key) = providers::key_from(spec.key_env(), &get) {
            self.api_key = Some(key);
        }
        if let Some(url) = spec.base_url_env().iter().find_map(|k| get(k)) {
            self.base_url = url;
        }
        for s in spec.settings() {
            if let Some(v) = s.env.iter().find_map(|k| get(k)) {
                self.settings.insert(s.key.to_owned(), v.trim().to_owned());
            }
        }
        spec.read_env(&mut self, &get)?;
        Ok(self)
    }

    /// Sets the key.
    #[must_use]
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(ApiKey::new(key));
        self
    }

    /// Sets how requests authenticate (replacing the key header).
    #[must_use]
    pub fn auth(mut self, auth: Arc<dyn Auth>) -> Self {
        self.auth = Some(auth);
        self
    }

    /// Sets the base URL.
    #[must_use]
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }

    /// Sets a provider setting (`region`, `project`, `location`, `api_version`,
    /// `resource`).
    #[must_use]
    pub fn setting(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.settings.insert(key.into(), value.into());
        self
    }

    /// Adds a header sent on every request.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Adds a top-level body field (it replaces a typed one of the same name).
    #[must_use]
    pub fn extra(mut self, key: impl Into<String>, value: Value) -> Self {
        self.extra.insert(key.into(), value);
        self
    }

    /// OpenAI organization header.
    #[must_use]
    pub fn organization(self, org: impl Into<String>) -> Self {
        self.header("OpenAI-Organization", org)
    }

    /// OpenAI project header.
    #[must_use]
    pub fn project(self, project: impl Into<String>) -> Self {
        self.header("OpenAI-Project", project)
    }

    /// Sets the timeouts.
    #[must_use]
    pub fn timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// Sets the cap on a response's body, in bytes.
    #[must_use]
    pub fn max_response_bytes(mut self, n: usize) -> Self {
        self.max_response_bytes = n;
        self
    }

    /// Sets the retry policy.
    #[must_use]
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Streams (default) or not.
    #[must_use]
    pub fn stream(mut self, stream: bool) -> Self {
        self.stream = stream;
        self
    }

    /// Output token cap.
    #[must_use]
    pub fn max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = Some(n);
        self
    }

    /// Checks the config can make a request: the base URL must be http(s) (and the
    /// settings it is built from set), and a provider that needs a key has one (or an
    /// [`auth`](Self::auth)) when talking to its own endpoint (a custom base URL may be
    /// a keyless compatible server).
    pub fn validate(&self) -> Result<(), ModelError> {
        let url = self.resolved_base_url()?;
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(ModelError::Config(format!(
                "the base URL for {} must start with http:// or https:// (got {url:?}{})",
                self.provider,
                self.spec
                    .base_url_env()
                    .first()
                    .map(|v| format!("; set {v}"))
                    .unwrap_or_default()
            )));
        }
        let at_default =
            self.base_url.trim().is_empty() || url == self.default_base_url().unwrap_or_default();
        if self.spec.key_required() && at_default && self.api_key.is_none() && self.auth.is_none() {
            let mut vars = self.spec.key_env().join(" or ");
            if !self.spec.credentials_help().is_empty() {
                vars = if vars.is_empty() {
                    self.spec.credentials_help().to_owned()
                } else {
                    format!("{}, or {vars}", self.spec.credentials_help())
                };
            }
            let base = self
                .spec
                .base_url_env()
                .first()
                .map(|v| format!(" (or {v} for a compatible server without a key)"))
                .unwrap_or_default();
            return Err(ModelError::Config(format!(
                "no API key for {}: set {vars}{base}",
                self.provider
            )));
        }
        Ok(())
    }

    /// The provider's default base URL with its settings filled in.
    pub fn default_base_url(&self) -> Result<String, ModelError> {
        self.spec.default_base_url(&self.settings)
    }

    /// The base URL requests go under: the one set, else the provider's default; with
    /// a scheme (Ollama's `OLLAMA_HOST` is often `host:port`), without a trailing slash
    /// or an ending the routes add themselves.
    pub fn resolved_base_url(&self) -> Result<String, ModelError> {
        let given = self.base_url.trim();
        // A password or key in the URL is a secret of the process's too.
        crate::secrets::register_url(given);
        let mut url = if given.is_empty() {
            self.default_base_url()?
        } else {
            given.to_owned()
        };
        if let Some(scheme) = self.spec.bare_host_scheme()
            && !url.contains("://")
        {
            url = format!("{scheme}://{url}");
        }
        let mut url = url.trim_end_matches('/').to_owned();
        for suffix in self.spec.trim_base_suffixes() {
            if let Some(cut) = url.strip_suffix(suffix) {
                url = cut.to_owned();
                break;
            }
        }
        Ok(url)
    }

    /// As [`resolved_base_url`](Self::resolved_base_url), for a config known valid.
    pub fn normalized_base_url(&self) -> String {
        self.resolved_base_url().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_redacts_the_key() {
        let c = HttpModelConfig::openai("gpt-4.1").api_key("sk-very-secret-123");
        let s = format!("{c:?}");
        assert!(!s.contains("sk-very-secret-123"), "{s}");
        assert!(s.contains("[redacted]"), "{s}");
    }

    #[test]
    fn env_lookup_reads_keys_and_urls() {
        let env = |k: &str| match k {
            "GOOGLE_API_KEY" => Some("g-key".to_owned()),
            "GEMINI_BASE_URL" => Some("http://127.0.0.1:9/".to_owned()),
            _ => None,
        };
        let c = HttpModelConfig::from_lookup(Format::GEMINI, "gemini-2.5-flash", env).unwrap();
        assert_eq!(c.api_key.unwrap().expose_secret(), "g-key");
        assert_eq!(c.base_url, "http://127.0.0.1:9/");
    }

    #[test]
    fn missing_key_says_what_to_set() {
        let e = HttpModelConfig::from_lookup(Format::ANTHROPIC, "m", |_| None).unwrap_err();
        assert!(e.to_string().contains("ANTHROPIC_API_KEY"), "{e}");
        // A compatible server needs no key; Ollama never does.
        let env = |k: &str| (k == "OPENAI_BASE_URL").then(|| "http://localhost:8000/v1".into());
        assert!(HttpModelConfig::from_lookup(Format::OPENAI_CHAT, "m", env).is_ok());
        let ollama = HttpModelConfig::from_lookup(Format::OLLAMA, "m", |k| {
            (k == "OLLAMA_HOST").then(|| "0.0.0.0:11434".into())
        })
        .unwrap();
        assert_eq!(ollama.normalized_base_url(), "http://0.0.0.0:11434");
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let p = RetryPolicy {
            max_attempts: 10,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(400),
            total_deadline: Duration::from_secs(10),
        };
        for _ in 0..50 {
            let d1 = p.backoff(1);
            assert!(d1 >= Duration::from_millis(50) && d1 <= Duration::from_millis(100));
            let d5 = p.backoff(5);
            assert!(d5 >= Duration::from_millis(200) && d5 <= Duration::from_millis(400));
        }
    }
}

//! [`HttpModelConfig`]: what an [`HttpModel`](super::HttpModel) needs — format, model, key,
//! base URL, headers, timeouts, retries — and how it is read from the environment.

use std::fmt;
use std::time::Duration;

use crate::model::ModelError;
use crate::provider::Format;

/// An API key. Its `Debug` prints `[redacted]`; it has no `Display` and no `Serialize`,
/// so it cannot end up in logs or error messages by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
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
/// use llmchain::provider::http::{HttpModelConfig, RetryPolicy};
///
/// let config = HttpModelConfig::anthropic("claude-sonnet-4-5")
///     .api_key("sk-ant-secret")
///     .header("anthropic-beta", "fine-grained-tool-streaming-2025-05-14")
///     .retry(RetryPolicy::none());
/// assert!(!format!("{config:?}").contains("sk-ant-secret"));
/// ```
#[derive(Clone)]
pub struct HttpModelConfig {
    /// The wire format.
    pub format: Format,
    /// The model id.
    pub model: String,
    /// The key (none for Ollama and keyless compatible servers).
    pub api_key: Option<ApiKey>,
    /// The base URL. OpenAI formats: up to and including `/v1` (as `OPENAI_BASE_URL`);
    /// Anthropic, Gemini and Ollama: the host root.
    pub base_url: String,
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
    /// A display name for the provider in errors and traces (default: from the format).
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
        let base = super::endpoint::Endpoint::new(&self.normalized_base_url(), "", &[])
            .map(|e| e.shown)
            .unwrap_or_else(|_| "(not a URL)".to_owned());
        let headers: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("HttpModelConfig")
            .field("format", &self.format)
            .field("model", &self.model)
            .field("api_key", &self.api_key)
            .field("base_url", &base)
            .field("headers", &headers)
            .field("timeouts", &self.timeouts)
            .field("retry", &self.retry)
            .field("stream", &self.stream)
            .field("max_tokens", &self.max_tokens)
            .field("temperature", &self.temperature)
            .field("provider", &self.provider)
            .field("max_response_bytes", &self.max_response_bytes)
            .finish()
    }
}

/// The default base URL of a format.
pub fn default_base_url(format: Format) -> &'static str {
    match format {
        Format::OpenAiChat | Format::OpenAiResponses => "https://api.openai.com/v1",
        Format::Anthropic => "https://api.anthropic.com",
        Format::Gemini => "https://generativelanguage.googleapis.com",
        Format::Ollama => "http://127.0.0.1:11434",
    }
}

/// The short provider name of a format, as the CLI's `--provider` takes it.
pub fn provider_name(format: Format) -> &'static str {
    match format {
        Format::OpenAiChat => "openai",
        Format::OpenAiResponses => "openai_responses",
        Format::Anthropic => "anthropic",
        Format::Gemini => "gemini",
        Format::Ollama => "ollama",
    }
}

/// The environment variables a format's key is read from, in order.
pub fn key_env_vars(format: Format) -> &'static [&'static str] {
    match format {
        Format::OpenAiChat | Format::OpenAiResponses => &["OPENAI_API_KEY"],
        Format::Anthropic => &["ANTHROPIC_API_KEY"],
        Format::Gemini => &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
        Format::Ollama => &[],
    }
}

/// The environment variable a format's base URL is read from.
pub fn base_url_env_var(format: Format) -> &'static str {
    match format {
        Format::OpenAiChat | Format::OpenAiResponses => "OPENAI_BASE_URL",
        Format::Anthropic => "ANTHROPIC_BASE_URL",
        Format::Gemini => "GEMINI_BASE_URL",
        Format::Ollama => "OLLAMA_HOST",
    }
}

impl HttpModelConfig {
    /// A config with defaults for `format`: default base URL, no key, streaming.
    pub fn new(format: Format, model: impl Into<String>) -> Self {
        HttpModelConfig {
            format,
            model: model.into(),
            api_key: None,
            base_url: default_base_url(format).to_owned(),
            headers: Vec::new(),
            timeouts: Timeouts::default(),
            retry: RetryPolicy::default(),
            stream: true,
            max_tokens: None,
            temperature: None,
            provider: provider_name(format).to_owned(),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }

    /// OpenAI Chat Completions (also any compatible server: set [`base_url`](Self::base_url)).
    pub fn openai(model: impl Into<String>) -> Self {
        Self::new(Format::OpenAiChat, model)
    }

    /// OpenAI Responses.
    pub fn openai_responses(model: impl Into<String>) -> Self {
        Self::new(Format::OpenAiResponses, model)
    }

    /// Anthropic Messages.
    pub fn anthropic(model: impl Into<String>) -> Self {
        Self::new(Format::Anthropic, model)
    }

    /// Google Gemini.
    pub fn gemini(model: impl Into<String>) -> Self {
        Self::new(Format::Gemini, model)
    }

    /// Ollama's native `/api/chat` (no key).
    pub fn ollama(model: impl Into<String>) -> Self {
        Self::new(Format::Ollama, model)
    }

    /// A config for `format` from the environment: the key from `OPENAI_API_KEY`,
    /// `ANTHROPIC_API_KEY`, `GEMINI_API_KEY` or `GOOGLE_API_KEY`; the base URL from
    /// `OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`, `GEMINI_BASE_URL` or `OLLAMA_HOST`;
    /// `OPENAI_ORG_ID` / `OPENAI_PROJECT_ID` as organization and project headers.
    /// A missing key is an error only when the check in [`validate`](Self::validate)
    /// says so (the provider's own endpoint).
    pub fn from_env(format: Format, model: impl Into<String>) -> Result<Self, ModelError> {
        Self::from_lookup(format, model, |k| std::env::var(k).ok())
    }

    /// As [`from_env`](Self::from_env) with a custom variable lookup (for tests).
    pub fn from_lookup(
        format: Format,
        model: impl Into<String>,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ModelError> {
        let get = |k: &str| lookup(k).filter(|v| !v.trim().is_empty());
        let mut c = Self::new(format, model);
        c.api_key = key_env_vars(format)
            .iter()
            .find_map(|k| get(k))
            .map(|k| ApiKey::new(k.trim()));
        if let Some(url) = get(base_url_env_var(format)) {
            c.base_url = url;
        }
        if matches!(format, Format::OpenAiChat | Format::OpenAiResponses) {
            if let Some(org) = get("OPENAI_ORG_ID") {
                c.headers.push(("OpenAI-Organization".into(), org));
            }
            if let Some(p) = get("OPENAI_PROJECT_ID") {
                c.headers.push(("OpenAI-Project".into(), p));
            }
        }
        c.validate()?;
        Ok(c)
    }

    /// Sets the key.
    #[must_use]
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(ApiKey::new(key));
        self
    }

    /// Sets the base URL.
    #[must_use]
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }

    /// Adds a header sent on every request.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
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

    /// Checks the config can make a request: a key is required for the OpenAI,
    /// Anthropic and Gemini formats when talking to the provider's own endpoint (a
    /// custom base URL may be a keyless compatible server); the base URL must be http(s).
    pub fn validate(&self) -> Result<(), ModelError> {
        let url = self.normalized_base_url();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(ModelError::Config(format!(
                "the base URL for {} must start with http:// or https:// (got {url:?}; set {})",
                self.provider,
                base_url_env_var(self.format)
            )));
        }
        let needs_key = !key_env_vars(self.format).is_empty()
            && url.trim_end_matches('/') == default_base_url(self.format);
        if needs_key && self.api_key.is_none() {
            let vars = key_env_vars(self.format).join(" or ");
            return Err(ModelError::Config(format!(
                "no API key for {}: set {vars} (or {} for a compatible server without a key)",
                self.provider,
                base_url_env_var(self.format)
            )));
        }
        Ok(())
    }

    /// The base URL with a scheme (Ollama's `OLLAMA_HOST` is often `host:port`) and no
    /// trailing slash.
    pub fn normalized_base_url(&self) -> String {
        let url = self.base_url.trim().trim_end_matches('/');
        if self.format == Format::Ollama && !url.contains("://") {
            format!("http://{url}")
        } else {
            url.to_owned()
        }
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
        let c = HttpModelConfig::from_lookup(Format::Gemini, "gemini-2.5-flash", env).unwrap();
        assert_eq!(c.api_key.unwrap().expose_secret(), "g-key");
        assert_eq!(c.base_url, "http://127.0.0.1:9/");
    }

    #[test]
    fn missing_key_says_what_to_set() {
        let e = HttpModelConfig::from_lookup(Format::Anthropic, "m", |_| None).unwrap_err();
        assert!(e.to_string().contains("ANTHROPIC_API_KEY"), "{e}");
        // A compatible server needs no key; Ollama never does.
        let env = |k: &str| (k == "OPENAI_BASE_URL").then(|| "http://localhost:8000/v1".into());
        assert!(HttpModelConfig::from_lookup(Format::OpenAiChat, "m", env).is_ok());
        let ollama = HttpModelConfig::from_lookup(Format::Ollama, "m", |k| {
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

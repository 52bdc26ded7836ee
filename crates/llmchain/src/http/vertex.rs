//! Google Vertex AI (feature `vertex`): Gemini (`vertex`) and Anthropic's models
//! (`vertex-anthropic`) in a Google Cloud project.
//!
//! - Gemini: `POST https://{host}/v1/projects/{project}/locations/{location}/publishers/
//!   google/models/{model}:streamGenerateContent?alt=sse` (`:generateContent` unstreamed),
//!   the Gemini wire format. Express mode (an API key, `GOOGLE_VERTEX_API_KEY`, no
//!   project): `https://aiplatform.googleapis.com/v1/publishers/google/models/{model}:…`
//!   with `x-goog-api-key`.
//! - Anthropic: `…/publishers/anthropic/models/{model}:streamRawPredict` (`:rawPredict`),
//!   the Messages format without `model` in the body and with
//!   `"anthropic_version": "vertex-2023-10-16"`.
//!
//! The host follows the location: `global` → `aiplatform.googleapis.com`; the
//! multi-regions `us` and `eu` → `aiplatform.{us,eu}.rep.googleapis.com`; a region →
//! `{region}-aiplatform.googleapis.com`.
//!
//! Credentials, first found: the caller's [`Auth`] (for a token the application gets
//! itself, [`BearerTokens::from_fn`](super::BearerTokens::from_fn)); an API key (Gemini
//! only); the service-account key file named by `GOOGLE_APPLICATION_CREDENTIALS` (a JWT
//! signed with its key and exchanged at its `token_uri`; its `project_id` is the default
//! project); else Google's application default credentials, found when the first request
//! needs them (gcloud's `application_default_credentials.json`, the metadata server of a
//! Google Cloud machine, `gcloud auth print-access-token`). Tokens are cached and fetched
//! again before they expire. The token exchange is `gcp_auth`'s, a well-kept crate, not
//! written here.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::auth::{Auth, BearerTokens, Token, TokenFuture, TokenSource};
use super::config::{ApiKey, HttpModelConfig};
use super::providers::{Provider, Route, RouteContext, SettingSpec, key_auth};
use crate::model::{Cause, ModelError};
use crate::provider::{Codec, Format};

/// The OAuth scope every Vertex AI call needs.
const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// The Anthropic API version Vertex AI serves, sent in the body.
pub const ANTHROPIC_VERSION: &str = "vertex-2023-10-16";

/// The largest service-account key file read.
const MAX_KEY_FILE: u64 = 1 << 20;

const SETTINGS: &[SettingSpec] = &[
    SettingSpec {
        key: "project",
        env: &["GOOGLE_VERTEX_PROJECT", "GOOGLE_CLOUD_PROJECT"],
        default: None,
        about: "the Google Cloud project (default: the service account's own)",
    },
    SettingSpec {
        key: "location",
        env: &["GOOGLE_VERTEX_LOCATION", "GOOGLE_CLOUD_LOCATION"],
        default: Some("global"),
        about: "a region (us-central1, europe-west4, us-east5...), global, or the multi-regions us and eu",
    },
];

/// Project ids and locations go into the host and the path: letters, digits and `-`.
fn checked<'a>(spec: &dyn Provider, key: &str, value: &'a str) -> Result<&'a str, ModelError> {
    if !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        Ok(value)
    } else {
        Err(ModelError::Config(format!(
            "the {key} setting of {} is {value:?}: only letters, digits and '-' make a {key}",
            spec.name()
        )))
    }
}

/// The host of a location.
pub fn host(location: &str) -> String {
    match location {
        "global" => "aiplatform.googleapis.com".to_owned(),
        "us" | "eu" => format!("aiplatform.{location}.rep.googleapis.com"),
        region => format!("{region}-aiplatform.googleapis.com"),
    }
}

fn location<'a>(
    spec: &dyn Provider,
    settings: &'a BTreeMap<String, String>,
) -> Result<&'a str, ModelError> {
    match settings.get("location").filter(|l| !l.is_empty()) {
        Some(l) => checked(spec, "location", l),
        None => Ok("global"),
    }
}

fn base_url(
    spec: &dyn Provider,
    settings: &BTreeMap<String, String>,
) -> Result<String, ModelError> {
    // Express mode (no project) is served from the global host only.
    if !settings.contains_key("project") {
        return Ok(format!("https://{}", host("global")));
    }
    Ok(format!("https://{}", host(location(spec, settings)?)))
}

/// `/v1/projects/{p}/locations/{l}/publishers/{publisher}/models`.
fn project_models(
    spec: &dyn Provider,
    c: &RouteContext<'_>,
    publisher: &str,
) -> Result<String, ModelError> {
    let project = c.setting("project").ok_or_else(|| no_project(spec))?;
    let project = checked(spec, "project", project)?;
    let location = location(spec, c.settings)?;
    Ok(format!(
        "/v1/projects/{project}/locations/{location}/publishers/{publisher}/models"
    ))
}

fn no_project(spec: &dyn Provider) -> ModelError {
    ModelError::Config(format!(
        "{} needs its Google Cloud project: set GOOGLE_VERTEX_PROJECT (or GOOGLE_CLOUD_PROJECT), \
         or point GOOGLE_APPLICATION_CREDENTIALS at a service-account key that names it{}",
        spec.name(),
        if spec.key_env().is_empty() {
            ""
        } else {
            "; or give GOOGLE_VERTEX_API_KEY for express mode"
        }
    ))
}

fn gemini_route(c: &RouteContext<'_>) -> Result<Route, ModelError> {
    let method = if c.stream {
        "streamGenerateContent"
    } else {
        "generateContent"
    };
    let models = match c.setting("project") {
        Some(_) => project_models(VERTEX, c, "google")?,
        None => "/v1/publishers/google/models".to_owned(),
    };
    let route = Route::path(format!("{models}/{}:{method}", c.model_segment));
    Ok(if c.stream {
        route.query("alt", "sse")
    } else {
        route
    })
}

fn anthropic_route(c: &RouteContext<'_>) -> Result<Route, ModelError> {
    let models = project_models(VERTEX_ANTHROPIC, c, "anthropic")?;
    let method = if c.stream {
        "streamRawPredict"
    } else {
        "rawPredict"
    };
    Ok(Route::path(format!(
        "{models}/{}:{method}",
        c.model_segment
    )))
}

/// The Messages body as Vertex AI takes it: no `model`, the `anthropic_version`.
fn anthropic_body(body: Vec<u8>) -> Result<Vec<u8>, ModelError> {
    let mut v: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&body).map_err(|e| {
            ModelError::Config(format!("the encoded request is not a JSON object: {e}"))
        })?;
    v.remove("model");
    v.insert("anthropic_version".into(), ANTHROPIC_VERSION.into());
    serde_json::to_vec(&v).map_err(|e| ModelError::Config(e.to_string()))
}

/// Google OAuth tokens from `gcp_auth`: a service account's, or the application
/// default credentials found on first use.
pub struct GoogleTokens {
    provider: tokio::sync::OnceCell<Arc<dyn gcp_auth::TokenProvider>>,
}

impl std::fmt::Debug for GoogleTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.provider.initialized() {
            "GoogleTokens"
        } else {
            "GoogleTokens(application default credentials, not yet found)"
        })
    }
}

impl GoogleTokens {
    /// Tokens for the service account in `json` (the key file's contents); also gives
    /// the project the key names.
    pub fn service_account(json: &str) -> Result<(Self, Option<String>), ModelError> {
        let sa = gcp_auth::CustomServiceAccount::from_json(json).map_err(|e| {
            ModelError::Credentials {
                message: format!("the Google service-account key cannot be used: {e}"),
                cause: Some(Cause::new(e)),
            }
        })?;
        let project = sa.project_id().map(str::to_owned);
        let provider: Arc<dyn gcp_auth::TokenProvider> = Arc::new(sa);
        Ok((
            GoogleTokens {
                provider: tokio::sync::OnceCell::new_with(Some(provider)),
            },
            project,
        ))
    }

    /// Application default credentials, looked for when the first token is needed.
    pub fn application_default() -> Self {
        GoogleTokens {
            provider: tokio::sync::OnceCell::new(),
        }
    }
}

impl TokenSource for GoogleTokens {
    fn token(&self) -> TokenFuture<'_> {
        Box::pin(async move {
            let provider = self
                .provider
                .get_or_try_init(|| async {
                    gcp_auth::provider()
                        .await
                        .map_err(|e| ModelError::Credentials {
                            message: format!(
                                "no Google credentials found ({}): set GOOGLE_APPLICATION_CREDENTIALS \
                                 to a service-account key file, run `gcloud auth application-default \
                                 login`, or give GOOGLE_VERTEX_API_KEY (Gemini's express mode)",
                                with_causes(&e)
                            ),
                            cause: Some(Cause::new(e)),
                        })
                })
                .await?;
            let token = provider
                .token(&[SCOPE])
                .await
                .map_err(|e| ModelError::Credentials {
                    message: format!("could not get a Google access token: {}", with_causes(&e)),
                    cause: Some(Cause::new(e)),
                })?;
            let now = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let left = u64::try_from(token.expires_at().timestamp())
                .unwrap_or(0)
                .saturating_sub(now);
            Ok(Token {
                secret: ApiKey::new(token.as_str()),
                expires_in: Some(Duration::from_secs(left)),
            })
        })
    }
}

/// `e` and its causes, `: `-separated (gcp_auth's messages name the step, their
/// causes what went wrong).
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

/// Reads the service-account key file `path`, bounded.
fn read_key_file(path: &str) -> Result<String, ModelError> {
    use std::io::Read as _;
    let err = |e: &dyn std::fmt::Display, cause: Option<std::io::Error>| ModelError::Credentials {
        message: format!("GOOGLE_APPLICATION_CREDENTIALS names {path}, which cannot be read: {e}"),
        cause: cause.map(Cause::new),
    };
    let file = std::fs::File::open(path).map_err(|e| err(&e.to_string(), Some(e)))?;
    let mut text = String::new();
    file.take(MAX_KEY_FILE + 1)
        .read_to_string(&mut text)
        .map_err(|e| err(&e.to_string(), Some(e)))?;
    if text.len() as u64 > MAX_KEY_FILE {
        return Err(err(&"it is larger than 1 MiB, which no key file is", None));
    }
    Ok(text)
}

const CREDENTIALS: &str = "GOOGLE_APPLICATION_CREDENTIALS (a service-account key file), \
                           gcloud's application default credentials";

/// Vertex AI serving one publisher's models.
struct Vertex {
    /// Anthropic's models (the Messages format) rather than Google's (Gemini).
    anthropic: bool,
}

impl Provider for Vertex {
    fn name(&self) -> &'static str {
        if self.anthropic {
            "vertex-anthropic"
        } else {
            "vertex"
        }
    }
    fn codec(&self) -> &'static dyn Codec {
        if self.anthropic {
            Format::ANTHROPIC.codec()
        } else {
            Format::GEMINI.codec()
        }
    }
    fn default_model(&self) -> &'static str {
        if self.anthropic {
            "claude-sonnet-4-5@20250929"
        } else {
            "gemini-2.5-flash"
        }
    }
    fn base_url_template(&self) -> &'static str {
        "https://{location}-aiplatform.googleapis.com"
    }
    fn default_base_url(&self, settings: &BTreeMap<String, String>) -> Result<String, ModelError> {
        base_url(self, settings)
    }
    fn route(&self, c: &RouteContext<'_>) -> Result<Route, ModelError> {
        if self.anthropic {
            anthropic_route(c)
        } else {
            gemini_route(c)
        }
    }
    fn aliases(&self) -> &'static [&'static str] {
        if self.anthropic {
            &["vertex_anthropic"]
        } else {
            &["vertex_gemini", "google_vertex"]
        }
    }
    fn genai_name(&self) -> &'static str {
        "gcp.vertex_ai"
    }
    fn summary(&self) -> &'static str {
        if self.anthropic {
            "Anthropic's models on Google Vertex AI (service account or application default credentials)"
        } else {
            "Google Vertex AI, Gemini (service account, application default credentials, or an express-mode key)"
        }
    }
    fn base_url_env(&self) -> &'static [&'static str] {
        &["GOOGLE_VERTEX_BASE_URL"]
    }
    fn key_env(&self) -> &'static [&'static str] {
        // Express mode (a key, no project) serves Gemini only.
        if self.anthropic {
            &[]
        } else {
            &["GOOGLE_VERTEX_API_KEY"]
        }
    }
    fn key_required(&self) -> bool {
        true
    }
    fn credentials_help(&self) -> &'static str {
        CREDENTIALS
    }
    fn settings(&self) -> &'static [SettingSpec] {
        SETTINGS
    }
    fn auth(&self, config: &HttpModelConfig) -> Result<Option<Arc<dyn Auth>>, ModelError> {
        if self.anthropic {
            Ok(None)
        } else {
            key_auth(config, "x-goog-api-key", "")
        }
    }
    /// Credentials and the project: see the module's docs.
    fn read_env(
        &self,
        config: &mut HttpModelConfig,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), ModelError> {
        if config.api_key.is_some() && !config.spec.key_env().is_empty() {
            // Express mode: the key stands for the project (as Google's own SDK does).
            if config.auth.is_none() {
                config.settings.remove("project");
            }
            return Ok(());
        }
        if config.auth.is_some() {
            return Ok(());
        }
        let tokens = match lookup("GOOGLE_APPLICATION_CREDENTIALS") {
            Some(path) => {
                let text = read_key_file(path.trim())?;
                let kind = serde_json::from_str::<serde_json::Value>(&text)
                    .ok()
                    .and_then(|v| v.get("type")?.as_str().map(str::to_owned))
                    .unwrap_or_default();
                if kind != "service_account" {
                    return Err(ModelError::Config(format!(
                        "GOOGLE_APPLICATION_CREDENTIALS names a {} file; llmchain reads service-account \
                         keys there. For your own account, unset it and run `gcloud auth \
                         application-default login`",
                        if kind.is_empty() {
                            "non-credential"
                        } else {
                            &kind
                        }
                    )));
                }
                let (tokens, project) = GoogleTokens::service_account(&text)?;
                if let Some(p) = project
                    && !config.settings.contains_key("project")
                {
                    config.settings.insert("project".into(), p);
                }
                tokens
            }
            None => GoogleTokens::application_default(),
        };
        if !config.settings.contains_key("project") {
            return Err(no_project(config.spec));
        }
        config.auth = Some(Arc::new(BearerTokens::new(Arc::new(tokens))) as Arc<dyn Auth>);
        Ok(())
    }
    fn prepare_body(&self, body: Vec<u8>) -> Result<Vec<u8>, ModelError> {
        if self.anthropic {
            anthropic_body(body)
        } else {
            Ok(body)
        }
    }
    // The Model Garden's publisher models are listed by another API (v1beta1): no
    // `models`.
    fn trim_base_suffixes(&self) -> &'static [&'static str] {
        &["/v1"]
    }
}

/// Gemini on Vertex AI.
pub static VERTEX: &dyn Provider = &Vertex { anthropic: false };

/// Anthropic's models on Vertex AI.
pub static VERTEX_ANTHROPIC: &dyn Provider = &Vertex { anthropic: true };

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_host_follows_the_location() {
        let url = |l: &str| base_url(VERTEX, &settings(&[("project", "p"), ("location", l)]));
        assert_eq!(url("global").unwrap(), "https://aiplatform.googleapis.com");
        assert_eq!(
            url("us").unwrap(),
            "https://aiplatform.us.rep.googleapis.com"
        );
        assert_eq!(
            url("eu").unwrap(),
            "https://aiplatform.eu.rep.googleapis.com"
        );
        assert_eq!(
            url("europe-west4").unwrap(),
            "https://europe-west4-aiplatform.googleapis.com"
        );
        assert!(url("evil.com/x").is_err());
        // Express mode: the global host whatever the location.
        assert_eq!(
            base_url(VERTEX, &settings(&[("location", "us-east5")])).unwrap(),
            "https://aiplatform.googleapis.com"
        );
    }

    #[test]
    fn the_anthropic_body_loses_its_model_and_gains_the_version() {
        let out =
            anthropic_body(br#"{"model":"claude","max_tokens":5,"stream":true}"#.to_vec()).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"max_tokens": 5, "stream": true, "anthropic_version": ANTHROPIC_VERSION})
        );
        assert!(anthropic_body(b"[1]".to_vec()).is_err());
    }

    #[test]
    fn credential_errors_keep_their_cause() {
        use std::error::Error as _;
        let dir = std::env::temp_dir();
        // A directory cannot be read as a key file: the I/O error is the source.
        let e = read_key_file(dir.to_str().unwrap()).unwrap_err();
        let ModelError::Credentials { message, .. } = &e else {
            panic!("{e:?}")
        };
        assert!(
            message.contains("GOOGLE_APPLICATION_CREDENTIALS"),
            "{message}"
        );
        let ModelError::Credentials {
            cause: Some(cause), ..
        } = &e
        else {
            panic!("{e:?}")
        };
        assert!(
            cause.get().downcast_ref::<std::io::Error>().is_some(),
            "{cause:?}"
        );
        // Its text is in the message: `source()` does not give it again.
        assert!(e.source().is_none());
        let e = GoogleTokens::service_account("{\"type\": \"nope\"}").unwrap_err();
        assert!(
            matches!(e, ModelError::Credentials { cause: Some(_), .. }),
            "{e:?}"
        );
    }
}

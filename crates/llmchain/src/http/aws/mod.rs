//! AWS Bedrock: Converse and ConverseStream (`POST
//! https://bedrock-runtime.{region}.amazonaws.com/model/{modelId}/converse-stream`),
//! signed with SigV4 ([`SigV4`]) or sent with a Bedrock API key
//! (`AWS_BEARER_TOKEN_BEDROCK`, as a bearer token).
//!
//! Credentials come, first found, from `AWS_BEARER_TOKEN_BEDROCK`, from
//! `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`/`AWS_SESSION_TOKEN`, or from the shared
//! files' profile (`AWS_PROFILE`, else `default`; `AWS_SHARED_CREDENTIALS_FILE` and
//! `AWS_CONFIG_FILE`, else `~/.aws/credentials` and `~/.aws/config`); the region from
//! `AWS_REGION`, `AWS_DEFAULT_REGION` or the profile. A profile that gets its
//! credentials another way (a role, SSO, a process) is refused with what to set instead.
//! The model id goes in the path as one segment, encoded once (`:` as `%3A`); the
//! signature encodes it again, as AWS requires.

pub mod profile;
mod sigv4;

use std::sync::Arc;

pub use sigv4::{AwsCredentials, SigV4};

use super::config::{ApiKey, HttpModelConfig};
use super::providers::{Provider, Route, RouteContext, SettingSpec};
use crate::model::{Cause, ModelError};
use crate::provider::{Codec, Format};

/// The profile's properties from the shared files, merged.
fn profile_of(
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<(String, profile::Profile)>, ModelError> {
    let home = lookup("HOME");
    let path = |var: &str, default: &str| {
        lookup(var).map(std::path::PathBuf::from).or_else(|| {
            home.as_deref()
                .map(|h| std::path::Path::new(h).join(".aws").join(default))
        })
    };
    let read = |p: Option<std::path::PathBuf>, kind| -> Result<_, ModelError> {
        let Some(p) = p else {
            return Ok(Default::default());
        };
        match std::fs::read_to_string(&p) {
            Ok(text) => profile::parse(&text, kind).map_err(|e| ModelError::Credentials {
                message: format!("the AWS file {} cannot be read: {e}", p.display()),
                cause: None,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Default::default()),
            Err(e) => Err(ModelError::Credentials {
                message: format!("the AWS file {} cannot be read: {e}", p.display()),
                cause: Some(Cause::new(e)),
            }),
        }
    };
    let all = profile::merge(
        read(path("AWS_CONFIG_FILE", "config"), profile::FileKind::Config)?,
        read(
            path("AWS_SHARED_CREDENTIALS_FILE", "credentials"),
            profile::FileKind::Credentials,
        )?,
    );
    let name = lookup("AWS_PROFILE").unwrap_or_else(|| "default".into());
    Ok(all.get(&name).cloned().map(|p| (name, p)))
}

/// AWS Bedrock, Converse. A Bedrock API key goes as a bearer token (the default auth);
/// SigV4 is set by `read_env` or the caller.
struct Bedrock;

impl Provider for Bedrock {
    fn name(&self) -> &'static str {
        "bedrock"
    }
    fn codec(&self) -> &'static dyn Codec {
        Format::BEDROCK_CONVERSE.codec()
    }
    fn default_model(&self) -> &'static str {
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    }
    fn base_url_template(&self) -> &'static str {
        "https://bedrock-runtime.{region}.amazonaws.com"
    }
    fn route(&self, c: &RouteContext<'_>) -> Result<Route, ModelError> {
        Ok(Route::path(format!(
            "/model/{}/{}",
            c.model_segment,
            if c.stream {
                "converse-stream"
            } else {
                "converse"
            }
        )))
    }
    fn aliases(&self) -> &'static [&'static str] {
        &["aws_bedrock", "bedrock_converse"]
    }
    fn genai_name(&self) -> &'static str {
        "aws.bedrock"
    }
    fn summary(&self) -> &'static str {
        "AWS Bedrock, Converse (SigV4 from AWS credentials, or a Bedrock API key)"
    }
    fn base_url_env(&self) -> &'static [&'static str] {
        &["AWS_ENDPOINT_URL_BEDROCK_RUNTIME"]
    }
    fn key_env(&self) -> &'static [&'static str] {
        &["AWS_BEARER_TOKEN_BEDROCK"]
    }
    fn credentials_help(&self) -> &'static str {
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, an AWS profile (AWS_PROFILE)"
    }
    fn settings(&self) -> &'static [SettingSpec] {
        &[SettingSpec {
            key: "region",
            env: &["AWS_REGION", "AWS_DEFAULT_REGION"],
            default: None,
            about: "the AWS region (bedrock-runtime.{region}.amazonaws.com)",
        }]
    }
    /// Reads credentials and the region: see the module's docs.
    fn read_env(
        &self,
        config: &mut HttpModelConfig,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), ModelError> {
        if config.auth.is_some() {
            return Ok(());
        }
        let profile = profile_of(lookup)?;
        if !config.settings.contains_key("region")
            && let Some(region) = profile.as_ref().and_then(|(_, p)| p.get("region"))
        {
            config.settings.insert("region".into(), region.clone());
        }
        if config.api_key.is_some() {
            return Ok(());
        }
        let from_env = lookup("AWS_ACCESS_KEY_ID")
            .zip(lookup("AWS_SECRET_ACCESS_KEY").or_else(|| lookup("SECRET_ACCESS_KEY")));
        let creds = match from_env {
            Some((id, secret)) => Some(AwsCredentials {
                access_key_id: id.trim().to_owned(),
                secret_access_key: ApiKey::new(secret.trim()),
                session_token: lookup("AWS_SESSION_TOKEN").map(|t| ApiKey::new(t.trim())),
            }),
            None => match &profile {
                Some((name, p)) => {
                    match (p.get("aws_access_key_id"), p.get("aws_secret_access_key")) {
                        (Some(id), Some(secret)) => Some(AwsCredentials {
                            access_key_id: id.clone(),
                            secret_access_key: ApiKey::new(secret.clone()),
                            session_token: p
                                .get("aws_session_token")
                                .map(|t| ApiKey::new(t.clone())),
                        }),
                        _ => {
                            let other = [
                                "role_arn",
                                "credential_process",
                                "sso_session",
                                "sso_start_url",
                                "web_identity_token_file",
                            ]
                            .into_iter()
                            .find(|k| p.contains_key(*k));
                            if let Some(k) = other {
                                return Err(ModelError::Config(format!(
                                    "the AWS profile {name} gets its credentials through {k}, which llmchain \
                                 does not run; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and \
                                 AWS_SESSION_TOKEN), e.g. from `aws configure export-credentials \
                                 --profile {name} --format env`, or AWS_BEARER_TOKEN_BEDROCK"
                                )));
                            }
                            None
                        }
                    }
                }
                None => None,
            },
        };
        if let Some(creds) = creds {
            let region = config.settings.get("region").cloned().ok_or_else(|| {
                ModelError::Config(
                    "bedrock needs its region: set AWS_REGION (or AWS_DEFAULT_REGION, or region in the AWS profile)"
                        .into(),
                )
            })?;
            config.auth = Some(Arc::new(SigV4::new(creds, region, "bedrock")));
        }
        Ok(())
    }
    // ListFoundationModels is another service (`bedrock`, not `bedrock-runtime`): no
    // `models`.
}

/// AWS Bedrock, Converse.
pub static BEDROCK: &dyn Provider = &Bedrock;

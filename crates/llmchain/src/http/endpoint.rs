//! [`Endpoint`]: the URL a model's requests go to, built from the base URL, and the
//! form of it that may be shown (logs, errors) without its secrets.
//!
//! A base URL may carry a password (`http://user:PASSWORD@host`) or a key in its query
//! (`…/v1?key=…`). The endpoint's path is added to the base URL's path, keeping its
//! query after it (not `…/v1?key=X/chat/completions`), and everything shown goes
//! through [`crate::redact::url`] (no userinfo; query values other than harmless ones
//! such as `alt` and `api-version` as `***`).

use reqwest::Url;

use crate::model::ModelError;

/// The request URL and what may be shown of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    /// Where requests go, with every credential the base URL holds.
    pub request_url: String,
    /// The URL as [`crate::redact::url`] shows it.
    pub shown: String,
    /// The secret parts (password, query values), to redact from error texts.
    pub secrets: Vec<String>,
}

/// Leading path segments of our endpoints that name an API version (Anthropic `/v1`,
/// Gemini `/v1beta`, Ollama `/api`), which a base URL may already end with.
const VERSION_SEGMENTS: [&str; 3] = ["/v1beta", "/v1", "/api"];

impl Endpoint {
    /// `base` + `path` (which starts with `/`), with `extra` query pairs appended.
    pub(super) fn new(
        base: &str,
        path: &str,
        extra: &[(&str, &str)],
    ) -> Result<Endpoint, ModelError> {
        let mut url = Url::parse(base).map_err(|e| {
            ModelError::Config(format!(
                "the base URL is not a URL ({e}); expected e.g. https://api.example.com/v1"
            ))
        })?;
        let base_path = url.path().trim_end_matches('/');
        // The API's version segment given twice (`--base-url https://api.anthropic.com/v1`
        // with Anthropic's `/v1/messages`) is given once: the request goes to
        // `/v1/messages`, not `/v1/v1/messages`, which answers 404.
        let path = VERSION_SEGMENTS
            .iter()
            .find(|v| base_path.ends_with(*v) && path.starts_with(&format!("{v}/")))
            .map_or(path, |v| &path[v.len()..]);
        let joined = format!("{base_path}{path}");
        url.set_path(&joined);
        if !extra.is_empty() {
            let mut q = url.query_pairs_mut();
            for (k, v) in extra {
                q.append_pair(k, v);
            }
        }
        // The secret parts, to take out of error texts that quote them without the URL.
        let mut secrets = Vec::new();
        if let Some(p) = url.password().filter(|p| !p.is_empty()) {
            secrets.push(p.to_owned());
            secrets.push(percent_decode(p));
        }
        // A user name as long as a token may be one (`http://TOKEN@host`).
        if url.username().len() >= 8 {
            secrets.push(url.username().to_owned());
        }
        secrets.extend(
            url.query_pairs()
                .filter(|(k, v)| !v.is_empty() && crate::redact::is_secret_query(k))
                .map(|(_, v)| v.into_owned()),
        );
        secrets.retain(|s| s.len() >= 4);
        secrets.sort();
        secrets.dedup();
        Ok(Endpoint {
            shown: crate::redact::url(url.as_str()),
            request_url: url.to_string(),
            secrets,
        })
    }

    /// `text` with the URL shown in place of the real one and every secret part replaced.
    pub(super) fn redact(&self, text: String) -> String {
        let mut text = text.replace(&self.request_url, &self.shown);
        for s in &self.secrets {
            if text.contains(s.as_str()) {
                text = text.replace(s.as_str(), "***");
            }
        }
        text
    }
}

fn percent_decode(s: &str) -> String {
    Url::parse(&format!("http://x/?p={s}"))
        .ok()
        .and_then(|u| u.query_pairs().next().map(|(_, v)| v.into_owned()))
        .unwrap_or_else(|| s.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_goes_before_the_query() {
        let e = Endpoint::new(
            "https://h.example/v1?key=abcd1234",
            "/chat/completions",
            &[],
        )
        .unwrap();
        assert_eq!(
            e.request_url,
            "https://h.example/v1/chat/completions?key=abcd1234"
        );
        assert_eq!(e.shown, "https://h.example/v1/chat/completions?key=***");
        let e = Endpoint::new(
            "https://h.example/",
            "/v1beta/models/m:streamGenerateContent",
            &[("alt", "sse")],
        )
        .unwrap();
        assert_eq!(
            e.request_url,
            "https://h.example/v1beta/models/m:streamGenerateContent?alt=sse"
        );
        assert_eq!(e.shown, e.request_url);
        assert!(e.secrets.is_empty());
    }

    #[test]
    fn a_version_segment_in_the_base_url_is_not_repeated() {
        for (base, path, want) in [
            (
                "https://api.anthropic.com/v1",
                "/v1/messages",
                "https://api.anthropic.com/v1/messages",
            ),
            (
                "https://api.anthropic.com/v1/",
                "/v1/messages",
                "https://api.anthropic.com/v1/messages",
            ),
            (
                "https://api.anthropic.com",
                "/v1/messages",
                "https://api.anthropic.com/v1/messages",
            ),
            (
                "https://g.example/v1beta",
                "/v1beta/models/m:generateContent",
                "https://g.example/v1beta/models/m:generateContent",
            ),
            (
                "http://localhost:11434/api",
                "/api/chat",
                "http://localhost:11434/api/chat",
            ),
            // OpenAI's base URL carries its version; its paths do not: nothing to fold.
            (
                "https://api.openai.com/v1",
                "/chat/completions",
                "https://api.openai.com/v1/chat/completions",
            ),
            // A base ending in another segment keeps it.
            (
                "https://proxy.example/anthropic",
                "/v1/messages",
                "https://proxy.example/anthropic/v1/messages",
            ),
        ] {
            assert_eq!(
                Endpoint::new(base, path, &[]).unwrap().request_url,
                want,
                "{base}"
            );
        }
    }

    #[test]
    fn a_password_is_never_shown() {
        let e = Endpoint::new(
            "http://user:PASSW%40RD@127.0.0.1:9/v1",
            "/chat/completions",
            &[],
        )
        .unwrap();
        assert_eq!(e.shown, "http://127.0.0.1:9/v1/chat/completions");
        let text = e.redact(format!(
            "error sending request for url ({}): PASSW@RD",
            e.request_url
        ));
        assert!(!text.contains("PASSW"), "{text}");
        assert!(
            text.contains("(http://127.0.0.1:9/v1/chat/completions)"),
            "{text}"
        );
    }

    #[test]
    fn a_base_url_that_is_not_a_url_is_a_config_error() {
        assert!(matches!(
            Endpoint::new("not a url", "/x", &[]),
            Err(ModelError::Config(_))
        ));
    }
}

//! The process's one secret masker, as CI systems mask secrets in their logs: every
//! secret the process holds is registered here as it comes in, and every string that is
//! stored, printed or logged passes through [`mask`] on its way out.
//!
//! What registers itself: every API key and credential wrapped in an
//! [`ApiKey`](crate::http::ApiKey) (keys from the environment, the key store or a
//! config; AWS secret keys and session tokens), every bearer token fetched at run time
//! (an OAuth token of a Google service account, an Azure Entra token, any
//! `TokenSource`'s), and the secret parts of URLs ([`register_url`]: userinfo passwords,
//! secret query values). What masks: provider and transport errors as they are made
//! (`llmchain::http`), a run's last error as the store keeps it (`llmchain-store`), the
//! CLI's messages and logs and a served chat's error chunks.
//!
//! A provider that echoes a credential (the request line of a wrong path, with its
//! `?api-key=`; a token it refused) so never gets it into a terminal, a log or a
//! database. Strings shorter than [`MIN_LEN`] are not registered: masking every `"1234"`
//! would mangle text for no gain.
//!
//! Part of the dependency-free core, like [`redact`](crate::redact), and written by
//! hand for that reason: a handful of secrets, searched for in error texts and log lines
//! (never on a hot path), need no automaton.

use std::borrow::Cow;
use std::sync::RwLock;

/// The shortest secret registered.
pub const MIN_LEN: usize = 8;

/// What replaces a secret.
pub const MASK: &str = "***";

/// The most secrets kept (a process that fetches a token every few minutes for days
/// keeps the newest ones).
const MAX_SECRETS: usize = 256;

static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Registers `secret`: from now on [`mask`] hides it. Shorter than [`MIN_LEN`], or
/// registered already: nothing changes.
pub fn register(secret: &str) {
    let secret = secret.trim();
    if secret.len() < MIN_LEN {
        return;
    }
    if SECRETS
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .any(|s| s == secret)
    {
        return;
    }
    let mut all = SECRETS.write().unwrap_or_else(|p| p.into_inner());
    if all.iter().any(|s| s == secret) {
        return;
    }
    if all.len() >= MAX_SECRETS {
        all.remove(0);
    }
    all.push(secret.to_owned());
    // The longest first: a secret that contains another is masked whole.
    all.sort_by_key(|s| std::cmp::Reverse(s.len()));
}

/// Registers the secret parts of `url`: its userinfo password and the values of its
/// secret query parameters ([`redact::is_secret_query`](crate::redact::is_secret_query)).
pub fn register_url(url: &str) {
    let Some((_, rest)) = url.split_once("://") else {
        return;
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    if let Some((userinfo, _)) = rest[..authority_end].rsplit_once('@') {
        let password = userinfo.split_once(':').map_or(userinfo, |(_, p)| p);
        register(password);
    }
    if let Some((_, query)) = rest.split_once('?') {
        let query = query.split_once('#').map_or(query, |(q, _)| q);
        for (key, value) in query.split('&').filter_map(|p| p.split_once('=')) {
            if crate::redact::is_secret_query(key) {
                register(value);
            }
        }
    }
}

/// `text` with every registered secret replaced by [`MASK`] (borrowed as it is when it
/// holds none).
///
/// ```
/// use llmchain::secrets;
/// secrets::register("sk-doc-example-0123456789");
/// assert_eq!(
///     secrets::mask("Invalid URL (POST /v2/chat?api-key=sk-doc-example-0123456789)"),
///     "Invalid URL (POST /v2/chat?api-key=***)"
/// );
/// assert_eq!(secrets::mask("nothing here"), "nothing here");
/// ```
pub fn mask(text: &str) -> Cow<'_, str> {
    let all = SECRETS.read().unwrap_or_else(|p| p.into_inner());
    let mut out = Cow::Borrowed(text);
    for secret in all.iter() {
        if out.contains(secret.as_str()) {
            out = Cow::Owned(out.replace(secret.as_str(), MASK));
        }
    }
    out
}

/// [`mask`], owned.
pub fn masked(text: impl Into<String>) -> String {
    let text = text.into();
    match mask(&text) {
        Cow::Borrowed(_) => text,
        Cow::Owned(m) => m,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_secrets_are_masked_wherever_they_appear() {
        register("tok-test-abcdefgh");
        register("tok-test-abcdefgh-longer");
        register("short");
        let text = "a tok-test-abcdefgh-longer b tok-test-abcdefgh c short";
        assert_eq!(mask(text), "a *** b *** c short");
        assert!(matches!(mask("clean"), Cow::Borrowed(_)));
    }

    #[test]
    fn url_secrets_are_registered() {
        register_url(
            "https://user:pw-test-9876543210@host/v1?api-key=key-test-13572468&alt=sse&version=2024-01-01",
        );
        assert_eq!(
            mask("echo: pw-test-9876543210 key-test-13572468 2024-01-01"),
            "echo: *** *** 2024-01-01"
        );
    }
}

//! [`Auth`]: how a request proves who sends it. A hook on the whole request, so it can
//! put a key in a header, fetch and cache a token, or sign the method, URL, headers and
//! body (AWS SigV4).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::header::{HeaderName, HeaderValue};

use super::config::ApiKey;
use crate::model::ModelError;

/// What an [`Auth`] hook returns.
pub type AuthFuture<'a> = Pin<Box<dyn Future<Output = Result<(), ModelError>> + Send + 'a>>;

/// Authenticates a request just before it is sent (each attempt, so a token fetched
/// here is fresh and a signature's date is now).
///
/// Implement it for a scheme llmchain does not have; give it to
/// [`HttpModelConfig::auth`](super::HttpModelConfig::auth).
pub trait Auth: Send + Sync + fmt::Debug {
    /// Adds the credentials to `request` (headers, or a signature over all of it).
    fn authorize<'a>(&'a self, request: &'a mut reqwest::Request) -> AuthFuture<'a>;
}

/// A key in a header: `Authorization: Bearer KEY`, `x-api-key: KEY`, `api-key: KEY`,
/// `x-goog-api-key: KEY`. The header is marked sensitive.
#[derive(Clone)]
pub struct KeyHeader {
    name: HeaderName,
    value: HeaderValue,
}

impl KeyHeader {
    /// `name: {prefix}{key}`.
    pub fn new(name: &'static str, prefix: &str, key: &ApiKey) -> Result<Self, ModelError> {
        let mut value = HeaderValue::from_str(&format!("{prefix}{}", key.expose_secret()))
            .map_err(|_| {
                ModelError::Config("the API key contains characters a header cannot hold".into())
            })?;
        value.set_sensitive(true);
        Ok(KeyHeader {
            name: HeaderName::from_static(name),
            value,
        })
    }

    /// `Authorization: Bearer KEY`.
    pub fn bearer(key: &ApiKey) -> Result<Self, ModelError> {
        Self::new("authorization", "Bearer ", key)
    }
}

impl fmt::Debug for KeyHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyHeader({}: [redacted])", self.name)
    }
}

impl Auth for KeyHeader {
    fn authorize<'a>(&'a self, request: &'a mut reqwest::Request) -> AuthFuture<'a> {
        request
            .headers_mut()
            .insert(self.name.clone(), self.value.clone());
        Box::pin(std::future::ready(Ok(())))
    }
}

/// A bearer token and how long it is good for, from a [`TokenSource`].
#[derive(Clone)]
pub struct Token {
    /// The token.
    pub secret: ApiKey,
    /// How long it may be used from now (`None`: until the source says otherwise).
    pub expires_in: Option<Duration>,
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token")
            .field("secret", &self.secret)
            .field("expires_in", &self.expires_in)
            .finish()
    }
}

/// What a token source's future returns.
pub type TokenFuture<'a> = Pin<Box<dyn Future<Output = Result<Token, ModelError>> + Send + 'a>>;

/// Gives bearer tokens: a cloud's OAuth exchange, or the application's own callback
/// (Azure Entra ID, a token the application gets elsewhere).
pub trait TokenSource: Send + Sync + fmt::Debug {
    /// A token, fetched now.
    fn token(&self) -> TokenFuture<'_>;
}

/// `Authorization: Bearer <token>` with tokens from a [`TokenSource`], cached and
/// fetched again a minute before they expire (one fetch at a time).
#[derive(Debug)]
pub struct BearerTokens {
    source: Arc<dyn TokenSource>,
    cached: tokio::sync::Mutex<Option<(ApiKey, Option<Instant>)>>,
}

/// How long before its expiry a token is replaced.
const REFRESH_MARGIN: Duration = Duration::from_secs(60);

impl BearerTokens {
    /// Tokens from `source`.
    pub fn new(source: Arc<dyn TokenSource>) -> Self {
        BearerTokens {
            source,
            cached: tokio::sync::Mutex::new(None),
        }
    }

    /// Tokens from an async function, e.g. an Azure Entra ID credential's
    /// `get_token`: each call gives a token and how long it is good for.
    pub fn from_fn<F, Fut>(f: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Token, ModelError>> + Send + 'static,
    {
        Self::new(Arc::new(FnSource(f)))
    }

    async fn current(&self) -> Result<ApiKey, ModelError> {
        let mut cached = self.cached.lock().await;
        if let Some((token, until)) = cached.as_ref()
            && until.is_none_or(|u| Instant::now() + REFRESH_MARGIN < u)
        {
            return Ok(token.clone());
        }
        let fresh = self.source.token().await?;
        let until = fresh.expires_in.map(|d| Instant::now() + d);
        *cached = Some((fresh.secret.clone(), until));
        Ok(fresh.secret)
    }
}

impl Auth for BearerTokens {
    fn authorize<'a>(&'a self, request: &'a mut reqwest::Request) -> AuthFuture<'a> {
        Box::pin(async move {
            let token = self.current().await?;
            let header = KeyHeader::bearer(&token)?;
            request.headers_mut().insert(header.name, header.value);
            Ok(())
        })
    }
}

struct FnSource<F>(F);

impl<F> fmt::Debug for FnSource<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenSource(fn)")
    }
}

impl<F, Fut> TokenSource for FnSource<F>
where
    F: Fn() -> Fut + Send + Sync,
    Fut: Future<Output = Result<Token, ModelError>> + Send + 'static,
{
    fn token(&self) -> TokenFuture<'_> {
        Box::pin((self.0)())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn request() -> reqwest::Request {
        reqwest::Client::new()
            .post("http://127.0.0.1:9/x")
            .build()
            .unwrap()
    }

    #[tokio::test]
    async fn a_key_header_is_sensitive_and_never_printed() {
        let h = KeyHeader::new("api-key", "", &ApiKey::new("k-123456")).unwrap();
        assert!(!format!("{h:?}").contains("k-123456"));
        let mut r = request();
        h.authorize(&mut r).await.unwrap();
        assert!(r.headers()["api-key"].is_sensitive());
        assert_eq!(r.headers()["api-key"], "k-123456");
    }

    #[tokio::test]
    async fn tokens_are_cached_until_a_minute_before_they_expire() {
        let fetched = Arc::new(AtomicU32::new(0));
        let f = fetched.clone();
        let long = BearerTokens::from_fn(move || {
            let n = f.fetch_add(1, Ordering::SeqCst);
            async move {
                Ok(Token {
                    secret: ApiKey::new(format!("t{n}")),
                    expires_in: Some(Duration::from_secs(3600)),
                })
            }
        });
        for _ in 0..3 {
            let mut r = request();
            long.authorize(&mut r).await.unwrap();
            assert_eq!(r.headers()["authorization"], "Bearer t0");
        }
        let g = fetched.clone();
        let short = BearerTokens::from_fn(move || {
            let n = g.fetch_add(1, Ordering::SeqCst);
            async move {
                Ok(Token {
                    secret: ApiKey::new(format!("s{n}")),
                    expires_in: Some(Duration::from_secs(30)),
                })
            }
        });
        let (mut a, mut b) = (request(), request());
        short.authorize(&mut a).await.unwrap();
        short.authorize(&mut b).await.unwrap();
        assert_ne!(a.headers()["authorization"], b.headers()["authorization"]);
    }
}

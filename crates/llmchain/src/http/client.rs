//! [`HttpModel`]: the request/response loop — send, retry, stream-decode.

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::time::{Duration, Instant};

use futures_util::{Stream, StreamExt, stream};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use tokio_util::sync::CancellationToken;

use std::sync::Arc;

use super::auth::Auth;
use super::config::HttpModelConfig;
use super::endpoint::Endpoint;
use super::error_body::{http_error, redact, reported_headers};
use super::providers::RouteContext;
use crate::conversation::Conversation;
use crate::message::{Message, MessageStatus};
use crate::model::{Cause, ChatModel, ModelError, ModelEvent, ModelStream, Retry};
use crate::provider::{
    Codec, DecodeOutcome, DecoderConfig, EventBatch, RequestOptions, StreamDecoder, StreamEvent,
};

/// Longest error body read from a failed response.
const MAX_ERROR_BODY: usize = 64 * 1024;
/// The most bytes of a model list read (OpenRouter's, the longest known, is ~1 MiB).
const MAX_MODEL_LIST: usize = 16 << 20;

/// A [`ChatModel`] over HTTP for any provider of [`providers`](super::providers).
///
/// ```no_run
/// use llmchain::chain::{ChatModel, collect_stream};
/// use llmchain::conversation::Conversation;
/// use llmchain::message::Message;
/// use llmchain::provider::Format;
/// use llmchain::http::HttpModel;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let model = HttpModel::from_env(Format::ANTHROPIC, "claude-sonnet-4-5")?;
/// let mut conv = Conversation::new();
/// conv.messages.push(Message::user("Hi"));
/// let outcome = collect_stream(model.stream(&conv), |_| {}).await?;
/// println!("{:?}", outcome.message.text());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct HttpModel {
    config: HttpModelConfig,
    client: reqwest::Client,
    endpoint: Endpoint,
    headers: HeaderMap,
    auth: Option<Arc<dyn Auth>>,
    codec: &'static dyn Codec,
    decoder_config: DecoderConfig,
}

impl fmt::Debug for HttpModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpModel")
            .field("config", &self.config)
            .field("url", &self.endpoint.shown)
            .finish_non_exhaustive()
    }
}

/// Follows redirects only within the request's origin (scheme, host and port), at most
/// five. A redirect to another origin is not followed, for every provider: the request
/// carries the API key in a header (`Authorization`, `x-api-key`, `x-goog-api-key`), and
/// reqwest's own policy strips only `Authorization` on the way to another host. The 30x
/// then comes back as the response and becomes [`cross_origin_redirect`]'s error.
fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let same = attempt.previous().first().is_some_and(|first| {
            first.scheme() == attempt.url().scheme()
                && first.host_str() == attempt.url().host_str()
                && first.port_or_known_default() == attempt.url().port_or_known_default()
        });
        if !same {
            attempt.stop()
        } else if attempt.previous().len() > 5 {
            attempt.error("more than 5 redirects")
        } else {
            attempt.follow()
        }
    })
}

/// The error of a redirect that was not followed: says where it pointed (its origin
/// only: a path or query may carry anything) and why it was not followed.
fn cross_origin_redirect(provider: &str, url: &str, resp: &reqwest::Response) -> ModelError {
    let status = resp.status().as_u16();
    let target = resp
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|l| {
            reqwest::Url::parse(l)
                .ok()
                .or_else(|| resp.url().join(l).ok())
        })
        .map(|u| {
            let host = u.host_str().unwrap_or("?");
            match u.port() {
                Some(p) => format!("{}://{host}:{p}", u.scheme()),
                None => format!("{}://{host}", u.scheme()),
            }
        })
        .unwrap_or_else(|| "an unreadable location".to_owned());
    let origin = reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_default();
    ModelError::Http {
        provider: provider.to_owned(),
        status,
        kind: crate::model::HttpErrorKind::Other,
        message: sanitize_for_terminal(&format!(
            "the server at {origin} redirected the request to {target}, another origin; it was \
             not followed, so the API key is never sent there (set the base URL to the real \
             endpoint)"
        )),
        retry_after: None,
    }
}

/// Control characters (terminal escapes) out of text that came from a server.
fn sanitize_for_terminal(s: &str) -> String {
    s.chars()
        .map(|c| {
            if crate::redact::unsafe_in_terminal(c) {
                '?'
            } else {
                c
            }
        })
        .collect()
}

/// An error event inside a successful stream can echo the key ("key sk-… is rate
/// limited"): its message is redacted before anyone prints, stores or exports it.
fn scrub_event(e: StreamEvent<'static>, secret: Option<&str>) -> StreamEvent<'static> {
    match e {
        StreamEvent::Error { kind, message } if secret.is_some_and(|s| message.contains(s)) => {
            StreamEvent::Error {
                kind,
                message: redact(message.into_owned(), secret).into(),
            }
        }
        other => other,
    }
}

/// The body's error and the message's `streaming_error`, redacted.
fn scrub_outcome(outcome: &mut DecodeOutcome, secret: Option<&str>) {
    let Some(key) = secret.filter(|k| !k.is_empty()) else {
        return;
    };
    if let Some(e) = &mut outcome.error
        && e.message.contains(key)
    {
        e.message = redact(std::mem::take(&mut e.message), secret);
    }
    scrub_message(&mut outcome.message, secret);
}

/// A message's `streaming_error`, redacted.
fn scrub_message(message: &mut Message, secret: Option<&str>) {
    let Some(key) = secret.filter(|k| !k.is_empty()) else {
        return;
    };
    if let Some(serde_json::Value::String(text)) = message.metadata.get_mut("streaming_error")
        && text.contains(key)
    {
        *text = redact(std::mem::take(text), secret);
    }
}

fn config_err(msg: impl Into<String>) -> ModelError {
    ModelError::Config(msg.into())
}

impl HttpModel {
    /// A model from a config (checked with [`HttpModelConfig::validate`]).
    pub fn new(config: HttpModelConfig) -> Result<Self, ModelError> {
        config.validate()?;
        let client = reqwest::Client::builder()
            .connect_timeout(config.timeouts.connect)
            .read_timeout(config.timeouts.read)
            .redirect(same_origin_redirects())
            .build()
            .map_err(|e| config_err(format!("could not build the HTTP client: {e}")))?;
        let base = config.resolved_base_url()?;
        // One path segment, whatever the model id holds (`/`, `..`, `?`, `#`): a model
        // id cannot change which endpoint the request (and its key) goes to.
        let model_path = path_segment(
            config
                .model
                .strip_prefix("models/")
                .unwrap_or(&config.model),
        );
        let route = config.spec.route(&RouteContext {
            model_segment: &model_path,
            model: &config.model,
            stream: config.stream,
            settings: &config.settings,
        })?;
        let query: Vec<(&str, &str)> = route
            .query
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let endpoint = Endpoint::new(&base, &route.path, &query)?;
        let headers = build_headers(&config)?;
        let auth = match &config.auth {
            Some(a) => Some(a.clone()),
            None => config.spec.auth(&config)?,
        };
        Ok(HttpModel {
            codec: config.spec.codec(),
            auth,
            config,
            client,
            endpoint,
            headers,
            decoder_config: DecoderConfig {
                // Its events feed a `ModelStream`, whose consumers concatenate them.
                join_fragments: true,
                ..DecoderConfig::default()
            },
        })
    }

    /// A model for `format` configured from the environment
    /// ([`HttpModelConfig::from_env`]).
    pub fn from_env(
        format: crate::provider::Format,
        model: impl Into<String>,
    ) -> Result<Self, ModelError> {
        Self::new(HttpModelConfig::from_env(format, model)?)
    }

    /// The config.
    pub fn config(&self) -> &HttpModelConfig {
        &self.config
    }

    /// The URL requests go to, as it may be shown: a password or a query value in the
    /// base URL is replaced by `***`.
    pub fn url(&self) -> &str {
        &self.endpoint.shown
    }

    /// Encodes the request body for `conversation`.
    pub fn encode(&self, conversation: &Conversation) -> Result<Vec<u8>, ModelError> {
        let opts = RequestOptions {
            model: self.config.model.clone(),
            stream: self.config.stream,
            max_tokens: self.config.max_tokens,
            temperature: self.config.temperature,
            extra: self.config.extra.clone(),
        };
        let body = self.codec.encode(conversation, &opts)?;
        self.config.spec.prepare_body(body)
    }

    /// The models the provider serves, as `model` takes them (its
    /// [`ModelList`](super::providers::ModelList)): one `GET` with the same auth,
    /// headers, limits and error handling as a model call. An error when the provider does not list its
    /// models over this API.
    pub async fn list_models(&self) -> Result<Vec<String>, ModelError> {
        let provider = &self.config.provider;
        let Some(list) = self.config.spec.models() else {
            return Err(config_err(format!(
                "{provider} does not list its models over this API"
            )));
        };
        let route = (list.route)(&self.config.settings)?;
        let query: Vec<(&str, &str)> = route
            .query
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let base = self.config.resolved_base_url()?;
        let endpoint = Endpoint::new(&base, &route.path, &query)?;
        let mut request = self
            .client
            .get(&endpoint.request_url)
            .headers(self.headers.clone())
            .timeout(self.config.timeouts.total)
            .build()
            .map_err(|e| config_err(format!("could not build the request: {e}")))?;
        if let Some(auth) = &self.auth {
            auth.authorize(&mut request).await?;
        }
        let resp = self
            .client
            .execute(request)
            .await
            .map_err(|e| self.transport_error(e))?;
        if resp.status().is_redirection() {
            return Err(cross_origin_redirect(provider, &endpoint.shown, &resp));
        }
        if !resp.status().is_success() {
            let status = resp.status().as_u16();
            let headers = resp.headers().clone();
            let body = read_limited(resp, MAX_ERROR_BODY).await;
            return Err(http_error(provider, status, &headers, &body, self.secret()));
        }
        let body = read_limited(resp, MAX_MODEL_LIST).await;
        let mut ids = (list.parse)(&body).map_err(|e| ModelError::Provider {
            provider: provider.clone(),
            kind: crate::model::HttpErrorKind::Other,
            error_type: "model_list".into(),
            message: e,
        })?;
        ids.sort();
        ids.dedup();
        Ok(ids)
    }

    fn secret(&self) -> Option<&str> {
        self.config.api_key.as_ref().map(|k| k.expose_secret())
    }

    /// A retryable error the provider asked to wait out longer than the retry deadline
    /// allows says so, with the wait it asked for.
    fn with_wait_asked(&self, error: ModelError, started: Instant) -> ModelError {
        match error {
            ModelError::Http {
                provider,
                status,
                kind,
                message,
                retry_after: Some(ra),
            } if kind.is_retryable()
                && started.elapsed() + ra > self.config.retry.total_deadline =>
            {
                ModelError::Http {
                    message: format!(
                        "{message} (the provider asked to wait {}, longer than the {:?} retry \
                         deadline; try again later)",
                        humanize(ra),
                        self.config.retry.total_deadline
                    ),
                    provider,
                    status,
                    kind,
                    retry_after: Some(ra),
                }
            }
            other => other,
        }
    }

    fn past_deadline(&self) -> ModelError {
        ModelError::Limit {
            provider: self.config.provider.clone(),
            message: format!(
                "the response was not over after {:?}, the call's overall deadline \
                 (Timeouts::total); what arrived is kept, its calls are not run",
                self.config.timeouts.total
            ),
        }
    }

    fn too_large(&self) -> ModelError {
        ModelError::Limit {
            provider: self.config.provider.clone(),
            message: format!(
                "the response is larger than {} bytes (max_response_bytes); what arrived is \
                 kept, its calls are not run",
                self.config.max_response_bytes
            ),
        }
    }

    /// One HTTP exchange up to a successful response's headers. `attempt` counts
    /// attempts made so far (shared with stream retries); the caller decides on retries
    /// ([`Run`]), so it can report each wait before it starts.
    async fn send(
        &self,
        body: &bytes::Bytes,
        attempt: &mut u32,
    ) -> Result<reqwest::Response, ModelError> {
        {
            *attempt += 1;
            tracing::debug!(
                provider = %self.config.provider,
                model = %self.config.model,
                url = %self.endpoint.shown,
                attempt = *attempt,
                "sending model request"
            );
            let result = match self.request(body).await {
                Ok(request) => self.client.execute(request).await,
                Err(e) => return Err(e),
            };
            let error = match result {
                Ok(resp) if resp.status().is_success() => return Ok(resp),
                Ok(resp) if resp.status().is_redirection() => {
                    cross_origin_redirect(&self.config.provider, &self.endpoint.shown, &resp)
                }
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    let headers = resp.headers().clone();
                    let body = read_limited(resp, MAX_ERROR_BODY).await;
                    http_error(
                        &self.config.provider,
                        status,
                        &headers,
                        &body,
                        self.secret(),
                    )
                }
                Err(e) => self.transport_error(e),
            };
            Err(error)
        }
    }

    /// The request of one attempt, authenticated now (a fresh token, a signature
    /// dated now).
    async fn request(&self, body: &bytes::Bytes) -> Result<reqwest::Request, ModelError> {
        let mut request = self
            .client
            .post(&self.endpoint.request_url)
            .headers(self.headers.clone())
            .body(body.clone())
            .build()
            .map_err(|e| config_err(format!("could not build the request: {e}")))?;
        if let Some(auth) = &self.auth {
            auth.authorize(&mut request).await?;
        }
        Ok(request)
    }

    /// The wait before another attempt after `error`, or `None` to give up.
    fn retry_delay(&self, error: &ModelError, attempt: u32, started: Instant) -> Option<Duration> {
        let policy = &self.config.retry;
        // One classification (`ModelError::is_retryable`); errors reported inside a
        // stream never come here: they follow events, after which nothing is retried.
        if !error.is_retryable() || attempt >= policy.max_attempts {
            return None;
        }
        let backoff = policy.backoff(attempt);
        let delay = match error {
            ModelError::Http {
                retry_after: Some(ra),
                ..
            } => (*ra).max(backoff.min(Duration::from_millis(50))),
            _ => backoff,
        };
        (started.elapsed() + delay <= policy.total_deadline).then_some(delay)
    }

    fn transport_error(&self, e: reqwest::Error) -> ModelError {
        let provider = self.config.provider.clone();
        // A redirect loop (more than five same-origin redirects) answers the same way
        // every time: a configuration error, not retried.
        if e.is_redirect() {
            return ModelError::Config(format!(
                "{provider} at {} redirected the request more than 5 times (a redirect loop?); \
                 check the base URL",
                self.endpoint.shown
            ));
        }
        if e.is_timeout() {
            return ModelError::Timeout {
                provider,
                after: self.config.timeouts.read,
            };
        }
        let message = self.endpoint.redact(redact(error_chain(&e), self.secret()));
        let connect = e.is_connect();
        // The cause without its URL (which may carry a user's credentials).
        let cause = Some(Cause::new(e.without_url()));
        ModelError::Connect {
            provider,
            url: self.endpoint.shown.clone(),
            message: if connect {
                message
            } else {
                format!("request failed: {message}")
            },
            cause,
        }
    }

    fn interrupted(&self, message: String, cause: Option<Cause>) -> ModelError {
        ModelError::StreamInterrupted {
            provider: self.config.provider.clone(),
            message: self.endpoint.redact(redact(message, self.secret())),
            cause,
        }
    }
}

/// `s` percent-encoded as one URL path segment: every byte but the unreserved ones
/// (RFC 3986: letters, digits, `-._~`). Hand-written: a few lines, where the crate that
/// does it (`percent-encoding`) would be one more direct dependency for one call.
fn path_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    // A segment of dots only would be a dot segment: encode the dots.
    if !out.is_empty() && out.bytes().all(|b| b == b'.') {
        return out.replace('.', "%2E");
    }
    out
}

/// `e` and its sources, joined (reqwest's own `Display` is terse).
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let t = s.to_string();
        if !out.contains(&t) {
            out.push_str(": ");
            out.push_str(&t);
        }
        src = s.source();
    }
    out
}

/// Reads at most `limit` bytes of a body (errors end the read).
async fn read_limited(resp: reqwest::Response, limit: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut body = resp.bytes_stream();
    while let Some(Ok(chunk)) = body.next().await {
        let take = chunk.len().min(limit - out.len());
        out.extend_from_slice(&chunk[..take]);
        if out.len() >= limit {
            break;
        }
    }
    out
}

/// A wait in whole seconds, minutes or hours.
fn humanize(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 7200 {
        format!("{} h", s / 3600)
    } else if s >= 120 {
        format!("{} min", s / 60)
    } else {
        format!("{} s", s.max(1))
    }
}

/// The whole body, or `None` when it is larger than `cap` (reading stops there).
async fn read_capped(
    resp: reqwest::Response,
    cap: usize,
) -> Option<Result<bytes::Bytes, reqwest::Error>> {
    if resp.content_length().is_some_and(|n| n > cap as u64) {
        return None;
    }
    let mut body = resp.bytes_stream();
    let mut out = Vec::new();
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(c) if out.len() + c.len() > cap => return None,
            Ok(c) => out.extend_from_slice(&c),
            Err(e) => return Some(Err(e)),
        }
    }
    Some(Ok(out.into()))
}

fn build_headers(config: &HttpModelConfig) -> Result<HeaderMap, ModelError> {
    let mut h = HeaderMap::new();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    for (name, value) in config.spec.headers() {
        h.insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    if config.stream {
        h.insert(
            reqwest::header::ACCEPT,
            HeaderValue::from_static(config.spec.stream_accept()),
        );
    }
    for (name, value) in &config.headers {
        let n = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| config_err(format!("invalid header name {name:?}")))?;
        let v = HeaderValue::from_str(value)
            .map_err(|_| config_err(format!("invalid value for header {name:?}")))?;
        h.insert(n, v);
    }
    Ok(h)
}

type ByteStream = Pin<Box<dyn Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>;

enum Phase {
    Send,
    /// Waiting before the next attempt.
    Backoff(Duration),
    Streaming {
        body: ByteStream,
        decoder: Box<dyn StreamDecoder>,
    },
    Finished,
}

struct Run<'a> {
    model: &'a HttpModel,
    body: bytes::Bytes,
    attempt: u32,
    started: Instant,
    phase: Phase,
    pending: VecDeque<Result<ModelEvent, ModelError>>,
    /// A decoded event reached the caller: from then on no retry.
    emitted: bool,
    /// The call's overall deadline ([`Timeouts::total`](super::Timeouts::total)).
    deadline: tokio::time::Instant,
    /// Body bytes received so far (every attempt's), against `max_response_bytes`.
    received: usize,
    /// Ends the call early ([`ChatModel::stream_until`]).
    cancel: Option<CancellationToken>,
}

impl Run<'_> {
    /// Queues what `decoder` assembled, before the error that cuts the stream off.
    fn keep_partial(&mut self, decoder: &mut dyn StreamDecoder) {
        if self.emitted
            && let Some(mut m) = decoder.interrupt()
        {
            scrub_message(&mut m, self.model.secret());
            self.pending.push_back(Ok(ModelEvent::Partial(Box::new(m))));
        }
    }

    /// Resolves when the call is cancelled; never without a token.
    async fn cancelled(cancel: Option<CancellationToken>) {
        match cancel {
            Some(c) => c.cancelled_owned().await,
            None => std::future::pending().await,
        }
    }

    /// Queues a read's events for the caller, redacted.
    fn queue(&mut self, events: &mut EventBatch) {
        let secret = self.model.secret();
        self.pending.extend(
            events
                .drain()
                .map(|e| Ok(ModelEvent::Event(scrub_event(e, secret)))),
        );
    }

    /// Advances the run until something is pending or it is over.
    async fn step(&mut self) {
        let model = self.model;
        match std::mem::replace(&mut self.phase, Phase::Finished) {
            Phase::Finished => {}
            Phase::Backoff(delay) => {
                if tokio::time::timeout_at(self.deadline, tokio::time::sleep(delay))
                    .await
                    .is_err()
                {
                    self.pending.push_back(Err(model.past_deadline()));
                    return;
                }
                self.phase = Phase::Send;
            }
            Phase::Send => {
                let sent = tokio::time::timeout_at(
                    self.deadline,
                    model.send(&self.body, &mut self.attempt),
                )
                .await;
                let resp = match sent {
                    Ok(Ok(r)) => r,
                    Ok(Err(e)) => {
                        self.retry_or_give_up(e);
                        return;
                    }
                    Err(_) => {
                        self.pending.push_back(Err(model.past_deadline()));
                        return;
                    }
                };
                let content_type = resp
                    .headers()
                    .get(CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_ascii_lowercase();
                if content_type.starts_with("text/html") {
                    // A web page (a login portal, a proxy's error page, the wrong base
                    // URL) is not retried and not read as events.
                    self.pending.push_back(Err(ModelError::Http {
                        provider: model.config.provider.clone(),
                        status: resp.status().as_u16(),
                        kind: crate::model::HttpErrorKind::Other,
                        message: format!(
                            "the server answered with text/html, not {}; is {} the API's address?",
                            if model.config.stream {
                                "an event stream"
                            } else {
                                "JSON"
                            },
                            model.endpoint.shown
                        ),
                        retry_after: None,
                    }));
                    return;
                }
                let headers = reported_headers(resp.headers());
                if !headers.is_empty() {
                    self.pending.push_back(Ok(ModelEvent::Headers(headers)));
                }
                let is_stream = model.config.stream && {
                    // A server may answer a streaming request with one JSON document
                    // (e.g. a cached error); decode by what came.
                    let ct = resp
                        .headers()
                        .get(CONTENT_TYPE)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("");
                    !ct.starts_with("application/json") || model.config.spec.stream_may_be_json()
                };
                if is_stream {
                    self.phase = Phase::Streaming {
                        body: Box::pin(resp.bytes_stream()),
                        decoder: model.codec.stream_decoder(model.decoder_config),
                    };
                } else {
                    self.whole_body(resp).await;
                }
            }
            Phase::Streaming {
                mut body,
                mut decoder,
            } => match tokio::select! {
                biased;
                _ = Self::cancelled(self.cancel.clone()) => None,
                next = tokio::time::timeout_at(self.deadline, body.next()) => Some(next),
            } {
                None => {
                    self.keep_partial(decoder.as_mut());
                    self.pending.push_back(Err(ModelError::Cancelled));
                }
                Some(Err(_)) => {
                    // What was decoded is kept as a cancelled message.
                    self.keep_partial(decoder.as_mut());
                    self.pending.push_back(Err(model.past_deadline()));
                }
                Some(Ok(Some(Ok(chunk))))
                    if self.received + chunk.len() > model.config.max_response_bytes =>
                {
                    self.keep_partial(decoder.as_mut());
                    self.pending.push_back(Err(model.too_large()));
                }
                Some(Ok(Some(Ok(chunk)))) => {
                    self.received += chunk.len();
                    let mut events = EventBatch::default();
                    let fed = decoder.feed(&chunk, &mut |e| events.push(e));
                    self.emitted |= !events.is_empty();
                    self.queue(&mut events);
                    match fed {
                        Ok(()) => self.phase = Phase::Streaming { body, decoder },
                        Err(e) => {
                            self.keep_partial(decoder.as_mut());
                            self.pending.push_back(Err(ModelError::Decode(e)));
                        }
                    }
                }
                Some(Ok(Some(Err(e)))) => {
                    let message = if e.is_timeout() {
                        format!(
                            "no data for {:?} (read timeout)",
                            model.config.timeouts.read
                        )
                    } else {
                        error_chain(&e)
                    };
                    self.keep_partial(decoder.as_mut());
                    drop(decoder);
                    self.retry_or_fail(message);
                }
                Some(Ok(None)) => {
                    let mut events = EventBatch::default();
                    let secret = model.secret();
                    let finished = decoder.finish(&mut |e| events.push(e));
                    match finished {
                        Ok(outcome)
                            if outcome.message.status == MessageStatus::Cancelled
                                && outcome.error.is_none() =>
                        {
                            self.emitted |= !events.is_empty();
                            self.queue(&mut events);
                            if self.emitted {
                                let mut m = outcome.message;
                                scrub_message(&mut m, secret);
                                self.pending.push_back(Ok(ModelEvent::Partial(Box::new(m))));
                            }
                            self.retry_or_fail(
                                "the body ended before the provider's end-of-stream marker".into(),
                            );
                        }
                        Ok(mut outcome) => {
                            scrub_outcome(&mut outcome, secret);
                            self.queue(&mut events);
                            self.pending
                                .push_back(Ok(ModelEvent::Done(Box::new(outcome))));
                        }
                        // The last event was cut off: the body ended mid-event.
                        Err(e) => {
                            self.keep_partial(decoder.as_mut());
                            self.retry_or_fail(format!("the body ended inside an event ({e})"))
                        }
                    }
                }
            },
        }
    }

    /// After a failed attempt: report the wait and back off when the error is
    /// retryable and the retry policy allows another attempt, else fail.
    fn retry_or_give_up(&mut self, error: ModelError) {
        let model = self.model;
        let Some(delay) = model.retry_delay(&error, self.attempt, self.started) else {
            self.pending
                .push_back(Err(model.with_wait_asked(error, self.started)));
            return;
        };
        tracing::warn!(
            provider = %model.config.provider,
            model = %model.config.model,
            attempt = self.attempt,
            delay_ms = delay.as_millis() as u64,
            error = %error,
            "retrying model request"
        );
        self.pending.push_back(Ok(ModelEvent::Retrying(Retry::new(
            self.attempt,
            delay,
            error.to_string(),
        ))));
        self.phase = Phase::Backoff(delay);
    }

    /// After a stream broke: retry when nothing was shown yet, else fail.
    fn retry_or_fail(&mut self, message: String) {
        let error = self.model.interrupted(message, None);
        if self.emitted {
            self.pending.push_back(Err(error));
            return;
        }
        self.retry_or_give_up(error);
    }

    async fn whole_body(&mut self, resp: reqwest::Response) {
        let model = self.model;
        let read = tokio::time::timeout_at(
            self.deadline,
            read_capped(resp, model.config.max_response_bytes),
        )
        .await;
        let read = match read {
            Err(_) => {
                self.pending.push_back(Err(model.past_deadline()));
                return;
            }
            Ok(None) => {
                self.pending.push_back(Err(model.too_large()));
                return;
            }
            Ok(Some(r)) => r,
        };
        match read {
            Ok(bytes) => match model.codec.decode_response(&bytes, model.decoder_config) {
                Ok(mut outcome) => {
                    scrub_outcome(&mut outcome, model.secret());
                    self.pending
                        .push_back(Ok(ModelEvent::Done(Box::new(outcome))))
                }
                Err(e) => self.pending.push_back(Err(ModelError::Decode(e))),
            },
            Err(e) => {
                let err = if e.is_timeout() {
                    ModelError::Timeout {
                        provider: model.config.provider.clone(),
                        after: model.config.timeouts.read,
                    }
                } else {
                    model.interrupted(error_chain(&e), Some(Cause::new(e.without_url())))
                };
                self.pending.push_back(Err(err));
            }
        }
    }
}

impl ChatModel for HttpModel {
    fn model_name(&self) -> &str {
        &self.config.model
    }

    fn provider_name(&self) -> &str {
        &self.config.provider
    }

    /// The provider's [`genai_name`](crate::http::providers::Provider::genai_name),
    /// or the display name the config was given instead of the provider's own.
    fn genai_provider_name(&self) -> &str {
        let spec = self.config.spec;
        if self.config.provider == spec.name() {
            spec.genai_name()
        } else {
            &self.config.provider
        }
    }

    fn stream<'a>(&'a self, conversation: &'a Conversation) -> ModelStream<'a> {
        self.run(conversation, None)
    }

    fn request_info(&self) -> crate::model::RequestInfo {
        let url = reqwest::Url::parse(&self.endpoint.shown).ok();
        crate::model::RequestInfo {
            server_address: url.as_ref().and_then(|u| u.host_str().map(str::to_owned)),
            server_port: url.as_ref().and_then(reqwest::Url::port_or_known_default),
            max_tokens: self.config.max_tokens,
            temperature: self.config.temperature,
        }
    }

    fn stream_until<'a>(
        &'a self,
        conversation: &'a Conversation,
        cancel: CancellationToken,
    ) -> ModelStream<'a> {
        self.run(conversation, Some(cancel))
    }
}

impl HttpModel {
    fn run<'a>(
        &'a self,
        conversation: &'a Conversation,
        cancel: Option<CancellationToken>,
    ) -> ModelStream<'a> {
        let body = match self.encode(conversation) {
            Ok(b) => b,
            Err(e) => return Box::pin(stream::once(async move { Err(e) })),
        };
        let run = Run {
            model: self,
            body: bytes::Bytes::from(body),
            attempt: 0,
            started: Instant::now(),
            phase: Phase::Send,
            pending: VecDeque::new(),
            emitted: false,
            deadline: tokio::time::Instant::now() + self.config.timeouts.total,
            received: 0,
            cancel,
        };
        Box::pin(stream::unfold(run, |mut run| async move {
            loop {
                if let Some(item) = run.pending.pop_front() {
                    if item.is_err() {
                        run.pending.clear();
                        run.phase = Phase::Finished;
                    }
                    return Some((item, run));
                }
                if matches!(run.phase, Phase::Finished) {
                    return None;
                }
                if matches!(run.phase, Phase::Streaming { .. }) {
                    // Watches the token itself, to keep what the decoder assembled.
                    run.step().await;
                    continue;
                }
                // Connecting or waiting to retry: nothing decoded to keep.
                tokio::select! {
                    biased;
                    _ = Run::cancelled(run.cancel.clone()) => {
                        run.phase = Phase::Finished;
                        run.pending.push_back(Err(ModelError::Cancelled));
                    }
                    _ = run.step() => {}
                }
            }
        }))
    }
}

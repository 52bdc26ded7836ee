//! The streamable HTTP client: rmcp's reqwest client, with the message cap
//! ([`McpOptions::max_message_bytes`](crate::McpOptions::max_message_bytes)) applied to
//! both reply forms and its breach recorded where the caller can name it.
//!
//! rmcp enforces the cap itself (one SSE event, one JSON body), but its worker keeps
//! the error to its log and fails the pending call with "Transport closed". This
//! wrapper delegates every request to rmcp's `reqwest::Client` implementation and only
//! watches the results: a `ResponseBodyTooLarge` error or an SSE stream that ends
//! with an "event exceeded the maximum size" error sets the connection's
//! [`Oversized`] flag, which the call's error then reports.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::{Error as SseError, Sse};

use crate::child::Oversized;

/// How many same-origin redirects one request may follow.
const MAX_REDIRECTS: usize = 10;

/// rmcp's reqwest client, watched for replies over the cap.
#[derive(Clone)]
pub(crate) struct CappedHttp {
    inner: reqwest::Client,
    oversized: Oversized,
}

/// The streamable HTTP transport to `url`, with replies capped at `max_message_bytes`;
/// a reply over the cap sets `oversized`.
pub(crate) fn transport(
    url: &str,
    max_message_bytes: usize,
    oversized: Oversized,
) -> Result<StreamableHttpClientTransport<CappedHttp>, reqwest::Error> {
    let inner = reqwest::Client::builder()
        // rmcp's default client does the same: an unread body left in the pool
        // stalls the next request on delayed ACKs.
        .pool_max_idle_per_host(0)
        .redirect(same_origin_redirects())
        .build()?;
    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    config.max_sse_event_size = max_message_bytes;
    config.max_json_response_size = max_message_bytes;
    Ok(StreamableHttpClientTransport::with_client(
        CappedHttp { inner, oversized },
        config,
    ))
}

/// rmcp's default policy (its function is private): follow only same-origin 307 and
/// 308 redirects, which keep the POST body; anything else comes back as the response,
/// so the session id and headers never reach another host.
fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let keeps_body = matches!(
            attempt.status(),
            reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT
        );
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if !keeps_body || !same_origin {
            attempt.stop()
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
        } else {
            attempt.follow()
        }
    })
}

impl CappedHttp {
    fn watch<T>(
        &self,
        r: Result<T, StreamableHttpError<reqwest::Error>>,
    ) -> Result<T, StreamableHttpError<reqwest::Error>> {
        if let Err(StreamableHttpError::ResponseBodyTooLarge { .. }) = &r {
            self.oversized.mark_unknown_size();
        }
        r
    }

    /// The SSE stream, with an oversized event recorded as it ends the stream.
    fn watch_stream(
        &self,
        s: BoxStream<'static, Result<Sse, SseError>>,
    ) -> BoxStream<'static, Result<Sse, SseError>> {
        let oversized = self.oversized.clone();
        s.inspect(move |item| {
            // rmcp's error type for this is private; its text is the only handle.
            if let Err(e) = item
                && is_event_too_large(e)
            {
                oversized.mark_unknown_size();
            }
        })
        .boxed()
    }
}

fn is_event_too_large(e: &SseError) -> bool {
    e.to_string().contains("exceeded the maximum size")
}

impl StreamableHttpClient for CappedHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let r = self
            .inner
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
        match self.watch(r)? {
            StreamableHttpPostResponse::Sse(s, id) => {
                Ok(StreamableHttpPostResponse::Sse(self.watch_stream(s), id))
            }
            other => Ok(other),
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let r = self
            .inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await;
        Ok(self.watch_stream(self.watch(r)?))
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let r = self
            .inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        Ok(self.watch_stream(self.watch(r)?))
    }
}

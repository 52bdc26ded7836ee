//! Request bodies read in time: a body must start within [`ServeConfig::body_timeout`]
//! and then keep up at least [`ServeConfig::min_body_rate`] bytes a second, or the
//! request gets 408 and its connection is closed.
//!
//! hyper's header-read timeout ends with the headers: a client that sent valid headers
//! and then one body byte every few seconds held its connection (and its slot under the
//! connection cap) for as long as it liked, and 1,025 of them kept every other request
//! waiting. Written as a middleware because neither hyper nor tower-http bounds a body's
//! rate (tower-http's timeout bounds a whole request, including the time its answer
//! streams).
//!
//! [`ServeConfig::body_timeout`]: crate::ServeConfig::body_timeout
//! [`ServeConfig::min_body_rate`]: crate::ServeConfig::min_body_rate

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, HttpBody};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use futures_util::StreamExt;

use crate::App;

/// The middleware: the whole body read within its deadlines, then the handler.
pub(crate) async fn read_in_time<S>(
    State(app): State<Arc<App<S>>>,
    request: Request,
    next: Next,
) -> Response {
    if request.body().is_end_stream() {
        return next.run(request).await;
    }
    let grace = app.config.body_timeout;
    let rate = app.config.min_body_rate.max(1) as f64;
    let max = app.config.max_body_bytes;
    let too_large = || {
        closing(crate::error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request body is larger than the {max} bytes allowed"),
        ))
    };
    let (parts, body) = request.into_parts();
    if body.size_hint().lower() > max as u64 {
        return too_large();
    }
    let start = tokio::time::Instant::now();
    let mut stream = body.into_data_stream();
    let mut read = bytes::BytesMut::new();
    loop {
        // The next bytes are due by the grace plus what the minimum rate allows for the
        // bytes so far.
        let due = start + grace + Duration::from_secs_f64(read.len() as f64 / rate);
        match tokio::time::timeout_at(due, stream.next()).await {
            Ok(None) => break,
            Ok(Some(Ok(chunk))) => {
                if read.len() + chunk.len() > max {
                    return too_large();
                }
                read.extend_from_slice(&chunk);
            }
            Ok(Some(Err(e))) => {
                return closing(crate::error(
                    StatusCode::BAD_REQUEST,
                    format!("cannot read the request body: {e}"),
                ));
            }
            Err(_) => {
                return closing(crate::error(
                    StatusCode::REQUEST_TIMEOUT,
                    format!(
                        "the request body came too slowly ({} bytes in {:.1} s): send it \
                         within {} s, at {} bytes a second or faster",
                        read.len(),
                        start.elapsed().as_secs_f64(),
                        grace.as_secs(),
                        rate as u64
                    ),
                ));
            }
        }
    }
    next.run(Request::from_parts(parts, Body::from(read.freeze())))
        .await
}

/// `response` with `Connection: close`: the rest of its request is never read.
fn closing(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

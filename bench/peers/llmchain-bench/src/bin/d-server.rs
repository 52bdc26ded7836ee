//! The local server of workload D: every peer's OpenAI client streams the same
//! completion from it over real HTTP/1.1 on 127.0.0.1.
//!
//! `d-server <D.sse>` binds an ephemeral port, prints `http://127.0.0.1:PORT/v1` on
//! stdout, and answers every `POST /v1/chat/completions` with the SSE body of `D.sse`
//! (written by `gen_data.py`), sent as one HTTP chunk per SSE event — as api.openai.com
//! flushes each token's event — from a single-threaded runtime (one core for the
//! server, the other for the client under test).

use std::convert::Infallible;
use std::io::Write;
use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use axum::routing::post;

fn events(body: &[u8]) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(end) = memchr::memmem::find(rest, b"\n\n") {
        out.push(Bytes::copy_from_slice(&rest[..end + 2]));
        rest = &rest[end + 2..];
    }
    if !rest.is_empty() {
        out.push(Bytes::copy_from_slice(rest));
    }
    out
}

async fn completion(events: Arc<Vec<Bytes>>, request: Bytes) -> Response {
    // The request is read in full (as a real server does) but not interpreted.
    drop(request);
    let stream = futures_util::stream::iter(
        (0..events.len()).map(move |i| Ok::<Bytes, Infallible>(events[i].clone())),
    );
    let mut response = Response::new(Body::from_stream(stream));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-request-id", HeaderValue::from_static("req_bench"));
    response
}

fn main() {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "../data/D.sse".into());
    let body = std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    let events = Arc::new(events(&body));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async move {
        let app = Router::new().route(
            "/v1/chat/completions",
            post(move |request: Bytes| completion(events.clone(), request)),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds 127.0.0.1");
        let addr = listener.local_addr().expect("an address");
        println!("http://{addr}/v1");
        std::io::stdout().flush().expect("stdout");
        axum::serve(listener, app).await.expect("serves");
    });
}

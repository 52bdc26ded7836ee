//! CPU the HTTP client spends per request beyond decoding.
//!
//! A local axum server (on its own thread) answers every request with the same
//! streamed OpenAI Chat body. `client_cpu` runs one whole `ChatModel::stream` call on a
//! current-thread runtime and reports the *calling thread's CPU time* (so the server's
//! work is not counted); `decode_only` feeds the same body through the decoder alone.
//! The difference is the client's own cost: encode, headers, hyper, chunk handling.

#![allow(unsafe_code)] // clock_gettime, for the thread's CPU time

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::response::Response;
use criterion::{Criterion, criterion_group, criterion_main};
use llmchain::chain::{ChatModel, collect_stream};
use llmchain::conversation::Conversation;
use llmchain::http::{HttpModel, HttpModelConfig, RetryPolicy};
use llmchain::message::Message;
use llmchain::provider::render::{ResponseScript, render_stream};
use llmchain::provider::{DecoderConfig, Format};

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn body() -> Vec<u8> {
    let script = ResponseScript::tool_call(
        "call_1",
        "get_weather",
        r#"{"city":"Paris","unit":"celsius","days":3}"#,
    )
    .with_text("Let me look that up for you. ".repeat(8))
    .with_usage(120, 60);
    render_stream(Format::OPENAI_CHAT, &script).unwrap()
}

fn serve(body: Arc<Vec<u8>>) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let app = Router::new().fallback(move || {
                let body = body.clone();
                async move {
                    Response::builder()
                        .header("content-type", "text/event-stream")
                        .header("x-request-id", "req_1")
                        .body(Body::from(body.as_ref().clone()))
                        .unwrap()
                }
            });
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    format!("http://{}/v1", rx.recv().unwrap())
}

fn bench(c: &mut Criterion) {
    let body = Arc::new(body());
    let base = serve(body.clone());
    let model = HttpModel::new(
        HttpModelConfig::openai("gpt-4.1")
            .api_key("sk-bench")
            .base_url(base)
            .retry(RetryPolicy::none()),
    )
    .unwrap();
    let mut conv = Conversation::new();
    conv.system = Some("You are helpful.".into());
    conv.messages
        .push(Message::user("What's the weather in Paris?"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    let mut g = c.benchmark_group("http_client");
    g.bench_function("client_cpu_per_request", |b| {
        b.iter_custom(|iters| {
            let start = thread_cpu();
            for _ in 0..iters {
                let out = rt
                    .block_on(collect_stream(model.stream(&conv), |_| {}))
                    .unwrap();
                std::hint::black_box(out);
            }
            thread_cpu() - start
        })
    });
    g.bench_function("decode_only", |b| {
        let codec = Format::OPENAI_CHAT.codec();
        b.iter_custom(|iters| {
            let start = thread_cpu();
            for _ in 0..iters {
                let mut dec = codec.stream_decoder(DecoderConfig::default());
                let mut n = 0usize;
                dec.feed(&body, &mut |_| n += 1).unwrap();
                let out = dec.finish(&mut |_| n += 1).unwrap();
                std::hint::black_box((out, n));
            }
            thread_cpu() - start
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(4));
    targets = bench
}
criterion_main!(benches);

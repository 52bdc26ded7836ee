//! rig-core 0.44.0 on the peer workloads, through its public API: an OpenAI Chat
//! `Model` whose transport is an in-memory `HttpClientExt` that replays the workload's
//! bytes in 64 KiB chunks (rig's chat-completions accumulator is `pub(crate)`, so the
//! public streaming path — `Model::stream` then `Streamed::finish` — is the only way in).
//! Prints one JSON line per workload: {"impl","workload","seconds","iters"}.

use std::future::{self, Future};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use rig_core::completion::{CompletionRequest, Message};
use rig_core::http_client::{
    self, BoxedStream, HttpClientExt, LazyBody, MultipartForm, Request, Response, StatusCode,
    StreamingResponse,
};
use rig_core::message::{AssistantContent, CallId, ProviderCallId, ToolName};
use rig_core::providers::openai::OpenAIConfig;
use rig_core::wasm_compat::WasmCompatSend;

const CHUNK: usize = 64 * 1024;

#[derive(Clone)]
struct Replay(Bytes);

impl HttpClientExt for Replay {
    fn send<T, U>(
        &self,
        _req: Request<T>,
    ) -> impl Future<Output = http_client::Result<Response<LazyBody<U>>>> + WasmCompatSend + 'static
    where
        T: Into<Bytes> + WasmCompatSend,
        U: From<Bytes> + WasmCompatSend + 'static,
    {
        future::ready(Err(http_client::Error::non_success_with_details(
            StatusCode::NOT_IMPLEMENTED,
            Default::default(),
            String::new(),
        )))
    }

    fn send_multipart<U>(
        &self,
        _req: Request<MultipartForm>,
    ) -> impl Future<Output = http_client::Result<Response<LazyBody<U>>>> + WasmCompatSend + 'static
    where
        U: From<Bytes> + WasmCompatSend + 'static,
    {
        future::ready(Err(http_client::Error::non_success_with_details(
            StatusCode::NOT_IMPLEMENTED,
            Default::default(),
            String::new(),
        )))
    }

    fn send_streaming<T>(
        &self,
        _req: Request<T>,
    ) -> impl Future<Output = http_client::Result<StreamingResponse>> + WasmCompatSend
    where
        T: Into<Bytes> + WasmCompatSend,
    {
        let body = self.0.clone();
        let chunks: Vec<http_client::Result<Bytes>> = (0..body.len())
            .step_by(CHUNK)
            .map(|i| Ok(body.slice(i..(i + CHUNK).min(body.len()))))
            .collect();
        let stream: BoxedStream = Box::pin(futures::stream::iter(chunks));
        future::ready(
            Response::builder()
                .status(StatusCode::OK)
                .header("content-type", "text/event-stream")
                .body(stream)
                .map_err(http_client::Error::Protocol),
        )
    }
}

fn time<F: FnMut()>(mut f: F) -> (f64, usize) {
    let mut samples = Vec::new();
    let start = Instant::now();
    while samples.len() < 20 && (samples.is_empty() || start.elapsed() < Duration::from_secs(2)) {
        let t = Instant::now();
        f();
        samples.push(t.elapsed().as_secs_f64());
    }
    samples.sort_by(f64::total_cmp);
    (samples[samples.len() / 2], samples.len())
}

fn report(workload: &str, (seconds, iters): (f64, usize)) {
    println!(r#"{{"impl":"rig","workload":"{workload}","seconds":{seconds},"iters":{iters}}}"#);
}

fn decode(rt: &tokio::runtime::Runtime, body: &Bytes, expect: &[usize]) {
    let model = OpenAIConfig::new("sk-bench")
        .connect(Replay(body.clone()))
        .chat("gpt-bench");
    let response = rt.block_on(async {
        let mut stream = model.stream(CompletionRequest::new("go")).expect("opens");
        while let Some(item) = stream.next().await {
            item.expect("item");
        }
        stream.finish().await.expect("finishes")
    });
    let lens: Vec<usize> = response
        .choice
        .iter()
        .filter_map(|c| match c {
            AssistantContent::ToolCall(call) => {
                Some(serde_json::to_string(&call.function.arguments).map_or(0, |s| s.len()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(lens, expect, "rig assembled different calls");
}

fn conversation(c: &serde_json::Value) -> CompletionRequest {
    let mut history = vec![Message::system(c["system"].as_str().unwrap_or_default())];
    for round in c["rounds"].as_array().expect("rounds") {
        history.push(Message::user(round["user"].as_str().unwrap_or_default()));
        let calls: Vec<AssistantContent> = round["calls"]
            .as_array()
            .expect("calls")
            .iter()
            .map(|call| {
                AssistantContent::tool_call(
                    call["id"].as_str().unwrap_or_default(),
                    ToolName::new(call["name"].as_str().unwrap_or_default()).expect("name"),
                    call["arguments"].clone(),
                )
            })
            .collect();
        history.push(Message::Assistant(
            rig_core::message::AssistantMessage::new(calls),
        ));
        for result in round["results"].as_array().expect("results") {
            let id = ProviderCallId::new(result["id"].as_str().unwrap_or_default()).expect("id");
            history.push(Message::tool_result(
                CallId::from(id),
                ToolName::new(result["name"].as_str().unwrap_or_default()).expect("name"),
                result["content"].as_str().unwrap_or_default(),
            ));
        }
    }
    let mut request = CompletionRequest::new("go");
    request.chat_history = history;
    request
}

fn main() {
    let data = std::env::args().nth(1).unwrap_or_else(|| "../data".into());
    let max = std::env::args()
        .nth(2)
        .and_then(|s| s.parse::<usize>().ok())
        .unwrap_or(usize::MAX);
    let expect: serde_json::Value =
        serde_json::from_slice(&std::fs::read(format!("{data}/expect.json")).expect("expect.json"))
            .expect("json");
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("rt");
    for size in [1usize << 10, 64 << 10, 1 << 20, 8 << 20] {
        if size > max {
            continue;
        }
        let body = Bytes::from(std::fs::read(format!("{data}/A_{size}.sse")).expect("A"));
        report(&format!("A_{size}"), time(|| decode(&rt, &body, &[size])));
    }
    let body = Bytes::from(std::fs::read(format!("{data}/B.sse")).expect("B"));
    let lens: Vec<usize> = expect["B"]
        .as_array()
        .expect("B")
        .iter()
        .map(|v| v.as_u64().unwrap_or(0) as usize)
        .collect();
    report("B", time(|| decode(&rt, &body, &lens)));

    let c: serde_json::Value =
        serde_json::from_slice(&std::fs::read(format!("{data}/C.json")).expect("C")).expect("json");
    let model = OpenAIConfig::new("sk-bench")
        .connect(Replay(Bytes::new()))
        .chat("gpt-bench");
    // `Model::stream` prepares and encodes the request eagerly and sends nothing until
    // polled, so timing it (and dropping the stream) times rig's request encoding.
    // Requests are built before timing (`stream` takes the request by value).
    let mut requests: Vec<CompletionRequest> = (0..20).map(|_| conversation(&c)).collect();
    report(
        "C",
        time(|| {
            let request = requests.pop().expect("one request per iteration");
            let t = model.stream(request).expect("encodes");
            drop(t);
        }),
    );
}

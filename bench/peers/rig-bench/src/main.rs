//! rig-core 0.44.0 on the peer workloads, through its public API: an OpenAI Chat
//! `Model` whose transport is an in-memory `HttpClientExt` that replays the workload's
//! bytes in 64 KiB chunks (rig's chat-completions accumulator is `pub(crate)`, so the
//! public streaming path — `Model::stream` then `Streamed::finish` — is the only way in).
//! Prints one JSON line per workload: {"impl","workload","seconds","iters"}.
//! D: rig's own reqwest transport (`OpenAIConfig::with_base_url(..).client()`) streams one
//! completion from the local `d-server` to the parsed tool call.

use std::future::{self, Future};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use rig_core::completion::{CompletionRequest, Message, ToolDefinition};
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

    // The item type is rig's (`http_client::Result<Bytes>`); its error size is not ours.
    #[allow(clippy::result_large_err)]
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

/// CPU time of the whole process (all threads), for D's client-side cost.
fn process_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// Workload D: one streamed completion from the local server over rig's reqwest
/// transport, to the parsed tool call and the text reply.
fn workload_d(rt: &tokio::runtime::Runtime, base: &str, expect: &serde_json::Value) {
    let model = OpenAIConfig::new("sk-bench")
        .with_base_url(base)
        .client()
        .chat("gpt-4o-2024-08-06");
    let args_len = expect["arguments"][0].as_u64().unwrap_or(0) as usize;
    let text_len = expect["text"].as_u64().unwrap_or(0) as usize;
    let once = || {
        let mut request = CompletionRequest::new("Write the lookup table module.");
        request.tools.push(ToolDefinition::new(
            ToolName::new("write_file").expect("name"),
            "Writes a file",
            serde_json::json!({"type": "object",
                "properties": {"content": {"type": "string"}}, "required": ["content"]}),
        ));
        let response = rt.block_on(async {
            let mut stream = model.stream(request).expect("opens");
            while let Some(item) = stream.next().await {
                item.expect("item");
            }
            stream.finish().await.expect("finishes")
        });
        let mut text = 0;
        let mut args = Vec::new();
        for c in &response.choice {
            match c {
                AssistantContent::Text(t) => text += t.text.len(),
                AssistantContent::ToolCall(call) => args.push(
                    call.function.arguments["content"]
                        .as_str()
                        .map_or(0, |s| s.len() + 14),
                ),
                _ => {}
            }
        }
        assert_eq!(args, [args_len], "rig assembled different calls");
        assert_eq!(text, text_len, "rig assembled a different text");
    };
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    let start = Instant::now();
    while wall.len() < 20 && (wall.is_empty() || start.elapsed() < Duration::from_secs(2)) {
        let (t, c) = (Instant::now(), process_cpu());
        once();
        cpu.push(process_cpu() - c);
        wall.push(t.elapsed().as_secs_f64());
    }
    wall.sort_by(f64::total_cmp);
    cpu.sort_by(f64::total_cmp);
    println!(
        r#"{{"impl":"rig","workload":"D","seconds":{},"cpu_seconds":{},"iters":{}}}"#,
        wall[wall.len() / 2],
        cpu[cpu.len() / 2],
        wall.len()
    );
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
        .enable_all()
        .build()
        .expect("rt");
    if let Some(base) = std::env::args().nth(3) {
        // `rig-bench DATA MAX BASE_URL`: workload D only.
        workload_d(&rt, &base, &expect["D"]);
        return;
    }
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

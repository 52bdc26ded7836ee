//! `llmchain-web`'s chat server as an application mounts it, on SQLite, for the serve
//! benchmark: `llmchain-chat PORT PACE_MS DELTAS DB_PATH`.
//!
//! The model is the benchmark's scripted model, the same for every server: step 1 is
//! DELTAS text deltas (each the CLOCK_MONOTONIC time it was emitted, then a space,
//! PACE_MS apart) and one call of `weather {"city":"Tokyo"}`; step 2, after the tool's
//! result, DELTAS more. Here it writes OpenAI Chat Completions wire events as it goes and
//! feeds them to llmchain's real decoder (the peers' mock models skip any decoding), and
//! encodes each request as a real client would. Every chat is stored (the peers store
//! nothing).

/// The allocator `llmchain serve` runs with (the `llmchain` binary's), so that this server
/// costs what that one does.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream;
use llmchain::chain::{ChainState, LLMChain, Mode};
use llmchain::conversation::Conversation;
use llmchain::message::Role;
use llmchain::model::{ChatModel, ModelError, ModelEvent, ModelStream};
use llmchain::provider::{DecoderConfig, EventBatch, Format, RequestOptions, StreamDecoder};
use llmchain::tool::Tool;
use llmchain_store::worker::BoxError;
use llmchain_store::{Durability, Run, SqliteStore};
use llmchain_web::{ChatServer, ServeConfig};
use serve_bench::monotonic_ns;

struct ClockModel {
    pace: Duration,
    deltas: usize,
}

struct Step {
    decoder: Box<dyn StreamDecoder>,
    left: usize,
    call: bool,
    pace: Duration,
    pending: VecDeque<ModelEvent>,
    done: bool,
}

impl Step {
    fn feed(&mut self, bytes: &[u8]) -> Result<(), ModelError> {
        let mut events = EventBatch::default();
        self.decoder.feed(bytes, &mut |e| events.push(e))?;
        self.pending.extend(events.drain().map(ModelEvent::Event));
        Ok(())
    }
}

impl ChatModel for ClockModel {
    fn model_name(&self) -> &str {
        "clock"
    }

    fn provider_name(&self) -> &str {
        "openai"
    }

    fn stream<'a>(&'a self, conversation: &'a Conversation) -> ModelStream<'a> {
        let codec = Format::OPENAI_CHAT.codec();
        let opts = RequestOptions {
            model: "clock".into(),
            stream: true,
            ..Default::default()
        };
        if let Err(e) = codec.encode(conversation, &opts) {
            return Box::pin(stream::once(async move { Err(ModelError::Encode(e)) }));
        }
        let after_tool = conversation
            .messages
            .last()
            .is_some_and(|m| m.role == Role::Tool);
        let step = Step {
            decoder: codec.stream_decoder(DecoderConfig::default()),
            left: self.deltas,
            call: !after_tool,
            pace: self.pace,
            pending: VecDeque::new(),
            done: false,
        };
        Box::pin(stream::unfold(step, |mut st| async move {
            loop {
                if let Some(ev) = st.pending.pop_front() {
                    return Some((Ok(ev), st));
                }
                if st.done {
                    return None;
                }
                let fed = if st.left > 0 {
                    if !st.pace.is_zero() {
                        tokio::time::sleep(st.pace).await;
                    }
                    st.left -= 1;
                    let event = format!(
                        "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{} \"}}}}]}}\n\n",
                        monotonic_ns()
                    );
                    st.feed(event.as_bytes())
                } else {
                    st.done = true;
                    let end = if st.call {
                        concat!(
                            "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call-1\",\"type\":\"function\",\"function\":{\"name\":\"weather\",\"arguments\":\"{\\\"city\\\":\\\"Tokyo\\\"}\"}}]}}]}\n\n",
                            "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
                            "data: [DONE]\n\n"
                        )
                    } else {
                        concat!(
                            "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
                            "data: [DONE]\n\n"
                        )
                    };
                    st.feed(end.as_bytes()).and_then(|()| {
                        let mut events = EventBatch::default();
                        let outcome = st.decoder.finish(&mut |e| events.push(e))?;
                        st.pending.extend(events.drain().map(ModelEvent::Event));
                        st.pending.push_back(ModelEvent::Done(Box::new(outcome)));
                        Ok(())
                    })
                };
                if let Err(e) = fed {
                    st.done = true;
                    st.pending.clear();
                    return Some((Err(e), st));
                }
            }
        }))
    }
}

fn weather() -> Tool {
    Tool::builder("weather")
        .description("weather")
        .schema(serde_json::json!({
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"]
        }))
        .handler(|args, _ctx| async move {
            serde_json::json!({"city": args["city"], "weather": "sunny"}).to_string()
        })
        .build()
        .expect("the tool is valid")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, port, pace, deltas, db] = &args[..] else {
        eprintln!("usage: llmchain-chat PORT PACE_MS DELTAS DB_PATH");
        std::process::exit(2);
    };
    if std::env::var_os("BENCH_TRACE").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("sqlx::query=debug"))
            .with_writer(std::io::stderr)
            .init();
    }
    let pace = Duration::from_millis(pace.parse().expect("PACE_MS"));
    let deltas: usize = deltas.parse().expect("DELTAS");
    let rt = if std::env::var_os("BENCH_CURRENT_THREAD").is_some() {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(2);
        b
    }
    .enable_all()
    .build()
    .unwrap();
    rt.block_on(async move {
        // BENCH_SYNC=normal: what the fsyncs cost (a returned write then survives a
        // process crash, not power loss); the benchmark's figures use the default, FULL.
        let durability = match std::env::var("BENCH_SYNC").as_deref() {
            Ok("normal") => Durability::Normal,
            _ => Durability::Full,
        };
        let store = Arc::new(
            SqliteStore::open_with(db, durability)
                .await
                .expect("the database opens"),
        );
        let model = Arc::new(ClockModel { pace, deltas });
        let factory = move |_run: Run, state: ChainState| {
            let model = model.clone();
            async move {
                let chain = LLMChain::from_state(model, state).with_tool(weather());
                Ok::<_, BoxError>((chain, Mode::while_needs_response()))
            }
        };
        let server = ChatServer::new(store, factory).config(ServeConfig {
            max_answers: 4096,
            max_readers: 8192,
            ..ServeConfig::default()
        });
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port.parse::<u16>().unwrap()))
            .await
            .unwrap();
        println!("listening http://{}", listener.local_addr().unwrap());
        // As `llmchain serve` serves it: bounded connections, header and idle timeouts.
        let limits = server.limits();
        llmchain_web::serve(listener, server.router(), limits, std::future::pending())
            .await
            .unwrap();
    });
}

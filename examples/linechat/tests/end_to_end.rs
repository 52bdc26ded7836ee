//! LineChat, a format defined outside llmchain, used like a built-in one: a chain turn
//! through `HttpModel` against a local LineChat server (a tool call run, the answer
//! read), a stream cut off inside a call (the call never runs), every chunking of a
//! body decoding the same, and the format's own `llmchain` (`decode` and `encode` by
//! name).

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use llmchain::chain::{LLMChain, Mode};
use llmchain::http::{HttpModel, HttpModelConfig};
use llmchain::message::{Message, MessageStatus, ToolCallStatus};
use llmchain::provider::{Codec, DecoderConfig, Format};
use llmchain::tool::Tool;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A LineChat server on loopback answering `bodies` in turn (NDJSON, 200); the request
/// bodies it got.
async fn server(bodies: Vec<Vec<u8>>) -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let s = seen.clone();
    let next = Arc::new(AtomicUsize::new(0));
    tokio::spawn(async move {
        loop {
            let Ok((mut tcp, _)) = listener.accept().await else {
                return;
            };
            let body = bodies
                .get(next.fetch_add(1, Ordering::SeqCst))
                .cloned()
                .unwrap_or_default();
            let s = s.clone();
            tokio::spawn(async move {
                // The request: headers, then Content-Length bytes.
                let mut got = Vec::new();
                let mut buf = [0u8; 8192];
                let (head_end, length) = loop {
                    let n = tcp.read(&mut buf).await.unwrap();
                    assert!(n > 0, "the client hung up");
                    got.extend_from_slice(&buf[..n]);
                    if let Some(at) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&got[..at]).to_ascii_lowercase();
                        let length = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        break (at + 4, length);
                    }
                };
                while got.len() < head_end + length {
                    let n = tcp.read(&mut buf).await.unwrap();
                    got.extend_from_slice(&buf[..n]);
                }
                s.lock()
                    .unwrap()
                    .push(serde_json::from_slice(&got[head_end..]).unwrap());
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                tcp.write_all(head.as_bytes()).await.unwrap();
                tcp.write_all(&body).await.unwrap();
            });
        }
    });
    (base, seen)
}

fn weather(ran: Arc<AtomicUsize>) -> Tool {
    Tool::builder("get_weather")
        .description("Current weather in a city.")
        .schema(json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}))
        .handler(move |args, _ctx| {
            let ran = ran.clone();
            async move {
                ran.fetch_add(1, Ordering::SeqCst);
                let city = args["city"].as_str().unwrap_or_default().to_owned();
                Ok::<_, String>(format!("18C and sunny in {city}"))
            }
        })
        .build()
        .unwrap()
}

fn model(base: &str) -> HttpModel {
    HttpModel::new(HttpModelConfig::for_provider(&linechat::PROVIDER, "line-1").base_url(base))
        .unwrap()
}

#[tokio::test]
async fn a_turn_runs_through_http_model_and_the_chain() {
    let (base, seen) = server(vec![
        linechat::render("", &[("c1", "get_weather", r#"{"city": "Paris"}"#)], 5),
        linechat::render("It is 18C and sunny in Paris.", &[], 5),
    ])
    .await;
    let ran = Arc::new(AtomicUsize::new(0));
    let mut chain = LLMChain::new(Arc::new(model(&base))).with_tool(weather(ran.clone()));
    chain
        .add_message(Message::user("Weather in Paris?"))
        .await
        .unwrap();
    chain.run(Mode::while_needs_response()).await.unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert_eq!(
        chain.last_message().unwrap().text().as_deref(),
        Some("It is 18C and sunny in Paris.")
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0]["tools"][0]["name"], "get_weather");
    assert_eq!(
        seen[1]["turns"][1]["calls"][0]["args"],
        json!({"city": "Paris"})
    );
    assert_eq!(
        seen[1]["turns"][2],
        json!({"role": "tool", "id": "c1", "text": "18C and sunny in Paris", "error": false})
    );
}

#[tokio::test]
async fn a_stream_cut_off_inside_a_call_never_runs_it() {
    let whole = linechat::render("", &[("c1", "get_weather", r#"{"city": "Paris"}"#)], 4);
    // Cut before the `end` line: the call's arguments may even be whole.
    let end = whole[..whole.len() - 1]
        .iter()
        .rposition(|b| *b == b'\n')
        .unwrap();
    let (base, _) = server(vec![whole[..end + 1].to_vec()]).await;
    let ran = Arc::new(AtomicUsize::new(0));
    let mut chain = LLMChain::new(Arc::new(model(&base))).with_tool(weather(ran.clone()));
    chain.add_message(Message::user("Weather?")).await.unwrap();
    let _ = chain.run(Mode::while_needs_response()).await;
    assert_eq!(ran.load(Ordering::SeqCst), 0, "a cut-off call ran");
    let last = chain.last_message().unwrap();
    assert_eq!(last.status, MessageStatus::Cancelled);
    assert!(
        last.tool_calls
            .iter()
            .all(|c| c.status == ToolCallStatus::Incomplete)
    );
}

#[test]
fn every_chunking_decodes_the_same_and_hostile_input_is_bounded() {
    let codec = linechat::LineChatCodec;
    let body = linechat::render(
        "Héllo wörld",
        &[("c1", "f", r#"{"a": "ü", "b": [1, 2]}"#), ("c2", "g", "{}")],
        3,
    );
    let whole = codec
        .decode_body(&body, 0, DecoderConfig::default())
        .unwrap();
    assert_eq!(whole.message.status, MessageStatus::Complete);
    assert_eq!(whole.message.tool_calls.len(), 2);
    assert_eq!(whole.response_id.as_deref(), Some("lc-1"));
    for size in 1..body.len() {
        let cut = codec
            .decode_body(&body, size, DecoderConfig::default())
            .unwrap();
        assert_eq!(cut, whole, "chunks of {size} bytes");
    }
    // Arguments past the cap, and a line past the cap, are errors, not memory.
    let big = linechat::render(
        "",
        &[("c1", "f", &format!("{{\"a\": \"{}\"}}", "x".repeat(4096)))],
        512,
    );
    let small = DecoderConfig {
        max_argument_bytes: 1024,
        ..DecoderConfig::default()
    };
    assert!(codec.decode_body(&big, 100, small).is_err());
    let tight = DecoderConfig {
        max_line_bytes: 64,
        ..DecoderConfig::default()
    };
    assert!(codec.decode_body(&big, 100, tight).is_err());
}

/// The format's own `llmchain`, hermetic: none of the user's files, keys, database or
/// collector (its home, config and data are `dir`).
fn own_llmchain(dir: &std::path::Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_linechat-llmchain"));
    for (name, _) in std::env::vars_os() {
        let n = name.to_string_lossy();
        if n.starts_with("LLMCHAIN_") || n.starts_with("OTEL_") || n.starts_with("XDG_") {
            cmd.env_remove(&name);
        }
    }
    cmd.env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir)
        .env("XDG_DATA_HOME", dir);
    cmd
}

#[test]
fn its_own_llmchain_decodes_and_encodes_it_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("answer.ndjson");
    std::fs::write(
        &body,
        linechat::render("", &[("c1", "get_weather", r#"{"city": "Paris"}"#)], 6),
    )
    .unwrap();
    let out = own_llmchain(dir.path())
        .args(["decode", "--format", "linechat"])
        .arg(&body)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["tool_calls"][0]["name"], "get_weather", "{report}");
    assert_eq!(
        report["tool_calls"][0]["arguments"],
        json!({"city": "Paris"})
    );

    let conv = dir.path().join("conversation.json");
    std::fs::write(
        &conv,
        json!({"version": 1, "messages": [{"role": "user", "content": "Hi"}]}).to_string(),
    )
    .unwrap();
    let out = own_llmchain(dir.path())
        .args(["encode", "--format", "lc", "--model", "line-1"])
        .arg(&conv)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let request: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(request["turns"][0], json!({"role": "user", "text": "Hi"}));

    // An unknown name lists the registered format among the built-in ones.
    let out = own_llmchain(dir.path())
        .args(["decode", "--format", "nope"])
        .arg(&body)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("linechat (or lc)"),
        "{out:?}"
    );
    // The registry's names hold for a format registered in this process too.
    linechat::register().unwrap();
    assert_eq!("LC".parse::<Format>().unwrap().title(), "LineChat");
}

#[test]
fn it_passes_the_codec_conformance_suite() {
    use llmchain::provider::conformance;
    conformance::check_codec(&linechat::LineChatCodec, &linechat::render_script).unwrap();
}

/// The suite is not a formality: a codec that calls a cut-off answer finished fails it.
#[test]
fn a_codec_that_runs_truncated_calls_fails_the_suite() {
    use llmchain::provider::{
        DecodeError, DecodeOutcome, EncodeError, RequestOptions, StreamDecoder,
    };

    struct Sloppy;
    impl Codec for Sloppy {
        fn format(&self) -> Format {
            linechat::LineChatCodec.format()
        }
        fn encode(
            &self,
            conv: &llmchain::conversation::Conversation,
            opts: &RequestOptions,
        ) -> Result<Vec<u8>, EncodeError> {
            linechat::LineChatCodec.encode(conv, opts)
        }
        fn stream_decoder(&self, config: DecoderConfig) -> Box<dyn StreamDecoder> {
            linechat::LineChatCodec.stream_decoder(config)
        }
        fn decode_response(
            &self,
            body: &[u8],
            config: DecoderConfig,
        ) -> Result<DecodeOutcome, DecodeError> {
            linechat::LineChatCodec.decode_response(body, config)
        }
        // Whatever arrived counts as finished, its calls completed as far as they parse.
        fn decode_body(
            &self,
            body: &[u8],
            chunk: usize,
            config: DecoderConfig,
        ) -> Result<DecodeOutcome, DecodeError> {
            let mut out = linechat::LineChatCodec.decode_body(body, chunk, config)?;
            out.message.status = MessageStatus::Complete;
            for c in &mut out.message.tool_calls {
                let _ = c.complete_in_place();
            }
            Ok(out)
        }
    }
    let body = linechat::render(
        "",
        &[("c1", "f", r#"{"path": "/tmp/a", "recursive": true}"#)],
        3,
    );
    let e = llmchain::provider::conformance::check_truncation(&Sloppy, &body).unwrap_err();
    assert!(e.contains("a truncated call would run"), "{e}");
}

/// `ScriptedModel` replays LineChat through its real decoder, like a built-in format: a
/// chain turn with a tool call, the requests encoded by its real encoder.
#[tokio::test]
async fn scripted_model_speaks_it() {
    use llmchain::chain::ScriptedModel;
    use llmchain::provider::render::ResponseScript;
    let model = ScriptedModel::new(Format::new(&linechat::FORMAT))
        .respond(ResponseScript::tool_call(
            "c1",
            "get_weather",
            r#"{"city": "Oslo"}"#,
        ))
        .unwrap()
        .respond(ResponseScript::text("Cold in Oslo."))
        .unwrap();
    let model = Arc::new(model);
    let ran = Arc::new(AtomicUsize::new(0));
    let mut chain = LLMChain::new(model.clone()).with_tool(weather(ran.clone()));
    chain.add_message(Message::user("Oslo?")).await.unwrap();
    chain.run(Mode::while_needs_response()).await.unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert_eq!(
        chain.last_message().unwrap().text().as_deref(),
        Some("Cold in Oslo.")
    );
    let second: Value = serde_json::from_slice(&model.requests()[1]).unwrap();
    assert_eq!(second["turns"][2]["id"], "c1");
}

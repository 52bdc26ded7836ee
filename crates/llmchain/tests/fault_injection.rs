//! Fault injection: damaged stream bytes through every real decoder (in memory and over a
//! loopback TCP server), damaged turns through the chain (`ScriptedModel`), and tools that
//! panic, hang, return huge outputs or invalid UTF-8.
//!
//! The suite asserts: no panic, no lost message (what was in the conversation before a
//! failed turn is still there, and a clean retry completes), and no second execution of a
//! non-idempotent tool call.
//!
//! Short form by default (a few dozen mutations per fixture). Full form:
//! `LLMCHAIN_FAULT_FULL=1 cargo test -p llmchain --test fault_injection --release`.
//! Every loop is bounded; the TCP server binds 127.0.0.1 only.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use llmchain::chain::{ChainError, LLMChain, Mode, ScriptedModel};
use llmchain::message::{Message, Role};
use llmchain::provider::render::{ResponseScript, render_stream};
use llmchain::provider::{DecodeError, DecodeOutcome, DecoderConfig, Format, StreamEvent};
use llmchain::tool::{Tool, ToolOutput};
use serde_json::json;

fn full() -> bool {
    std::env::var("LLMCHAIN_FAULT_FULL").is_ok_and(|v| v == "1")
}

/// Mutations per input: short form for CI, full form by `LLMCHAIN_FAULT_FULL=1`.
fn rounds() -> usize {
    if full() { 2_000 } else { 24 }
}

/// A small deterministic PRNG (xorshift64*), so failures reproduce from the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// The faults a proxy can inflict on a byte stream.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// Bytes lost in the middle.
    Drop,
    /// The body stops early.
    Truncate,
    /// A range is delivered twice.
    Duplicate,
    /// Bytes flipped (including invalid UTF-8 and control bytes).
    Corrupt,
    /// Invalid UTF-8 spliced in.
    InvalidUtf8,
}

const FAULTS: [Fault; 5] = [
    Fault::Drop,
    Fault::Truncate,
    Fault::Duplicate,
    Fault::Corrupt,
    Fault::InvalidUtf8,
];

fn damage(body: &[u8], fault: Fault, rng: &mut Rng) -> Vec<u8> {
    let n = body.len().max(1);
    let at = rng.below(n);
    let len = 1 + rng.below(64.min(n));
    let end = (at + len).min(body.len());
    let mut out = body.to_vec();
    match fault {
        Fault::Drop => {
            out.drain(at.min(out.len())..end);
        }
        Fault::Truncate => out.truncate(at),
        Fault::Duplicate => {
            let piece = body[at.min(body.len())..end].to_vec();
            out.splice(end..end, piece);
        }
        Fault::Corrupt => {
            for _ in 0..1 + rng.below(8) {
                let i = rng.below(out.len());
                if let Some(b) = out.get_mut(i) {
                    *b ^= 1 << rng.below(8);
                }
            }
        }
        Fault::InvalidUtf8 => {
            let i = at.min(out.len());
            out.splice(i..i, [0xff, 0xfe, 0xc3, 0x28, 0xe2, 0x82]);
        }
    }
    out
}

fn fixtures() -> Vec<(Format, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut out = Vec::new();
    for &format in Format::ALL {
        let Ok(dir) = std::fs::read_dir(root.join(format.as_str())) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = Vec::new();
        let mut pending: Vec<PathBuf> = dir.filter_map(|e| e.ok().map(|e| e.path())).collect();
        // Bodies may sit in subfolders (Bedrock's event-stream frames); notes and
        // licences beside them are not bodies.
        while let Some(path) = pending.pop() {
            if path.is_dir() {
                if let Ok(inner) = std::fs::read_dir(&path) {
                    pending.extend(inner.filter_map(|e| e.ok().map(|e| e.path())));
                }
            } else if !is_note(&path) {
                paths.push(path);
            }
        }
        paths.sort();
        out.extend(paths.into_iter().map(|p| (format, p)));
    }
    out
}

fn is_note(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.ends_with(".md") || name.starts_with("LICENSE")
}

/// Decodes `body` fed in `chunk`-byte pieces; events are drained and counted.
fn decode(format: Format, body: &[u8], chunk: usize) -> Result<DecodeOutcome, DecodeError> {
    format
        .codec()
        .decode_body(body, chunk, DecoderConfig::default())
}

#[test]
fn damaged_bytes_never_panic_any_decoder() {
    let fixtures = fixtures();
    assert!(fixtures.len() >= 20, "fixtures found: {}", fixtures.len());
    let mut rng = Rng(0x5eed_1234);
    let mut decoded = 0usize;
    for (format, path) in &fixtures {
        let body = std::fs::read(path).unwrap();
        let clean = decode(*format, &body, 0);
        // Re-chunking (what a slow or delaying proxy does) changes nothing.
        for chunk in [1, 3, 17, 4096] {
            assert_eq!(
                decode(*format, &body, chunk),
                clean,
                "{} chunked by {chunk}",
                path.display()
            );
        }
        for round in 0..rounds() {
            let fault = FAULTS[round % FAULTS.len()];
            let damaged = damage(&body, fault, &mut rng);
            let chunk = 1 + rng.below(64);
            // A panic fails the test; a typed error or a degraded outcome is fine.
            if decode(*format, &damaged, chunk).is_ok() {
                decoded += 1;
            }
        }
    }
    assert!(decoded > 0, "no damaged body decoded at all");
}

/// A loopback server that sends `body` in small writes with short pauses, then closes
/// (possibly early, for a truncating fault). One connection, then it exits.
fn serve_once(body: Vec<u8>, write: usize, pause: Duration) -> (u16, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        if let Ok((mut conn, _)) = listener.accept() {
            for piece in body.chunks(write.max(1)) {
                if conn.write_all(piece).is_err() {
                    return;
                }
                if !pause.is_zero() {
                    std::thread::sleep(pause);
                }
            }
        }
    });
    (port, handle)
}

/// Reads the server's bytes as they arrive and feeds each read to a fresh decoder.
fn decode_over_tcp(format: Format, port: u16) -> Result<(DecodeOutcome, usize), DecodeError> {
    let mut conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut dec = format.codec().stream_decoder(DecoderConfig::default());
    let mut events = 0usize;
    let mut sink = |_: StreamEvent<'_>| events += 1;
    let mut buf = [0u8; 512];
    // Bounded: at most 1 MiB of reads.
    for _ in 0..2048 {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => dec.feed(&buf[..n], &mut sink)?,
        }
    }
    let outcome = dec.finish(&mut sink)?;
    Ok((outcome, events))
}

#[test]
fn damaged_streams_over_loopback_tcp() {
    let mut rng = Rng(0xfeed_0042);
    let script =
        ResponseScript::tool_call("call_1", "transfer", r#"{"amount": 10, "to": "acct-9"}"#)
            .with_text("Sending the transfer now.");
    let per_format = if full() { 200 } else { 6 };
    for &format in Format::ALL {
        let body = render_stream(format, &script).unwrap();
        let clean = decode(format, &body, 0).unwrap();
        // Delayed, dribbled delivery: the same outcome.
        let (port, server) = serve_once(body.clone(), 5, Duration::from_millis(1));
        let (slow, events) = decode_over_tcp(format, port).unwrap();
        server.join().unwrap();
        assert_eq!(
            slow, clean,
            "{format}: dribbled delivery changed the outcome"
        );
        assert!(events > 0);
        for round in 0..per_format {
            let fault = FAULTS[round % FAULTS.len()];
            let damaged = damage(&body, fault, &mut rng);
            let (port, server) = serve_once(damaged, 1 + rng.below(200), Duration::ZERO);
            // No panic; a typed error or a (possibly cancelled) outcome.
            if let Ok((outcome, _)) = decode_over_tcp(format, port) {
                assert_eq!(outcome.message.role, Role::Assistant);
            }
            server.join().unwrap();
        }
    }
}

/// A non-idempotent tool that records each execution per call id.
fn transfer_tool(runs: Arc<Mutex<HashMap<String, usize>>>) -> Tool {
    Tool::builder("transfer")
        .description("Moves money (not idempotent)")
        .schema(json!({"type": "object",
            "properties": {"amount": {"type": "integer"}, "to": {"type": "string"}},
            "required": ["amount", "to"]}))
        .idempotent(false)
        .handler(move |args, ctx| {
            let runs = runs.clone();
            let _ = ctx;
            async move {
                let key = format!("{}:{}", args["to"], args["amount"]);
                *runs.lock().unwrap().entry(key).or_default() += 1;
                ToolOutput::text("ok")
            }
        })
        .build()
        .unwrap()
}

#[tokio::test]
async fn damaged_turns_through_the_chain_lose_nothing_and_never_run_twice() {
    let mut rng = Rng(0xc4a1_0007);
    let n: usize = if full() { 400 } else { 20 };
    for round in 0..n {
        let format = Format::ALL[round % Format::ALL.len()];
        let amount = 1000 + round;
        let call = ResponseScript::tool_call(
            format!("call_{round}"),
            "transfer",
            format!(r#"{{"amount": {amount}, "to": "acct-{round}"}}"#),
        );
        let body = render_stream(format, &call).unwrap();
        let fault = FAULTS[round % FAULTS.len()];
        let damaged = damage(&body, fault, &mut rng);
        let model = ScriptedModel::new(format)
            .chunk_size(1 + rng.below(40))
            .respond_bytes(damaged)
            .respond(ResponseScript::text("done"))
            .unwrap()
            .respond(ResponseScript::text("done again"))
            .unwrap();
        let runs = Arc::new(Mutex::new(HashMap::new()));
        let mut chain = LLMChain::new(Arc::new(model)).with_tool(transfer_tool(runs.clone()));
        chain
            .add_message(Message::user(format!("pay acct-{round}")))
            .await
            .unwrap();
        let first = chain.run(Mode::while_needs_response()).await;
        // No lost message: the user's message is still first, whatever happened.
        assert_eq!(chain.messages()[0].role, Role::User, "round {round}");
        if let Err(e) = &first {
            // A typed error; run again and the chain completes with a clean turn.
            assert!(!matches!(e, ChainError::NoMessages), "round {round}: {e}");
            let _ = chain.run(Mode::while_needs_response()).await;
            assert_eq!(chain.messages()[0].role, Role::User);
        }
        // Never a second execution of the same non-idempotent call.
        for (key, count) in runs.lock().unwrap().iter() {
            assert_eq!(
                *count, 1,
                "round {round} ({fault:?}): {key} ran {count} times"
            );
        }
    }
}

fn model_calling(tool: &str, args: &str) -> ScriptedModel {
    ScriptedModel::new(Format::OPENAI_CHAT)
        .respond(ResponseScript::tool_call("c1", tool, args))
        .unwrap()
        .respond(ResponseScript::text("done"))
        .unwrap()
}

async fn run_one(tool: Tool) -> (LLMChain, Arc<ScriptedModel>) {
    run_capped(tool, llmchain::tool::DEFAULT_MAX_RESULT_BYTES).await
}

/// [`run_one`] with a cap on tool result size.
async fn run_capped(tool: Tool, max_result_bytes: usize) -> (LLMChain, Arc<ScriptedModel>) {
    let name = tool.name().to_owned();
    let model = Arc::new(model_calling(&name, "{}"));
    let mut chain = LLMChain::new(model.clone()).with_tool(tool);
    chain.max_tool_result_bytes = max_result_bytes;
    chain.add_message(Message::user("go")).await.unwrap();
    chain.run(Mode::while_needs_response()).await.unwrap();
    (chain, model)
}

fn tool_result_of(chain: &LLMChain) -> &llmchain::message::ToolResult {
    let tool_msg = chain
        .messages()
        .iter()
        .find(|m| m.role == Role::Tool)
        .expect("a tool message");
    &tool_msg.tool_results[0]
}

/// Asserts the tool result is a plain error (not an exception nor a refusal) with
/// exactly `text`, and that the chain went on to the model's answer.
fn assert_error_result_then_answer(chain: &LLMChain, text: &str) {
    let r = tool_result_of(chain);
    assert!(
        r.is_error() && !r.is_exception() && !r.is_refusal(),
        "{r:?}"
    );
    assert_eq!(r.content_text(), text);
    assert_eq!(
        chain.last_message().unwrap().text().as_deref(),
        Some("done")
    );
}

#[tokio::test]
async fn a_panicking_tool_becomes_an_exception_result() {
    let tool = Tool::builder("boom")
        .handler(|_, _| async move {
            if std::hint::black_box(true) {
                panic!("kaboom");
            }
            ToolOutput::text("unreachable")
        })
        .build()
        .unwrap();
    let (chain, _) = run_one(tool).await;
    let r = tool_result_of(&chain);
    assert!(r.is_error() && r.is_exception(), "{r:?}");
    assert!(r.content_text().contains("kaboom"), "{}", r.content_text());
    assert_eq!(
        chain.last_message().unwrap().text().as_deref(),
        Some("done")
    );
}

#[tokio::test]
async fn a_hanging_tool_times_out_with_an_error_result() {
    let tool = Tool::builder("hang")
        .timeout(Duration::from_millis(50))
        .handler(|_, _| async move {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            ToolOutput::text("never")
        })
        .build()
        .unwrap();
    let (chain, _) = run_one(tool).await;
    let r = tool_result_of(&chain);
    assert!(r.is_error(), "{r:?}");
    let text = r.content_text().to_lowercase();
    assert!(
        text.contains("timed out") || text.contains("timeout"),
        "{text}"
    );
}

fn huge_tool() -> Tool {
    Tool::builder("huge")
        .handler(|_, _| async move { ToolOutput::text("x".repeat(8 << 20)) })
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_huge_tool_output_becomes_a_bounded_error_result() {
    // 8 MiB of output against the default 1 MiB cap: the model gets an error result
    // naming the tool, the size and the limit; the chain goes on to the model's answer.
    let (chain, model) = run_one(huge_tool()).await;
    assert_error_result_then_answer(
        &chain,
        "Tool huge returned 8388608 bytes of content, more than the limit of 1048576 bytes; \
         the output was discarded. Call the tool again in a way that returns less \
         (a narrower query, fewer fields or a page of results).",
    );
    assert_eq!(tool_result_of(&chain).name.as_deref(), Some("huge"));
    let requests = model.requests();
    let last = requests.last().unwrap();
    assert!(
        last.len() < 4096,
        "the next request is {} bytes",
        last.len()
    );
    let body: serde_json::Value = serde_json::from_slice(last).unwrap();
    assert!(
        body.to_string()
            .contains("more than the limit of 1048576 bytes")
    );
}

#[tokio::test]
async fn the_tool_output_cap_is_configurable_and_can_be_lifted() {
    // No cap: the result is kept whole and the next request carries it.
    let (chain, model) = run_capped(huge_tool(), usize::MAX).await;
    assert_eq!(tool_result_of(&chain).content_text().len(), 8 << 20);
    let requests = model.requests();
    let last = requests.last().unwrap();
    assert!(last.len() > 8 << 20);
    serde_json::from_slice::<serde_json::Value>(last).unwrap();

    // A smaller cap.
    let (chain, _) = run_capped(huge_tool(), 1000).await;
    assert_error_result_then_answer(
        &chain,
        "Tool huge returned 8388608 bytes of content, more than the limit of 1000 bytes; \
         the output was discarded. Call the tool again in a way that returns less \
         (a narrower query, fewer fields or a page of results).",
    );
}

#[tokio::test]
async fn invalid_utf8_bytes_from_a_tool_become_an_error_result() {
    let tool = Tool::builder("bytes")
        .handler(|_, _| async move {
            ToolOutput::from_utf8(vec![b'o', b'k', 0xff, 0xfe, b' ', 0xc3, 0x28])
        })
        .build()
        .unwrap();
    let (chain, model) = run_one(tool).await;
    assert_error_result_then_answer(
        &chain,
        "The tool's output is not valid UTF-8 text (7 bytes; invalid utf-8 sequence of 1 \
         bytes from index 2), so it was not sent to the model.",
    );
    let requests = model.requests();
    let body: serde_json::Value = serde_json::from_slice(requests.last().unwrap()).unwrap();
    assert!(body.to_string().contains("not valid UTF-8 text"));
}

#[tokio::test]
async fn invalid_utf8_from_a_tool_is_replaced_not_fatal() {
    let tool = Tool::builder("bytes")
        .handler(|_, _| async move {
            let raw = [b'o', b'k', 0xff, 0xfe, b' ', 0xc3, 0x28];
            ToolOutput::text(String::from_utf8_lossy(&raw).into_owned())
        })
        .build()
        .unwrap();
    let (chain, model) = run_one(tool).await;
    let text = tool_result_of(&chain).content_text();
    assert!(
        text.starts_with("ok") && text.contains('\u{FFFD}'),
        "{text:?}"
    );
    let requests = model.requests();
    let body: serde_json::Value = serde_json::from_slice(requests.last().unwrap()).unwrap();
    assert!(body.to_string().contains('\u{FFFD}'));
}

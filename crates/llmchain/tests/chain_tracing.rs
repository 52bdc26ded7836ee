//! The chain's tracing spans carry the OpenTelemetry GenAI attribute names.

use std::io::Write;
use std::sync::{Arc, Mutex};

use llmchain::chain::{LLMChain, Mode, ScriptedModel};
use llmchain::message::Message;
use llmchain::provider::Format;
use llmchain::provider::render::ResponseScript;
use llmchain::tool::Tool;
use serde_json::json;
use tracing_subscriber::fmt::format::FmtSpan;

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

#[tokio::test(flavor = "current_thread")]
async fn run_model_and_tool_spans_use_genai_names() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_span_events(FmtSpan::CLOSE)
        .with_writer(captured.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let model = ScriptedModel::new(Format::ANTHROPIC)
        .respond(ResponseScript::tool_call("c1", "echo", r#"{"x": 1}"#).with_usage(7, 3))
        .unwrap()
        .respond(ResponseScript::text("done"))
        .unwrap();
    let echo = Tool::builder("echo")
        .schema(json!({"type": "object"}))
        .handler(|args, _| async move { serde_json::Value::Object(args).to_string() })
        .build()
        .unwrap();
    let mut chain = LLMChain::new(Arc::new(model))
        .with_tool(echo)
        .with_conversation_id("conv-1")
        .with_agent_name("helper");
    chain.add_message(Message::user("go")).await.unwrap();
    chain.run(Mode::while_needs_response()).await.unwrap();

    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    for needle in [
        "invoke_agent",
        // The names and kinds an OpenTelemetry layer gives the spans.
        "otel.name=\"invoke_agent helper\"",
        "otel.kind=\"internal\"",
        "gen_ai.agent.name=\"helper\"",
        "otel.kind=\"client\"",
        "gen_ai.conversation.id=\"conv-1\"",
        "gen_ai.request.stream=true",
        "otel.name=\"execute_tool echo\"",
        "gen_ai.tool.type=\"function\"",
        "gen_ai.operation.name=\"chat\"",
        "gen_ai.provider.name=\"anthropic\"",
        "gen_ai.usage.input_tokens=7",
        "gen_ai.usage.output_tokens=3",
        "gen_ai.operation.name=\"execute_tool\"",
        "gen_ai.tool.name=\"echo\"",
        "gen_ai.tool.call.id=\"c1\"",
    ] {
        assert!(log.contains(needle), "missing {needle} in:\n{log}");
    }
}

/// A failed tool, a denied call and a rejected one: each has its `execute_tool` span; the
/// failures say ERROR with their `error.type`, the denial says how it was answered.
#[tokio::test(flavor = "current_thread")]
async fn failed_denied_and_rejected_calls_are_told_apart() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_span_events(FmtSpan::CLOSE)
        .with_writer(captured.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let calls = ResponseScript::tool_call("c1", "boom", "{}")
        .with_call("c2", "rm", "{}")
        .with_call("c3", "send", "{}");
    let model = ScriptedModel::new(Format::OPENAI_CHAT)
        .respond(calls)
        .unwrap()
        .respond(ResponseScript::text("ok"))
        .unwrap();
    let tool = |name: &str, fails: bool| {
        Tool::builder(name)
            .schema(json!({"type": "object"}))
            .handler(move |_, _| async move {
                if fails {
                    llmchain::tool::ToolOutput::error("it broke")
                } else {
                    llmchain::tool::ToolOutput::text("done")
                }
            })
            .build()
            .unwrap()
    };
    let mut chain = LLMChain::new(Arc::new(model))
        .with_tool(tool("boom", true))
        .with_tool(tool("rm", false))
        .with_tool(tool("send", false))
        .with_review(
            |call: &llmchain::message::ToolCall| match call.name.as_deref() {
                Some("rm") => llmchain::chain::ReviewDecision::Deny {
                    reason: "no".into(),
                },
                Some("send") => llmchain::chain::ReviewDecision::Reject {
                    reason: "not now".into(),
                },
                _ => llmchain::chain::ReviewDecision::Approve,
            },
        );
    chain.add_message(Message::user("go")).await.unwrap();
    chain.run(Mode::while_needs_response()).await.unwrap();

    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let span_of = |tool: &str| {
        log.lines()
            .find(|l| {
                l.contains(&format!("otel.name=\"execute_tool {tool}\"")) && l.contains("close")
            })
            .unwrap_or_else(|| panic!("no closed span of {tool} in:\n{log}"))
            .to_owned()
    };
    let boom = span_of("boom");
    assert!(boom.contains("error.type=\"tool_error\""), "{boom}");
    assert!(boom.contains("otel.status_code=\"error\""), "{boom}");
    let rm = span_of("rm");
    assert!(rm.contains("llmchain.tool.decision=\"denied\""), "{rm}");
    assert!(!rm.contains("error.type"), "{rm}");
    let send = span_of("send");
    assert!(send.contains("error.type=\"rejected\""), "{send}");
    assert!(send.contains("otel.status_code=\"error\""), "{send}");
}

/// What the provider said of the response reaches the `chat` span: its id, the model
/// that answered and the cache tokens, exactly as reported.
#[tokio::test(flavor = "current_thread")]
async fn chat_spans_carry_the_response_id_model_and_cache_tokens() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_span_events(FmtSpan::CLOSE)
        .with_writer(captured.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let body = concat!(
        "event: message_start\n",
        r#"data: {"type":"message_start","message":{"id":"msg_cache1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":20,"cache_read_input_tokens":300,"output_tokens":1}}}"#,
        "\n\nevent: content_block_start\n",
        r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        "\n\nevent: content_block_delta\n",
        r#"data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}"#,
        "\n\nevent: content_block_stop\n",
        r#"data: {"type":"content_block_stop","index":0}"#,
        "\n\nevent: message_delta\n",
        r#"data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":5}}"#,
        "\n\nevent: message_stop\n",
        r#"data: {"type":"message_stop"}"#,
        "\n\n",
    );
    let model = ScriptedModel::new(Format::ANTHROPIC).respond_bytes(body.as_bytes().to_vec());
    let mut chain = LLMChain::new(Arc::new(model));
    chain.add_message(Message::user("go")).await.unwrap();
    chain.run(Mode::while_needs_response()).await.unwrap();

    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    for needle in [
        "gen_ai.response.id=\"msg_cache1\"",
        "gen_ai.response.model=\"claude-sonnet-4-5-20250929\"",
        // Anthropic counts cached tokens apart; the conventions (and our usage) count
        // them in the input: 12 + 300 + 20.
        "gen_ai.usage.input_tokens=332",
        "gen_ai.usage.output_tokens=5",
        "gen_ai.usage.cache_read.input_tokens=300",
        "gen_ai.usage.cache_creation.input_tokens=20",
    ] {
        assert!(log.contains(needle), "missing {needle} in:\n{log}");
    }
}

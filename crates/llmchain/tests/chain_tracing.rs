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

    let model = ScriptedModel::new(Format::Anthropic)
        .respond(ResponseScript::tool_call("c1", "echo", r#"{"x": 1}"#).with_usage(7, 3))
        .unwrap()
        .respond(ResponseScript::text("done"))
        .unwrap();
    let echo = Tool::builder("echo")
        .schema(json!({"type": "object"}))
        .handler(|args, _| async move { serde_json::Value::Object(args).to_string() })
        .build()
        .unwrap();
    let mut chain = LLMChain::new(Arc::new(model)).with_tool(echo);
    chain.add_message(Message::user("go")).await.unwrap();
    chain.run(Mode::while_needs_response()).await.unwrap();

    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    for needle in [
        "invoke_agent",
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

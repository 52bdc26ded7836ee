//! A minimal tool call, offline: a scripted model asks for `get_weather`, the chain runs
//! the tool and the model answers with the result.
//!
//! `cargo run -p llmchain --example minimal_tool_call`

use std::sync::Arc;

use llmchain::chain::{LLMChain, Mode, ScriptedModel};
use llmchain::message::Message;
use llmchain::provider::Format;
use llmchain::provider::render::ResponseScript;
use llmchain::tool::Tool;
use serde_json::json;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let weather = Tool::builder("get_weather")
        .description("Current weather in a city.")
        .schema(json!({
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"]
        }))
        .handler(|args, _ctx| async move {
            let city = args["city"].as_str().unwrap_or_default().to_owned();
            Ok::<_, String>(format!("18C and sunny in {city}"))
        })
        .build()?;

    // The model's two turns, as real Anthropic wire bytes through the real decoder.
    let model = ScriptedModel::new(Format::Anthropic)
        .respond(ResponseScript::tool_call(
            "call_1",
            "get_weather",
            r#"{"city": "Paris"}"#,
        ))?
        .respond(ResponseScript::text("It is 18C and sunny in Paris."))?;

    let mut chain = LLMChain::new(Arc::new(model)).with_tool(weather);
    chain
        .add_message(Message::user("What's the weather in Paris?"))
        .await?;
    let outcome = chain.run(Mode::while_needs_response()).await?;

    for m in chain.messages() {
        println!("{:?}: {}", m.role, m.text().unwrap_or_default());
        for r in &m.tool_results {
            println!("  tool result {}: {}", r.tool_call_id, r.content_text());
        }
    }
    println!("outcome: {outcome:?}");
    Ok(())
}

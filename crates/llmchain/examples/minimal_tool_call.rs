//! A minimal tool call: the model asks for `get_weather`, the chain runs the tool and the
//! model answers with the result.
//!
//! Against OpenAI (or any compatible server: `OPENAI_BASE_URL`):
//! `OPENAI_API_KEY=sk-... cargo run -p llmchain --example minimal_tool_call`.
//! Without a key, `.ci/examples` runs it against `scripts/mock_openai.py`.

use std::sync::Arc;

use llmchain::chain::{LLMChain, Mode};
use llmchain::http::{HttpModel, HttpModelConfig};
use llmchain::message::Message;
use llmchain::provider::Format;
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

    // OPENAI_API_KEY and OPENAI_BASE_URL from the environment.
    let model = HttpModel::new(HttpModelConfig::from_env(
        Format::OPENAI_CHAT,
        "gpt-4.1-mini",
    )?)?;

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

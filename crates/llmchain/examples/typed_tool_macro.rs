//! A typed tool with `#[llmchain::tool]`: the argument struct's JSON Schema comes from
//! `schemars`, the doc comment is the description, bad arguments are refused before
//! the body runs.
//!
//! `cargo run -p llmchain --example typed_tool_macro`. In your crate, beside `llmchain`:
//! `serde = { version = "1", features = ["derive"] }`, `schemars = "1"`, `tokio`.

use llmchain::tool::ToolContext;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize, JsonSchema)]
struct AddArgs {
    /// The first number.
    a: f64,
    /// The second number.
    b: f64,
}

/// Adds two numbers.
#[llmchain::tool(timeout_ms = 1000, idempotent)]
async fn add(args: AddArgs) -> Result<String, String> {
    Ok(format!("{}", args.a + args.b))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let tool = add_tool();
    println!("name: {}", tool.name());
    println!("description: {}", tool.description());
    println!(
        "schema: {}",
        serde_json::to_string_pretty(tool.parameters_schema()).unwrap_or_default()
    );

    let ok = tool
        .execute(json!({"a": 2, "b": 40}), ToolContext::new("c1"))
        .await;
    println!(
        "add(2, 40) = {} (error: {})",
        ok.content_text(),
        ok.is_error()
    );

    let bad = tool
        .execute(json!({"a": "two"}), ToolContext::new("c2"))
        .await;
    println!("refused: {} -> {}", bad.is_refusal(), bad.content_text());
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Args {
    x: String,
}

/// Misspelled attribute.
#[llmchain::tool(timeout = 5)]
async fn misspelled(args: Args) -> String {
    args.x
}

fn main() {}

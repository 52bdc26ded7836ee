#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Args {
    x: String,
}

/// A name providers reject.
#[llmchain::tool(name = "get weather")]
async fn bad_name(args: Args) -> String {
    args.x
}

fn main() {}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Args {
    x: u32,
}

/// Returns something that is not a tool output.
#[llmchain::tool]
async fn bad_return(args: Args) -> u32 {
    args.x
}

fn main() {}

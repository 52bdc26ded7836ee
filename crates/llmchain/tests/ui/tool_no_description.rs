#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Args {
    x: String,
}

#[llmchain::tool]
async fn undocumented(args: Args) -> String {
    args.x
}

fn main() {}

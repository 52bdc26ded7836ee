/// Not async.
#[llmchain::tool]
fn not_async(args: Args) -> String {
    args.x
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Args {
    x: String,
}

fn main() {}

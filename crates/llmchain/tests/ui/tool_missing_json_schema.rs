#[derive(serde::Deserialize)]
struct Args {
    x: String,
}

/// The argument struct does not derive JsonSchema.
#[llmchain::tool]
async fn no_schema(args: Args) -> String {
    args.x
}

fn main() {}

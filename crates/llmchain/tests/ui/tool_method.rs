#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Args {
    x: String,
}

struct S;

impl S {
    /// A method.
    #[llmchain::tool]
    async fn method(&self, args: Args) -> String {
        args.x
    }
}

fn main() {}

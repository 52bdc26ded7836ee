/// Three arguments.
#[llmchain::tool]
async fn three(args: Args, ctx: llmchain::tool::ToolContext, extra: u8) -> String {
    let _ = (ctx, extra);
    args.x
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Args {
    x: String,
}

fn main() {}

/// Borrowed argument.
#[llmchain::tool]
async fn borrowed(args: &str) -> String {
    args.to_owned()
}

fn main() {}

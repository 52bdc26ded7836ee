/// No argument.
#[llmchain::tool]
async fn no_argument() -> String {
    String::new()
}

fn main() {}

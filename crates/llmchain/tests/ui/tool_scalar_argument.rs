/// Scalar argument: tool arguments are an object.
#[llmchain::tool]
async fn scalar(n: u32) -> String {
    n.to_string()
}

fn main() {}

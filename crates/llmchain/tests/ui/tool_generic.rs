/// Generic.
#[llmchain::tool]
async fn generic<T: serde::de::DeserializeOwned + schemars::JsonSchema>(args: T) -> String {
    let _ = args;
    String::new()
}

fn main() {}

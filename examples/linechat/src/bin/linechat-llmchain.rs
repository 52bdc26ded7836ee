//! `llmchain`, speaking LineChat too: the format registered, then the command as it is.
//!
//! ```text
//! linechat-llmchain decode --format linechat body.ndjson
//! linechat-llmchain encode --format lc conversation.json
//! ```

use std::process::ExitCode;

fn main() -> ExitCode {
    if let Err(e) = linechat::register() {
        eprintln!("linechat-llmchain: {e}");
        return ExitCode::from(1);
    }
    llmchain_cli::main()
}

//! The `llmchain` command-line tool.

fn main() {
    eprintln!("llmchain: no subcommands yet");
    std::process::exit(2);
}

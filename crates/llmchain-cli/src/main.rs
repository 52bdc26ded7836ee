//! The `llmchain` binary: the command is the library's ([`llmchain_cli::main`]).

use std::process::ExitCode;

/// mimalloc rather than the C library's malloc (see `Cargo.toml`): a written choice of the
/// binary; the library crates leave the allocator to the application.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    llmchain_cli::main()
}

#!/usr/bin/env bash
# The fault-injection suite in full (docs/testing.md): damaged streams, hostile tools,
# killed processes. The short form of the same tests runs with `cargo test --workspace`.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

step "damaged streams and hostile tools (full form)"
LLMCHAIN_FAULT_FULL=1 cargo test --release -p llmchain --test fault_injection --test tool_outcomes

step "processes killed mid-run: store level and chain level (200 SIGKILLs each)"
cargo test --release -p llmchain-store --test crash --test chain_crash

step "the chat server killed and restarted under load (64 chats, 20 kills)"
LLMCHAIN_CHAOS_CHATS=64 LLMCHAIN_CHAOS_KILLS=20 cargo test --release -p llmchain-cli --test serve_chaos --test crash_matrix

if [[ -n "${LLMCHAIN_TEST_POSTGRES_URL:-}" ]]; then
    step "4 PostgreSQL workers, one killed mid-way"
    cargo test --release -p llmchain-store --test pg_workers
else
    step "PostgreSQL workers: skipped (set LLMCHAIN_TEST_POSTGRES_URL to run them)"
fi
printf '\nfault-injection suite: all passed\n'

#!/usr/bin/env bash
# The chaos suite in full: 8 worker processes, 5,000 runs, 20 SIGKILLs, 3 PostgreSQL
# restarts and 3 rounds of pg_terminate_backend, on a PostgreSQL server of the test's
# own (needs PostgreSQL's server binaries, e.g. Debian's `postgresql` package).
# CI runs the short form (4 workers, 300 runs, 3 kills, 1 restart) as part of
# `cargo test --workspace`. Override any setting: CHAOS_RUNS=20000 scripts/chaos.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export CHAOS_WORKERS="${CHAOS_WORKERS:-8}"
export CHAOS_RUNS="${CHAOS_RUNS:-5000}"
export CHAOS_KILLS="${CHAOS_KILLS:-20}"
export CHAOS_FREEZES="${CHAOS_FREEZES:-6}"
export CHAOS_RESTARTS="${CHAOS_RESTARTS:-3}"
export CHAOS_TERMINATES="${CHAOS_TERMINATES:-3}"
export CHAOS_SLOW_PERCENT="${CHAOS_SLOW_PERCENT:-2}"
exec cargo test --release -p llmchain-store --test chaos -- --nocapture --exact chaos

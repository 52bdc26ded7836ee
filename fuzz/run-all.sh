#!/usr/bin/env bash
# Runs every fuzz target for SECONDS seconds each, one after another, and exits non-zero
# if any target found a crash (artifacts are kept in fuzz/artifacts/<target>/).
#   fuzz/run-all.sh 120
# Needs cargo-fuzz. On a stable toolchain RUSTC_BOOTSTRAP=1 enables the nightly flags
# cargo-fuzz uses; set SANITIZER=none if the address sanitizer is unavailable.
set -uo pipefail
secs="${1:?usage: fuzz/run-all.sh SECONDS}"
cd "$(dirname "$0")"
sanitizer="${SANITIZER:-address}"
failed=()
for target in $(cargo fuzz list); do
    echo "== $target ($secs s, sanitizer $sanitizer)"
    if ! RUSTC_BOOTSTRAP=1 cargo fuzz run --sanitizer "$sanitizer" "$target" -- \
        -max_total_time="$secs" -print_final_stats=1; then
        failed+=("$target")
    fi
done
if ((${#failed[@]})); then
    echo "== crashes in: ${failed[*]}"
    exit 1
fi
echo "== all targets ran clean"

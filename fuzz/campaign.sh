#!/usr/bin/env bash
# The fuzzing campaign: seeds every corpus from the fixtures, then runs every target of
# the fuzz workspace (fuzz/) for SECONDS seconds each,
# one after another, and prints a summary table. Stops at the first crash with exit 1
# (the crashing input is kept in <fuzz dir>/artifacts/<target>/).
#
#   fuzz/campaign.sh 240                         # every target, 4 minutes each
#   ONLY="cli_encode decode_body" fuzz/campaign.sh 60
#
# Environment: ONLY (target names to run, default all), SANITIZER (address, or none
# where ASan is unavailable), NICE (niceness, default 10), LOG_DIR (default
# fuzz/logs/<UTC timestamp>). Needs cargo-fuzz (`cargo install cargo-fuzz`); on a
# stable toolchain RUSTC_BOOTSTRAP=1 (set here) enables the nightly flags it uses.
# Runs one fuzzer at a time (one core); each log keeps libFuzzer's final stats.
set -uo pipefail
secs="${1:?usage: fuzz/campaign.sh SECONDS_PER_TARGET}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
sanitizer="${SANITIZER:-address}"
nice_level="${NICE:-10}"
log_dir="${LOG_DIR:-fuzz/logs/$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$log_dir"
export RUSTC_BOOTSTRAP=1
fuzz_dirs=(fuzz)
target_dir="${FUZZ_TARGET_DIR:-$root/fuzz/target}"

python3 fuzz/seed_corpora.py || exit 1

summary="$log_dir/summary.tsv"
printf 'dir\ttarget\tseconds\texecs\texecs/s\tcorpus\tpeak_rss_mb\tresult\n' >"$summary"
# Build everything first, so the runs fuzz one snapshot of the library.
for dir in "${fuzz_dirs[@]}"; do
    echo "== building $dir (sanitizer $sanitizer)"
    if ! nice -n "$nice_level" cargo fuzz build --fuzz-dir "$dir" --target-dir "$target_dir" --sanitizer "$sanitizer" \
        >"$log_dir/build-$dir.log" 2>&1; then
        echo "== build of $dir failed; see $log_dir/build-$dir.log"
        exit 2
    fi
done
status=0
for dir in "${fuzz_dirs[@]}"; do
    for target in $(cargo fuzz list --fuzz-dir "$dir"); do
        if [[ -n "${ONLY:-}" && " $ONLY " != *" $target "* ]]; then
            continue
        fi
        log="$log_dir/$target.log"
        echo "== $dir/$target: $secs s ($(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg))"
        start=$(date +%s)
        nice -n "$nice_level" cargo fuzz run --fuzz-dir "$dir" --target-dir "$target_dir" --sanitizer "$sanitizer" "$target" -- \
            -max_total_time="$secs" -timeout=30 -print_final_stats=1 >"$log" 2>&1
        rc=$?
        elapsed=$(($(date +%s) - start))
        stat() { grep -m1 "^stat::$1:" "$log" | awk '{print $2}'; }
        corpus=$(find "$dir/corpus/$target" -type f | wc -l)
        result=clean
        ((rc != 0)) && result="CRASH (exit $rc)"
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$dir" "$target" "$elapsed" \
            "$(stat number_of_executed_units)" "$(stat average_exec_per_sec)" "$corpus" \
            "$(stat peak_rss_mb)" "$result" >>"$summary"
        if ((rc != 0)); then
            echo "== $dir/$target crashed; log $log, input in $dir/artifacts/$target/"
            grep -m5 -E 'panicked|ERROR: libFuzzer|SUMMARY|Test unit written' "$log"
            status=1
            break 2
        fi
    done
done
echo
column -t -s $'\t' "$summary"
echo "== logs in $log_dir"
exit "$status"

#!/usr/bin/env bash
# One command: installs what is missing, generates the workloads once, runs llmchain,
# rig, LangChain and the AI SDK on them, prints a table and writes results/plot.svg.
# PEERS="llmchain rig langchain aisdk" selects implementations; LIMIT=60 is the
# per-workload time limit (seconds) for the slow peers.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
PEERS="${PEERS:-llmchain rig langchain aisdk}"
LIMIT="${LIMIT:-60}"
mkdir -p results
./install.sh
python3 gen_data.py

for peer in $PEERS; do
  out="results/$peer.jsonl"
  : > "$out"
  case "$peer" in
    llmchain) ./llmchain-bench/target/release/llmchain-bench data | tee -a "$out" ;;
    # rig is linear but slow (8 MiB took ~4 min on the loaded 2-vCPU VM); RIG_MAX_SIZE=1048576 skips 8 MiB.
    rig) ./rig-bench/target/release/rig-bench data "${RIG_MAX_SIZE:-}" | tee -a "$out" ;;
    langchain) (cd python && ../.venv/bin/python bench_langchain.py ../data) | tee -a "$out" ;;
    aisdk)
      skip=""
      for w in A_1024 A_65536 A_1048576 A_8388608 B C; do
        if [ -n "$skip" ] && [[ "$w" == A_* ]]; then
          echo "{\"impl\":\"aisdk\",\"workload\":\"$w\",\"skipped\":\"a smaller size exceeded the limit\"}" | tee -a "$out"
          continue
        fi
        # Node starts in well under a second; the limit applies to the whole process.
        if ! (cd node && timeout "$((LIMIT + 5))" node bench_aisdk.mjs ../data "$w") | tee -a "$out"; then
          echo "{\"impl\":\"aisdk\",\"workload\":\"$w\",\"timeout\":$LIMIT}" | tee -a "$out"
          [[ "$w" == A_* ]] && skip=1
        fi
      done ;;
  esac
done

python3 report.py results

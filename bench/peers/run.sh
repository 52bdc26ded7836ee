#!/usr/bin/env bash
# One command: installs what is missing, generates the workloads once, runs llmchain,
# rig, LangChain and the AI SDK on them, prints a table and writes results/plot.svg.
# PEERS="llmchain rig langchain aisdk" selects implementations; LIMIT=60 is the
# per-workload time limit (seconds) for the slow peers. WORKLOADS="ABC D" selects the
# in-process workloads (A, B, C) and/or the end-to-end one against the local server (D).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
PEERS="${PEERS:-llmchain rig langchain aisdk}"
LIMIT="${LIMIT:-60}"
WORKLOADS="${WORKLOADS:-ABC D}"
mkdir -p results
[ -n "${SKIP_INSTALL:-}" ] || ./install.sh  # SKIP_INSTALL=1: use what is built
python3 gen_data.py
{ echo "date: $(date -u +%FT%TZ) peers=$PEERS workloads=$WORKLOADS"; echo "start: $(cat /proc/loadavg)"; } >> results/load.txt

if [[ "$WORKLOADS" == *ABC* ]]; then
for peer in $PEERS; do
  out="results/$peer.jsonl"
  : > "$out"
  case "$peer" in
    llmchain) ./target/release/llmchain-bench data | tee -a "$out" ;;
    # rig is linear but slow (8 MiB took ~4 min on the loaded 2-vCPU VM); RIG_MAX_SIZE=1048576 skips 8 MiB.
    rig) ./target/release/rig-bench data "${RIG_MAX_SIZE:-}" | tee -a "$out" ;;
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
  echo "after $peer: $(cat /proc/loadavg)" >> results/load.txt
done
fi

if [[ "$WORKLOADS" == *D* ]]; then
  # D: one local server for everyone; each peer's own HTTP client streams from it.
  coproc SERVER { exec ./target/release/d-server data/D.sse; }
  trap 'kill "$SERVER_PID" 2>/dev/null || true' EXIT
  read -r base <&"${SERVER[0]}"
  echo "workload D: server at $base"
  for peer in $PEERS; do
    out="results/$peer-D.jsonl"
    : > "$out"
    cmd=()
    case "$peer" in
      llmchain) cmd=(./target/release/llmchain-bench data "$base") ;;
      rig) cmd=(./target/release/rig-bench data "" "$base") ;;
      langchain) cmd=(bash -c "cd python && exec ../.venv/bin/python bench_langchain.py ../data D '$base'") ;;
      aisdk) cmd=(bash -c "cd node && exec node bench_aisdk.mjs ../data D '$base'") ;;
    esac
    if ! timeout "$((LIMIT + 5))" "${cmd[@]}" | tee -a "$out"; then
      echo "{\"impl\":\"$peer\",\"workload\":\"D\",\"timeout\":$LIMIT}" | tee -a "$out"
    fi
    echo "after $peer D: $(cat /proc/loadavg)" >> results/load.txt
  done
fi

echo "end: $(cat /proc/loadavg)" >> results/load.txt
cat results/load.txt
python3 report.py results

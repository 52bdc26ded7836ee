#!/usr/bin/env bash
# The serve benchmark (issue 28), in one run: llmchain's chat server (llmchain-web, every
# chat stored in SQLite), the AI SDK's own server (streamText(...).toUIMessageStreamResponse()
# with its mock model) and pydantic-ai's Vercel AI adapter, each on the same scripted
# model (20 timestamped text deltas, one `weather` call, 20 more deltas) and driven by the
# same load generator (serve-bench/src/bin/load.rs). Three phases, each on a fresh server:
#   cpu      1,000 chats, 16 at a time, the model as fast as it can: server CPU per 1,000 chats
#   latency  300 chats, 20 at a time, a delta every 10 ms: added latency per chunk
#   memory   1,000 chats at once, a delta every 100 ms (all streams open together):
#            peak resident memory of the server, latency under that load
# SERVERS="llmchain llmchain-normal aisdk pydantic" selects servers; llmchain-normal is
# the same server with SQLite's synchronous=NORMAL (every write survives a process
# crash, the last ones may not survive power loss; the peers store nothing). Results:
# results/serve.jsonl.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
SERVERS="${SERVERS:-llmchain llmchain-normal aisdk pydantic}"
[ -n "${SKIP_INSTALL:-}" ] || ./install.sh
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
mkdir -p results
out=results/serve.jsonl
: > "$out"
echo "date: $(date -u +%FT%TZ) servers=$SERVERS load: $(cat /proc/loadavg)" | tee results/serve-load.txt
LOAD=./target/release/load
# Below the ephemeral range (32768-60999 here): a port there can be held by an
# outgoing connection of the load generator, and binding it then fails.
port=20100

start() { # start SERVER PACE_MS DELTAS -> sets SERVER_PID, BASE
  local name=$1 pace=$2 deltas=$3
  port=$((port + 1))
  local db
  db=$(mktemp -d /tmp/serve-bench.XXXXXX)
  case "$name" in
    llmchain) cmd=(./target/release/llmchain-chat "$port" "$pace" "$deltas" "$db/chats.db") ;;
    llmchain-normal) cmd=(env BENCH_SYNC=normal ./target/release/llmchain-chat "$port" "$pace" "$deltas" "$db/chats.db") ;;
    aisdk) cmd=(node node/server.mjs "$port" "$pace" "$deltas") ;;
    pydantic) cmd=(.venv/bin/python python/server.py "$port" "$pace" "$deltas") ;;
  esac
  coproc SERVER { exec "${cmd[@]}"; }
  SERVER_PID=$!
  local line
  read -r line <&"${SERVER[0]}"
  BASE=${line#listening }
}

SERVER_PID=
stop() {
  [ -n "$SERVER_PID" ] || return 0
  kill "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=
  rm -rf /tmp/serve-bench.*
}
trap stop EXIT

phase() { # phase SERVER NAME PACE CHATS CONCURRENCY
  local name=$1 phase=$2 pace=$3 chats=$4 conc=$5
  start "$name" "$pace" 20
  # One chat first: the first request of a Node or Python server is cold.
  "$LOAD" "$BASE" 1 1 "$SERVER_PID" warmup >/dev/null
  "$LOAD" "$BASE" "$chats" "$conc" "$SERVER_PID" "$name" |
    python3 -c "import json,sys; d=json.load(sys.stdin); d['phase']='$phase'; d['pace_ms']=$pace; print(json.dumps(d))" |
    tee -a "$out"
  stop
}

for s in $SERVERS; do
  phase "$s" cpu 0 1000 16
  phase "$s" latency 10 300 20
  phase "$s" memory 100 1000 1000
  echo "after $s: $(cat /proc/loadavg)" | tee -a results/serve-load.txt
done
python3 report.py "$out"

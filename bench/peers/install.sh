#!/usr/bin/env bash
# Installs the pinned peers if missing: LangChain (venv), AI SDK (npm ci), rig (cargo build).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"


if [ ! -x "$here/.venv/bin/python" ] || ! "$here/.venv/bin/python" -c "import langchain_openai" 2>/dev/null; then
  python3 -m venv "$here/.venv"
  "$here/.venv/bin/pip" install -q -r "$here/python/requirements.txt"
fi

if [ ! -d "$here/node/node_modules/@ai-sdk/openai" ]; then
  (cd "$here/node" && if [ -f package-lock.json ]; then npm ci --silent; else npm install --silent; fi)
fi

# Both bench crates (each its own workspace) share one target dir: their common
# dependencies (tokio, hyper, rustls) are built once.
export CARGO_TARGET_DIR="$here/target"
(cd "$here/llmchain-bench" && cargo build --release --quiet)
(cd "$here/rig-bench" && cargo build --release --quiet)

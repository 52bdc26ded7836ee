#!/usr/bin/env bash
# Installs the pinned peer servers if missing: the AI SDK (npm ci in node/),
# pydantic-ai (venv at .venv from python/requirements.txt).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

if [ ! -d "$here/node/node_modules/ai" ] || [ ! -d "$here/node/node_modules/zod" ]; then
  (cd "$here/node" && npm ci --silent)
fi

if [ ! -x "$here/.venv/bin/python" ] || ! "$here/.venv/bin/python" -c "import pydantic_ai.ui.vercel_ai, uvicorn, starlette" 2>/dev/null; then
  python3 -m venv "$here/.venv"
  "$here/.venv/bin/pip" install -q -r "$here/python/requirements.txt"
fi

# llmchain's server (llmchain-web on SQLite) and the load generator: their own workspace.
(cd "$here/serve-bench" && CARGO_TARGET_DIR="$here/target" cargo build --release --quiet)

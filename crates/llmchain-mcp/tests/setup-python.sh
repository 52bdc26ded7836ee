#!/usr/bin/env bash
# Installs the official MCP Python SDK into a virtualenv for the llmchain-mcp tests.
# Prints the venv's python path on the last line of stdout; the tests read it from
# LLMCHAIN_TEST_MCP_PYTHON (see .ci/run).
set -euo pipefail
VENV="${1:-${LLMCHAIN_MCP_VENV:-$(cd "$(dirname "$0")/../../.." && pwd)/target/mcp-venv}}"
MCP_VERSION="2.3.0"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV" >&2
fi
if ! "$VENV/bin/python" -c "import mcp" 2>/dev/null; then
  "$VENV/bin/pip" install --quiet "mcp==$MCP_VERSION" >&2
fi
echo "$VENV/bin/python"

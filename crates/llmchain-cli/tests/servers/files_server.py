"""A small MCP server speaking raw JSON-RPC over stdio (no SDK), for the review tests.

usage: files_server.py ROOT [START_DELAY_SECS]

One tool, `write_file {path, content}`, annotated destructive: writes `content` to
ROOT/path (a plain name, nothing outside ROOT) and appends one line per execution to
ROOT/.calls, so a test can count how often it ran and with what. START_DELAY_SECS
delays the answer to `initialize` (a server that is slow to start).

Each execution is also logged to ROOT/.started as it begins; while ROOT/.hold exists it
waits there (a call a test can kill its client in the middle of).
"""
import json
import os
import sys
import time

ROOT = sys.argv[1]
DELAY = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


TOOL = {
    "name": "write_file",
    "description": "Write a file",
    "annotations": {"title": "Write a file", "readOnlyHint": False, "destructiveHint": True},
    "inputSchema": {
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"],
    },
}

for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    req = json.loads(line)
    if "id" not in req:
        continue
    method = req.get("method")
    if method == "initialize":
        time.sleep(DELAY)
        send({"jsonrpc": "2.0", "id": req["id"], "result": {
            "protocolVersion": req["params"].get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "files", "version": "0"},
        }})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": req["id"], "result": {"tools": [TOOL]}})
    elif method == "tools/call":
        args = req["params"].get("arguments") or {}
        with open(os.path.join(ROOT, ".started"), "a") as f:
            f.write(json.dumps(args) + "\n")
        while os.path.exists(os.path.join(ROOT, ".hold")):
            time.sleep(0.02)
        name = os.path.basename(str(args.get("path", "")))
        if not name or name.startswith("."):
            text, error = "bad path", True
        else:
            with open(os.path.join(ROOT, name), "w") as f:
                f.write(str(args.get("content", "")))
            with open(os.path.join(ROOT, ".calls"), "a") as f:
                f.write(json.dumps(args) + "\n")
            text, error = "wrote " + name, False
        send({"jsonrpc": "2.0", "id": req["id"], "result": {
            "content": [{"type": "text", "text": text}], "isError": error}})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": req["id"], "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": req["id"], "error": {"code": -32601, "message": "no such method"}})

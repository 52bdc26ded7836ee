"""A deliberately bad MCP server speaking raw JSON-RPC over stdio (no SDK).

usage: bad_server.py MODE [MARKER_FILE]

Every mode completes the handshake and lists one tool, `work`, except
`garbage-handshake`. On `tools/call`:
  crash-once   exits mid-call the first time (creates MARKER_FILE), answers afterwards
  crash        always exits mid-call
  hang         never answers
  malformed    writes a line that is not JSON, then a response whose result is not an object
  huge         answers with ~4 MB of text
  slow         answers after 1.5 seconds
  oversized    answers with one line of ~17 MiB (over the 16 MiB message cap)
  garbage-handshake  answers everything with a non-JSON line
On `tools/list`:
  list-hang      never answers
  endless-pages  answers every page with one more tool and a nextCursor, forever
  list-oversized answers with one line of ~17 MiB
On `initialize`:
  stderr-exit    writes a Python-style traceback on stderr and exits with status 1
"""
import json
import os
import sys
import time

MODE = sys.argv[1]
MARKER = sys.argv[2] if len(sys.argv) > 2 else None


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def result(req, res):
    send({"jsonrpc": "2.0", "id": req["id"], "result": res})


for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    req = json.loads(line)
    method = req.get("method")
    if "id" not in req:
        continue  # a notification
    if MODE == "garbage-handshake":
        sys.stdout.write("this is not json-rpc\n")
        sys.stdout.flush()
        continue
    if method == "initialize" and MODE == "stderr-exit":
        sys.stderr.write("Traceback (most recent call last):\nRuntimeError: DATABASE_URL is not set\n")
        sys.stderr.flush()
        sys.exit(1)
    if method == "initialize":
        result(req, {
            "protocolVersion": req["params"].get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "bad", "version": "0"},
        })
    elif method == "tools/list" and MODE == "list-hang":
        continue
    elif method == "tools/list" and MODE == "list-oversized":
        result(req, {"tools": [{
            "name": "work",
            "description": "d" * (17 * 1024 * 1024),
            "inputSchema": {"type": "object", "properties": {}},
        }]})
    elif method == "tools/list" and MODE == "endless-pages":
        page = int((req.get("params") or {}).get("cursor") or 0)
        result(req, {"tools": [{
            "name": f"work{page}",
            "description": "Does some work.",
            "inputSchema": {"type": "object", "properties": {}},
        }], "nextCursor": str(page + 1)})
    elif method == "tools/list":
        result(req, {"tools": [{
            "name": "work",
            "description": "Does some work.",
            "inputSchema": {"type": "object", "properties": {}},
        }]})
    elif method == "tools/call":
        if MODE == "crash" or (MODE == "crash-once" and not os.path.exists(MARKER)):
            if MARKER:
                open(MARKER, "w").close()
            os._exit(3)
        if MODE == "hang":
            continue
        if MODE == "slow":
            time.sleep(1.5)
        if MODE == "malformed":
            sys.stdout.write("{this is not json\n")
            sys.stdout.flush()
            result(req, "not an object")
            continue
        if MODE == "oversized":
            result(req, {"content": [{"type": "text", "text": "x" * (17 * 1024 * 1024)}]})
            continue
        if MODE == "huge":
            result(req, {"content": [{"type": "text", "text": "x" * (4 * 1024 * 1024)}]})
            continue
        result(req, {"content": [{"type": "text", "text": "worked"}]})
    elif method == "ping":
        result(req, {})
    else:
        send({"jsonrpc": "2.0", "id": req["id"], "error": {"code": -32601, "message": "no such method"}})

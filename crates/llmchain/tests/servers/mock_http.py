"""What the scripted cloud servers beside this file share: reading a request body (chunked
or not), a quiet HTTP/1.1 handler with TCP_NODELAY, the request log, and serving on a
free port until the parent process dies."""

import json
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def read_body(handler):
    if handler.headers.get("transfer-encoding", "").lower() == "chunked":
        out = b""
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip(), 16)
            if size == 0:
                while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return out
            out += handler.rfile.read(size)
            handler.rfile.readline()
    return handler.rfile.read(int(handler.headers.get("content-length") or 0))


class QuietHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 (keep-alive), no access log on stderr, no Nagle delay."""

    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class RequestLog:
    """One JSON line per request in the file at `log_path`, under `self.lock`."""

    def __init__(self, log_path):
        self.log_path = log_path
        self.lock = threading.Lock()

    def log(self, entry):
        with self.lock, open(self.log_path, "a") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()


def make_server(handler, state):
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    server.state = state
    return server


def serve_until_parent_dies(server):
    """Prints `listening http://127.0.0.1:PORT` and serves until killed or orphaned."""

    def exit_with_parent():
        parent = os.getppid()
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=exit_with_parent, daemon=True).start()
    print("listening http://127.0.0.1:%d" % server.server_address[1], flush=True)
    server.serve_forever()

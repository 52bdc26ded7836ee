"""A local OTLP/HTTP receiver for the opentelemetry example: accepts every POST (the
exporter's `/v1/traces` and `/v1/metrics`), answers 200 with an empty protobuf
response, and appends `POST <path> <bytes> <content-type>` to LOG for each.

usage: otlp_sink.py LOG

Prints `listening http://127.0.0.1:PORT` when ready; exits with its parent.
"""
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG = sys.argv[1]


class Sink(BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(n)
        with open(LOG, "a") as f:
            f.write(f"POST {self.path} {n} {self.headers.get('Content-Type')}\n")
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def exit_with_parent():
    parent = os.getppid()
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)


server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
print(f"listening http://127.0.0.1:{server.server_port}", flush=True)
threading.Thread(target=exit_with_parent, daemon=True).start()
server.serve_forever()

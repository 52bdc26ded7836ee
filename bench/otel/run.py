#!/usr/bin/env python3
"""OpenTelemetry overhead on the path users run (issue 37): `llmchain run` doing one
whole turn whose model streams a tool call of 1 MiB of arguments in 8-byte fragments
(as crates/llmchain/benches/turn.rs), the tool answering, then a short text; measured as
the process's CPU time (user + system, from the kernel's accounting of children),
interleaved, in three modes:

  off      no OTEL_* variable: nothing installed
  export   OTEL_EXPORTER_OTLP_ENDPOINT to a local OTLP/HTTP receiver (spans and metrics)
  content  the same with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true

`llmchain run` is one process per turn, so its figures include the exporter's fixed
cost (the SDK, a thread, an HTTP client, the flush at exit). A worker is one process for
many turns: `worker --drain` over RUNS queued runs of the same turn gives the cost per
turn in a long-lived process (what `worker` and `serve` pay).

usage: bench/otel/run.py [ROUNDS] [RUNS]   (cargo build --release -p llmchain-cli first)
"""
import http.server, json, os, resource, statistics, subprocess, sys, tempfile, threading

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "target", "release", "llmchain")
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 15
RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 20
MIB = 1 << 20


def sse(obj):
    return "data: " + json.dumps(obj, separators=(",", ":")) + "\n\n"


def chunk(delta, finish=None):
    return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def tool_call_body():
    # {"path": "xxxx…"} of 1 MiB, streamed 8 bytes at a time.
    args = '{"path":"' + "x" * (MIB - 12) + '"}'
    out = [sse(chunk({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                                         "function": {"name": "read_file", "arguments": ""}}]}))]
    for i in range(0, len(args), 8):
        out.append(sse(chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[i:i + 8]}}]})))
    out.append(sse(chunk({}, "tool_calls")))
    out.append("data: [DONE]\n\n")
    return "".join(out).encode()


def text_body():
    return (sse(chunk({"role": "assistant", "content": "Done."})) + sse(chunk({}, "stop")) + "data: [DONE]\n\n").encode()


BODIES = [tool_call_body(), text_body()]


class Model(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get("content-length", 0))
        request = json.loads(self.rfile.read(n))
        last = request["messages"][-1]["role"]
        body = BODIES[1] if last == "tool" else BODIES[0]
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


class Otlp(http.server.BaseHTTPRequestHandler):
    received = 0

    def do_POST(self):
        n = int(self.headers.get("content-length", 0))
        self.rfile.read(n)
        Otlp.received += 1
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


def serve(handler):
    s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{s.server_address[1]}"


def main():
    model, otlp = serve(Model), serve(Otlp)
    home = tempfile.mkdtemp()
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LLMCHAIN_", "OPENAI_"))}
    base_env.update(XDG_DATA_HOME=home, XDG_CONFIG_HOME=home)
    modes = {
        "off": {},
        "export": {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp},
        "content": {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"},
    }
    cpu = {m: [] for m in modes}
    for r in range(ROUNDS + 1):
        for mode, extra in modes.items():
            env = dict(base_env, **extra)
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            out = subprocess.run([BIN, "run", "--base-url", model + "/v1", "--model", "m", "--db",
                                  "sqlite://" + os.path.join(home, "b.db"), "read it"],
                                 env=env, cwd=home, capture_output=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if out.returncode != 0:
                sys.exit(f"{mode}: {out.stderr.decode()}")
            if r > 0:  # the first round warms the page cache
                cpu[mode].append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    off = statistics.median(cpu["off"])
    print(f"llmchain run, one turn with a 1 MiB tool call, {ROUNDS} rounds interleaved (process CPU, median):")
    for mode in modes:
        med = statistics.median(cpu[mode])
        print(f"  {mode:8} {med * 1000:7.1f} ms  ({(med / off - 1) * 100:+.1f}% against off; "
              f"min {min(cpu[mode]) * 1000:.1f}, max {max(cpu[mode]) * 1000:.1f})")
    print(f"  OTLP requests received: {Otlp.received}")

    # A worker: one process, RUNS turns.
    os.makedirs(os.path.join(home, "llmchain"), exist_ok=True)
    with open(os.path.join(home, "llmchain", "config.toml"), "w") as f:
        f.write(f'base_url = "{model}/v1"\nmodel = "m"\n')
    per_turn = {m: [] for m in ("off", "export")}
    for r in range(max(3, ROUNDS // 3)):
        for mode in per_turn:
            env = dict(base_env, **modes[mode])
            db = "sqlite://" + os.path.join(home, f"w{r}{mode}.db")
            for _ in range(RUNS):
                subprocess.run([BIN, "run", "--enqueue", "--db", db, "read it"], env=dict(base_env), cwd=home,
                               capture_output=True, check=True)
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            out = subprocess.run([BIN, "worker", "--db", db, "--drain", "--poll-ms", "20", "--concurrency", "1"],
                                 env=env, cwd=home, capture_output=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if out.returncode != 0 or f"{RUNS} done" not in out.stderr.decode():
                sys.exit(f"worker {mode}: {out.stderr.decode()}")
            per_turn[mode].append(((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) / RUNS)
    off = statistics.median(per_turn["off"])
    print(f"llmchain worker --drain, {RUNS} such turns in one process (CPU per turn, median of {len(per_turn['off'])}):")
    for mode, v in per_turn.items():
        med = statistics.median(v)
        print(f"  {mode:8} {med * 1000:7.2f} ms  ({(med / off - 1) * 100:+.1f}% against off; "
              f"min {min(v) * 1000:.2f}, max {max(v) * 1000:.2f})")


if __name__ == "__main__":
    main()

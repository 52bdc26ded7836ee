"""A local stand-in for OpenAI's Chat Completions API, for running the examples without
a key: `.ci/examples` points OPENAI_BASE_URL at it.

usage: mock_openai.py SCRIPT.json

SCRIPT.json is a list of turns, answered in order, one per POST /v1/chat/completions:

    {"text": "..."}                                          an answer
    {"tool_call": {"id": "call_1", "name": "f", "arguments": "{...}"}}   a call

or, for many conversations at once (the workers example), `{"weather": true}`: a request
whose last message is the user's ("... in Paris?") gets a call of `get_weather` with
that city, one whose last message is a tool result gets "It is <result>.".

Each is streamed as OpenAI streams (`stream: true`: SSE chunks, arguments in 16-byte
fragments, usage, `[DONE]`) or answered whole (`stream: false`). A request without a
bearer key, or past the last turn, is an error as OpenAI words it. Prints
`listening http://127.0.0.1:PORT/v1` when ready; exits with its parent.
"""
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def chunk(delta, finish=None):
    c = {"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0,
         "model": "mock", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return "data: " + json.dumps(c) + "\n\n"


def stream(turn):
    out = [chunk({"role": "assistant", "content": ""})]
    if "text" in turn:
        text = turn["text"]
        for i in range(0, len(text), 16):
            out.append(chunk({"content": text[i:i + 16]}))
        finish = "stop"
    else:
        call = turn["tool_call"]
        out.append(chunk({"tool_calls": [{"index": 0, "id": call["id"], "type": "function",
                                          "function": {"name": call["name"], "arguments": ""}}]}))
        args = call["arguments"]
        for i in range(0, len(args), 16):
            out.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[i:i + 16]}}]}))
        finish = "tool_calls"
    out.append(chunk({}, finish))
    usage = {"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0,
             "model": "mock", "choices": [],
             "usage": {"prompt_tokens": 20, "completion_tokens": 8, "total_tokens": 28}}
    out.append("data: " + json.dumps(usage) + "\n\n")
    out.append("data: [DONE]\n\n")
    return "".join(out)


def whole(turn):
    message = {"role": "assistant", "content": turn.get("text")}
    finish = "stop"
    if "tool_call" in turn:
        call = turn["tool_call"]
        message["tool_calls"] = [{"id": call["id"], "type": "function",
                                  "function": {"name": call["name"], "arguments": call["arguments"]}}]
        finish = "tool_calls"
    return json.dumps({"id": "chatcmpl-mock", "object": "chat.completion", "created": 0,
                       "model": "mock", "choices": [{"index": 0, "message": message,
                                                     "finish_reason": finish}],
                       "usage": {"prompt_tokens": 20, "completion_tokens": 8, "total_tokens": 28}})


def weather_turn(messages):
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return {"text": "It is %s." % str(last.get("content", "")).strip()}
    text = last.get("content", "")
    if isinstance(text, list):
        text = " ".join(p.get("text", "") for p in text if isinstance(p, dict))
    city = text.rstrip("?. ").split(" ")[-1]
    return {"tool_call": {"id": "call_1", "name": "get_weather",
                          "arguments": json.dumps({"city": city})}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, body, kind="application/json"):
        data = body.encode()
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        if not self.headers.get("authorization", "").startswith("Bearer "):
            return self.send(401, json.dumps({"error": {"message": "Missing bearer key",
                                                        "type": "invalid_request_error"}}))
        if not self.path.endswith("/chat/completions"):
            return self.send(404, json.dumps({"error": {"message": "no route " + self.path}}))
        if isinstance(self.server.turns, dict):
            turn = weather_turn(body.get("messages") or [])
        else:
            with self.server.lock:
                turn = self.server.turns.pop(0) if self.server.turns else None
        if turn is None:
            return self.send(500, json.dumps({"error": {"message": "the mock has no turn left"}}))
        if body.get("stream"):
            self.send(200, stream(turn), "text/event-stream")
        else:
            self.send(200, whole(turn))


def main():
    with open(sys.argv[1]) as f:
        turns = json.load(f)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.turns = turns
    server.lock = threading.Lock()
    print("listening http://127.0.0.1:%d/v1" % server.server_address[1], flush=True)
    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()

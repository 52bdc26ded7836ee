#!/usr/bin/env python3
"""Writes the benchmark inputs into data/ once; every implementation reads the same bytes.

A_<S>.sse   one tool call whose arguments are S bytes, in 8-byte deltas (OpenAI Chat SSE)
B.sse       64 calls of 16 KiB arguments each, deltas interleaved round-robin
C.json      a 2,000-message conversation (500 rounds: user, assistant with 2 calls,
            2 tool results) as neutral JSON each implementation converts to its own types
D.sse       the response the local server (d-server) streams for workload D: a realistic
            OpenAI Chat completion (full chunk envelope, `logprobs`, a usage chunk) with a
            text reply in word deltas, then one 64 KiB tool call in 8-byte deltas
O_<S>.sse   A_<S> as OpenAI's current API sends it by default: every chunk also closes
            with `"usage":null` and a random `"obfuscation"` string
            (`stream_options.include_obfuscation`); for llmchain's `a-ratio` checks
expect.json the argument strings' lengths, for each implementation to check its result
"""
import json, os, random, string, sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
SIZES = [1 << 10, 64 << 10, 1 << 20, 8 << 20]
DELTA = 8


def args_of(size, seed):
    # A JSON object of exactly `size` bytes: {"content":"xxxx..."}; ASCII with no
    # escapes, so every 8-byte slice is a valid JSON string fragment.
    head, tail = '{"content":"', '"}'
    body_len = size - len(head) - len(tail)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    body = "".join(alphabet[(i * 7 + seed) % len(alphabet)] for i in range(body_len))
    return head + body + tail


def chunk(delta, finish=None):
    c = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1,
         "model": "gpt-bench", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return "data: " + json.dumps(c, separators=(",", ":")) + "\n\n"


def open_call(index):
    return {"index": index, "id": f"call_{index:04d}", "type": "function",
            "function": {"name": "write_file", "arguments": ""}}


def arg_delta(index, piece):
    return {"index": index, "function": {"arguments": piece}}


def stream(calls):
    """calls: list of argument strings; deltas interleaved round-robin."""
    out = [chunk({"role": "assistant", "content": None,
                  "tool_calls": [open_call(i) for i in range(len(calls))]})]
    pieces = [[a[j:j + DELTA] for j in range(0, len(a), DELTA)] for a in calls]
    longest = max(len(p) for p in pieces)
    for j in range(longest):
        for i, p in enumerate(pieces):
            if j < len(p):
                out.append(chunk({"tool_calls": [arg_delta(i, p[j])]}))
    out.append(chunk({}, "tool_calls"))
    out.append("data: [DONE]\n\n")
    return "".join(out).encode()


D_ARGS = 64 << 10
D_TEXT = ("I'll write the generated module to disk now; it holds the lookup table "
          "you asked for, one entry per line, so it is long. ") * 4


def d_stream():
    """Workload D: what api.openai.com sends for a streamed completion with a text reply
    and one tool call (stream_options.include_usage on)."""
    def ev(delta, finish=None):
        c = {"id": "chatcmpl-AhxL2pQzS1n0RYkQ3Xf2TgW8vUu4", "object": "chat.completion.chunk",
             "created": 1734611820, "model": "gpt-4o-2024-08-06",
             "system_fingerprint": "fp_d28bcae782",
             "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
        return "data: " + json.dumps(c, separators=(",", ":")) + "\n\n"
    out = [ev({"role": "assistant", "content": "", "refusal": None})]
    words = D_TEXT.split(" ")
    for k, w in enumerate(words):
        out.append(ev({"content": w if k == 0 else " " + w}))
    call = {"index": 0, "id": "call_c91SqDXlYFuETYv8mUHzz6pp", "type": "function",
            "function": {"name": "write_file", "arguments": ""}}
    out.append(ev({"tool_calls": [call]}))
    args = args_of(D_ARGS, 3)
    for j in range(0, len(args), DELTA):
        out.append(ev({"tool_calls": [arg_delta(0, args[j:j + DELTA])]}))
    out.append(ev({}, "tool_calls"))
    usage = {"id": "chatcmpl-AhxL2pQzS1n0RYkQ3Xf2TgW8vUu4", "object": "chat.completion.chunk",
             "created": 1734611820, "model": "gpt-4o-2024-08-06",
             "system_fingerprint": "fp_d28bcae782", "choices": [],
             "usage": {"prompt_tokens": 412, "completion_tokens": 16410, "total_tokens": 16822}}
    out.append("data: " + json.dumps(usage, separators=(",", ":")) + "\n\n")
    out.append("data: [DONE]\n\n")
    return "".join(out).encode(), len(D_TEXT)


def conversation():
    rounds = []
    for r in range(500):
        calls = [{"id": f"call_{r}_{k}", "name": "read_file",
                  "arguments": {"path": f"src/module_{r}_{k}.rs", "max_bytes": 4096}}
                 for k in range(2)]
        results = [{"id": c["id"], "name": c["name"],
                    "content": f"// contents of {c['arguments']['path']}\n" + "fn f() {}\n" * 8}
                   for c in calls]
        rounds.append({"user": f"Round {r}: read the next two modules and summarise them.",
                       "calls": calls, "results": results})
    return {"system": "You are a careful coding assistant.", "rounds": rounds}


def obfuscate(body):
    """Adds a null `usage` and a random `obfuscation` string (0-15 letters and digits,
    seeded) to every chunk of an OpenAI Chat SSE body."""
    rng = random.Random(7)
    letters = string.ascii_letters + string.digits
    out = []
    for ev in body.decode().split("\n\n"):
        if ev.startswith("data: {"):
            junk = "".join(rng.choice(letters) for _ in range(rng.randint(0, 15)))
            ev = ev[:-1] + ',"usage":null,"obfuscation":"' + junk + '"}'
        out.append(ev)
    return "\n\n".join(out).encode()


def main():
    os.makedirs(DATA, exist_ok=True)
    expect = {}
    for s in SIZES:
        path = os.path.join(DATA, f"A_{s}.sse")
        if not os.path.exists(path):
            with open(path, "wb") as f:
                f.write(stream([args_of(s, 0)]))
        expect[f"A_{s}"] = [s]
        path = os.path.join(DATA, f"O_{s}.sse")
        if not os.path.exists(path):
            with open(path, "wb") as f:
                f.write(obfuscate(stream([args_of(s, 0)])))
    b = [args_of(16 << 10, i) for i in range(64)]
    path = os.path.join(DATA, "B.sse")
    if not os.path.exists(path):
        with open(path, "wb") as f:
            f.write(stream(b))
    expect["B"] = [len(a) for a in b]
    body, text_len = d_stream()
    with open(os.path.join(DATA, "D.sse"), "wb") as f:
        f.write(body)
    expect["D"] = {"arguments": [D_ARGS], "text": text_len}
    with open(os.path.join(DATA, "C.json"), "w") as f:
        json.dump(conversation(), f)
    with open(os.path.join(DATA, "expect.json"), "w") as f:
        json.dump(expect, f)


if __name__ == "__main__":
    sys.exit(main())

"""LangChain (langchain-core + langchain-openai) on the peer workloads, on its real path:
`ChatOpenAI(streaming=True)` whose httpx transport replays the workload bytes in 64 KiB
chunks. `invoke` goes through the openai SDK's SSE parser, `_convert_chunk_to_generation_chunk`
and `generate_from_stream` (`AIMessageChunk` `+` accumulation, whose `tool_call_chunks`
are re-parsed with `parse_partial_json` on every merge). C times `_get_request_payload`
(the message conversion) plus `json.dumps` of the body.
D: `ChatOpenAI(base_url=…, streaming=True).bind_tools([write_file]).invoke(…)` over its
real httpx client against the local d-server, until the AIMessage has the parsed tool call:
argv: data_dir D base_url.
Prints one JSON line per workload. argv: data_dir [max_A_size]."""
import json, os, signal, sys, time

import httpx
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_openai import ChatOpenAI

CHUNK = 64 * 1024


def model_for(body):
    def handler(request):
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              stream=_Iter(body))
    client = httpx.Client(transport=httpx.MockTransport(handler))
    return ChatOpenAI(model="gpt-bench", api_key="sk-bench", base_url="http://127.0.0.1:9/v1",
                      streaming=True, http_client=client, max_retries=0)


class _Iter(httpx.SyncByteStream):
    def __init__(self, body):
        self.body = body

    def __iter__(self):
        for i in range(0, len(self.body), CHUNK):
            yield self.body[i:i + CHUNK]


LIMIT = 60


class Timeout(BaseException):  # not Exception: library code must not swallow it
    pass


def _alarm(signum, frame):
    raise Timeout()


def timeit(f, budget=2.0, max_iters=20):
    """Median of up to max_iters runs within `budget` s; None when one run exceeds LIMIT s."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(LIMIT)
    try:
        r = _timeit(f, budget, max_iters)
    except Timeout:
        return None
    finally:
        signal.alarm(0)
    return r


def _timeit(f, budget, max_iters):
    samples, start = [], time.perf_counter()
    while len(samples) < max_iters and (not samples or time.perf_counter() - start < budget):
        t = time.perf_counter()
        f()
        samples.append(time.perf_counter() - t)
    samples.sort()
    return samples[len(samples) // 2], len(samples)


def workload_d(data, base_url):
    """D: a real streamed request to the local server; wall and process CPU per request."""
    want = json.load(open(os.path.join(data, "expect.json")))["D"]
    llm = ChatOpenAI(model="gpt-4o-2024-08-06", api_key="sk-bench", base_url=base_url,
                     streaming=True, max_retries=0)
    tool = {"type": "function", "function": {
        "name": "write_file", "description": "Writes a file",
        "parameters": {"type": "object", "properties": {"content": {"type": "string"}},
                       "required": ["content"]}}}
    llm = llm.bind_tools([tool])
    cpu = []

    def once():
        c = time.process_time()
        msg = llm.invoke("Write the lookup table module.")
        lens = [len(json.dumps(k["args"], separators=(",", ":"))) for k in msg.tool_calls]
        assert lens == want["arguments"], lens
        assert len(msg.text) == want["text"], len(msg.text)
        cpu.append(time.process_time() - c)

    r = timeit(once, max_iters=20)
    if r is None:
        report("D", None)
    else:
        cpu.sort()
        print(json.dumps({"impl": "langchain", "workload": "D", "seconds": r[0],
                          "cpu_seconds": cpu[len(cpu) // 2], "iters": r[1]}), flush=True)


def report(workload, r):
    if r is None:
        print(json.dumps({"impl": "langchain", "workload": workload, "timeout": LIMIT}), flush=True)
    else:
        print(json.dumps({"impl": "langchain", "workload": workload, "seconds": r[0], "iters": r[1]}), flush=True)


def decode(llm, expect):
    msg = llm.invoke("go")
    lens = [len(json.dumps(c["args"], separators=(",", ":"))) for c in msg.tool_calls]
    assert lens == expect, (lens[:3], expect[:3])


def conversation(c):
    msgs = [SystemMessage(c["system"])]
    for r in c["rounds"]:
        msgs.append(HumanMessage(r["user"]))
        msgs.append(AIMessage("", tool_calls=[{"id": k["id"], "name": k["name"], "args": k["arguments"]} for k in r["calls"]]))
        for res in r["results"]:
            msgs.append(ToolMessage(res["content"], tool_call_id=res["id"], name=res["name"]))
    return msgs


def main():
    data = sys.argv[1]
    if len(sys.argv) > 3 and sys.argv[2] == "D":
        workload_d(data, sys.argv[3])
        return
    max_size = int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 62
    expect = json.load(open(os.path.join(data, "expect.json")))
    timed_out = False
    for size in [1 << 10, 64 << 10, 1 << 20, 8 << 20]:
        if size > max_size or timed_out:
            print(json.dumps({"impl": "langchain", "workload": f"A_{size}", "skipped": "a smaller size exceeded the limit" if timed_out else "max size"}), flush=True)
            continue
        body = open(os.path.join(data, f"A_{size}.sse"), "rb").read()
        llm = model_for(body)
        r = timeit(lambda: decode(llm, [size]), max_iters=20 if size < (1 << 10) else 3)
        timed_out = r is None
        report(f"A_{size}", r)
    if True:
        body = open(os.path.join(data, "B.sse"), "rb").read()
        llm = model_for(body)
        report("B", timeit(lambda: decode(llm, expect["B"]), max_iters=3))
    c = json.load(open(os.path.join(data, "C.json")))
    msgs = conversation(c)
    llm = model_for(b"")
    n = len(llm._get_request_payload(msgs)["messages"])
    assert n >= 2000, n
    report("C", timeit(lambda: json.dumps(llm._get_request_payload(msgs)).encode()))


if __name__ == "__main__":
    main()

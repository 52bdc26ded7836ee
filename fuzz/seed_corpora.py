#!/usr/bin/env python3
"""Seeds every fuzz target's corpus from the test fixtures.

    python3 fuzz/seed_corpora.py        # from the repository root or anywhere

Copies the provider bodies in crates/llmchain/tests/fixtures/<format>/ (SSE, NDJSON and
JSON) into the corpora of the stream and framing targets, the error bodies among them
(with hostile headers) into the HTTP error target, and the ```json examples of
docs/storage-format.md (the storage-format fixtures, checked by
tests/message_storage_doc.rs) into the storage, CLI and argument targets. Each seed gets
the leading control byte its target reads (cut point, chunk size or format). Seeds are
named seed-<source>, so re-running overwrites them and leaves what the fuzzer found alone.
Corpora live in <fuzz dir>/corpus/<target>/, where `cargo fuzz run` looks by default.
"""
import json
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "crates/llmchain/tests/fixtures"
FORMATS = ["openai_chat", "openai_responses", "anthropic", "gemini", "ollama"]


def fixtures(fmt, *exts):
    return sorted(p for p in (FIXTURES / fmt).iterdir() if p.suffix.lstrip(".") in exts)


def bedrock_frames(chunks_text):
    """AWS event-stream frames for the AI SDK's one-decoded-frame-per-line fixtures."""
    import json
    import struct
    import zlib

    out = bytearray()
    for i, line in enumerate(l for l in chunks_text.splitlines() if l.strip()):
        (kind, payload), = json.loads(line).items()
        payload["p"] = "abcdefghij"[: i % 10 + 1]
        exception = kind.endswith("Exception")
        headers = bytearray()
        for name, value in (
            (":exception-type" if exception else ":event-type", kind),
            (":content-type", "application/json"),
            (":message-type", "exception" if exception else "event"),
        ):
            headers += bytes([len(name)]) + name.encode() + b"\x07"
            headers += struct.pack(">H", len(value)) + value.encode()
        body = json.dumps(payload, separators=(",", ":")).encode()
        prelude = struct.pack(">II", 16 + len(headers) + len(body), len(headers))
        frame = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers + body
        out += frame + struct.pack(">I", zlib.crc32(frame))
    return bytes(out)


def doc_blocks():
    """The ```json blocks of docs/storage-format.md as (name, kind, bytes)."""
    text = (ROOT / "docs/storage-format.md").read_text()
    out = []
    for n, m in enumerate(re.finditer(r"^```json([^\n]*)\n(.*?)^```", text, re.M | re.S)):
        kind = (m.group(1).split() or ["json"])[0]
        out.append((f"doc{n:02}-{kind}", kind, m.group(2).encode()))
    return out


def fragments(body, size=29):
    """`fuzz/fuzz_targets/common.rs` records: a length byte, then that many bytes."""
    out = bytearray()
    for i in range(0, len(body), size):
        piece = body[i : i + size]
        out.append(len(piece))
        out += piece
    return bytes(out)


def main():
    corpora = {}  # (fuzz dir, target) -> {name: bytes}

    def add(fuzz_dir, target, name, data):
        corpora.setdefault((fuzz_dir, target), {})[f"seed-{name}"] = data

    all_sse = []
    for fmt in FORMATS:
        bodies = fixtures(fmt, "sse", "ndjson", "json")
        for p in bodies:
            name = f"{fmt}-{p.name}"
            body = p.read_bytes()
            if p.suffix == ".sse":
                all_sse.append((name, body))
            # decode_body: the first byte picks the format (mod 5) and a chunk size.
            fmt_byte = FORMATS.index(fmt) + 5 * 7
            add("fuzz", "decode_body", name, bytes([fmt_byte]) + body)
            if fmt in ("openai_chat", "openai_responses") and p.suffix == ".sse":
                # The first byte is a cut point.
                add("fuzz", f"{fmt}_stream", p.name, bytes([len(body) // 2 % 256]) + body)
            elif fmt in ("anthropic", "gemini", "ollama"):
                # The first byte picks a chunk size.
                add("fuzz", f"{fmt}_stream", p.name, b"\x06" + body)
            if p.suffix == ".ndjson":
                add("fuzz", "ndjson_framing", p.name, b"\x05" + body)
            if p.suffix == ".json":
                add("fuzz", "complete_and_map", name, body)
                add("fuzz", "preview", name, fragments(body))
    # Bedrock: the AI SDK's decoded frames, framed again (AWS event-stream bytes).
    bedrock = FIXTURES / "bedrock_converse"
    for p in sorted(bedrock.glob("*.chunks.txt")):
        body = bedrock_frames(p.read_text())
        add("fuzz", "bedrock_stream", p.name, b"\x06" + body)
        fmt_byte = 5 + 6 * 7
        add("fuzz", "decode_body", f"bedrock-{p.name}", bytes([fmt_byte]) + body)
    for p in sorted((bedrock / "eventstream").glob("*")):
        if not p.name.startswith("LICENSE"):
            add("fuzz", "bedrock_stream", f"aws-{p.name}", b"\x05" + p.read_bytes())
    for name, body in all_sse:
        add("fuzz", "sse_framing", name, bytes([len(body) // 3 % 256]) + body)
    for name, kind, body in doc_blocks():
        add("fuzz", "storage_load", name, body)
        add("fuzz", "cli_encode", name, body)
        if kind in ("tool_call", "tool_result", "content_part", "tool_definition"):
            add("fuzz", "complete_and_map", name, body)
        add("fuzz", "preview", name, fragments(body))

    # http_errors: two status bytes, header lines (`0`..`3` stand for retry-after,
    # retry-after-ms and two rate-limit headers), an empty line, the body.
    error_bodies = [p for fmt in FORMATS for p in fixtures(fmt, "json") if "error" in p.name]
    headers = [
        b"0: 7\n",
        b"1: 1e300\n",
        b"0: Wed, 21 Oct 2015 07:28:00 GMT\n",
        b"2: 1m30s\n3: 2026-12-04T06:00:00Z\nx-request-id: req_1\n",
        b"0: -1\n1: NaN\n",
    ]
    for i, p in enumerate(error_bodies):
        for j, h in enumerate(headers):
            status = (429 - 100, 529 - 100, 401 - 100)[(i + j) % 3]
            add("fuzz", "http_errors", f"{p.parent.name}-{p.name}-{j}",
                status.to_bytes(2, "big") + h + b"\n" + p.read_bytes())
    add("fuzz", "http_errors", "html", (502 - 100).to_bytes(2, "big") + b"\n<html><body>Bad gateway</body></html>")

    # schema_rewrites: a chain of definitions each referencing the next twice (as JSON),
    # and generator inputs (first byte: how many definitions).
    defs = {f"L{i}": {"type": "object", "properties": {"a": {"$ref": f"#/$defs/L{i + 1}"},
                                                        "b": {"$ref": f"#/$defs/L{i + 1}"}}}
            for i in range(24)}
    defs["L24"] = {"type": "string"}
    doubling = {"type": "object", "properties": {"root": {"$ref": "#/$defs/L0"}}, "$defs": defs}
    add("fuzz", "schema_rewrites", "doubling", json.dumps(doubling).encode())
    add("fuzz", "schema_rewrites", "generated-refs", bytes([7]) + bytes(range(1, 200)))
    add("fuzz", "schema_rewrites", "generated-objects", bytes([15]) + bytes([3, 1, 1, 8, 5, 4, 6, 7] * 20))

    for (fuzz_dir, target), seeds in sorted(corpora.items()):
        d = ROOT / fuzz_dir / "corpus" / target
        d.mkdir(parents=True, exist_ok=True)
        for name, data in seeds.items():
            (d / name).write_bytes(data)
        print(f"{fuzz_dir}/corpus/{target}: {len(seeds)} seeds")


if __name__ == "__main__":
    main()

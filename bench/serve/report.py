"""Prints the serve benchmark's table from results/serve.jsonl."""
import json
import sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {(r["server"], r["phase"]): r for r in rows}
servers = [s for s in ("llmchain", "llmchain-normal", "aisdk", "pydantic") if any(k[0] == s for k in by)]
print()
print("| server | CPU s / 1,000 chats | chats/s (16 at a time) | added latency per chunk p50 / p99 (10 ms pace, 20 at a time) | 1,000 streams at once: peak RSS | p99 latency then | failed |")
print("|---|---|---|---|---|---|---|")
for s in servers:
    c, l, m = by.get((s, "cpu"), {}), by.get((s, "latency"), {}), by.get((s, "memory"), {})
    failed = sum(r.get("failed", 0) for r in (c, l, m))
    print(
        f"| {s} | {c.get('cpu_s_per_1000_chats', 0):.2f} | {c.get('chats_per_s', 0):.0f} | "
        f"{l.get('added_latency_us_p50', 0) / 1000:.2f} / {l.get('added_latency_us_p99', 0) / 1000:.2f} ms | "
        f"{m.get('peak_rss_mb', 0):.0f} MB | {m.get('added_latency_us_p99', 0) / 1000:.1f} ms | {failed} |"
    )
for ours in ("llmchain", "llmchain-normal"):
    base = by.get((ours, "cpu"), {}).get("cpu_s_per_1000_chats")
    for s in servers:
        other = by.get((s, "cpu"), {}).get("cpu_s_per_1000_chats")
        if not s.startswith("llmchain") and base and other:
            print(f"\n{s} uses {other / base:.1f}x the CPU of {ours} per chat")

#!/usr/bin/env python3
"""Reads results/*.jsonl, prints a table (seconds per workload, llmchain's speed-up over
each peer) and writes results/table.md and results/plot.svg (cost against size for A)."""
import glob, json, math, os, sys

d = sys.argv[1] if len(sys.argv) > 1 else "results"
rows = {}
for path in glob.glob(os.path.join(d, "*.jsonl")):
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            r = json.loads(line)
            rows[(r["impl"], r["workload"])] = r
            if "cpu_seconds" in r and r["workload"] == "D":
                rows[(r["impl"], r["workload"] + "_cpu")] = {"seconds": r["cpu_seconds"]}
            elif "cpu_seconds" in r:  # llmchain and floor on A-C: their own CPU time too
                rows[(r["impl"] + "_cpu", r["workload"])] = {"seconds": r["cpu_seconds"]}
            elif "timeout" in r and r["workload"] == "D":
                rows[(r["impl"], "D_cpu")] = r

impls = [i for i in ["llmchain", "llmchain_cpu", "floor", "floor_cpu", "rig", "aisdk", "langchain"]
         if any(k[0] == i for k in rows)]
workloads = ["A_1024", "A_65536", "A_1048576", "A_8388608", "B", "C", "D", "D_cpu"]
names = {"A_1024": "A 1 KiB", "A_65536": "A 64 KiB", "A_1048576": "A 1 MiB", "A_8388608": "A 8 MiB",
         "B": "B 64×16 KiB", "C": "C encode 2,000 msgs", "D": "D local server, wall",
         "D_cpu": "D local server, client CPU"}


def cell(impl, w):
    r = rows.get((impl, w))
    if r is None:
        return "–"
    if "seconds" in r:
        s = r["seconds"]
        return f"{s * 1e3:.3f} ms" if s < 1 else f"{s:.2f} s"
    if "timeout" in r:
        return f"> {r['timeout']} s"
    return "skipped"


def ratio(impl, w):
    """Peer time / llmchain time (llmchain's speed-up); for the floor, llmchain / floor."""
    a, b = rows.get(("llmchain", w)), rows.get((impl, w))
    if impl == "llmchain_cpu":
        return ""
    if impl == "floor":
        a, b = b, a
    if impl == "floor_cpu":
        a, b = b, rows.get(("llmchain_cpu", w))
    if not a or "seconds" not in a or not b:
        return ""
    if "seconds" in b:
        return f"{b['seconds'] / a['seconds']:.0f}×" if b["seconds"] / a["seconds"] >= 10 else f"{b['seconds'] / a['seconds']:.2f}×"
    if "timeout" in b:
        return f"> {b['timeout'] / a['seconds']:.0f}×"
    return ""


ratio_impls = [i for i in impls if i not in ("llmchain", "llmchain_cpu")]
ratio_name = {"floor": "llmchain/floor", "floor_cpu": "llmchain/floor (CPU)"}
header = ["workload"] + impls + [ratio_name.get(i, f"{i}/llmchain") for i in ratio_impls]
lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
for w in workloads:
    lines.append("| " + " | ".join([names[w]] + [cell(i, w) for i in impls] +
                                   [ratio(i, w) for i in ratio_impls]) + " |")
table = "\n".join(lines)
print(table)
open(os.path.join(d, "table.md"), "w").write(table + "\n")

# SVG: log-log seconds against argument size for workload A.
W, H, L, B, T, R = 640, 420, 70, 50, 30, 140
sizes = [1 << 10, 64 << 10, 1 << 20, 8 << 20]
pts = {i: [(s, rows[(i, f"A_{s}")]["seconds"]) for s in sizes
           if "seconds" in rows.get((i, f"A_{s}"), {})] for i in impls if not i.endswith("_cpu")}
ys = [t for p in pts.values() for _, t in p] or [1e-6, 1]
y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
y1 = max(y1, y0 + 1)
x0, x1 = math.log2(sizes[0]), math.log2(sizes[-1])
X = lambda s: L + (math.log2(s) - x0) / (x1 - x0) * (W - L - R)
Y = lambda t: H - B - (math.log10(t) - y0) / (y1 - y0) * (H - B - T)
colors = {"llmchain": "#d62728", "floor": "#7f7f7f", "rig": "#ff7f0e", "aisdk": "#1f77b4", "langchain": "#2ca02c"}
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
       f'<rect width="{W}" height="{H}" fill="white"/>',
       f'<text x="{L}" y="18" font-size="14">Workload A: one tool call, 8-byte deltas (log-log; median seconds)</text>']
for e in range(y0, y1 + 1):
    y = Y(10 ** e)
    svg.append(f'<line x1="{L}" y1="{y:.1f}" x2="{W - R}" y2="{y:.1f}" stroke="#ddd"/>')
    svg.append(f'<text x="{L - 6}" y="{y + 4:.1f}" text-anchor="end">1e{e}</text>')
for s, label in zip(sizes, ["1 KiB", "64 KiB", "1 MiB", "8 MiB"]):
    x = X(s)
    svg.append(f'<line x1="{x:.1f}" y1="{T}" x2="{x:.1f}" y2="{H - B}" stroke="#eee"/>')
    svg.append(f'<text x="{x:.1f}" y="{H - B + 16}" text-anchor="middle">{label}</text>')
svg.append(f'<text x="{(L + W - R) / 2}" y="{H - 10}" text-anchor="middle">argument bytes S</text>')
for k, (i, p) in enumerate(pts.items()):
    c = colors.get(i, "black")
    if p:
        svg.append('<polyline fill="none" stroke-width="2" stroke="%s" points="%s"/>' % (
            c, " ".join(f"{X(s):.1f},{Y(t):.1f}" for s, t in p)))
        for s, t in p:
            svg.append(f'<circle cx="{X(s):.1f}" cy="{Y(t):.1f}" r="3" fill="{c}"/>')
    ly = T + 20 + 18 * k
    svg.append(f'<rect x="{W - R + 10}" y="{ly - 9}" width="12" height="3" fill="{c}"/>')
    svg.append(f'<text x="{W - R + 28}" y="{ly - 4}">{i}</text>')
svg.append("</svg>")
open(os.path.join(d, "plot.svg"), "w").write("\n".join(svg) + "\n")
print(f"wrote {d}/table.md and {d}/plot.svg")

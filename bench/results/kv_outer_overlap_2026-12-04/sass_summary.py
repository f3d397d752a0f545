"""Summarize Nsight Compute SASS exports (ncu --page source --csv --print-source sass, gzipped) of one wgmma tile
launch: instructions per (tile, warp) by opcode, stall samples by reason and by opcode, and the hottest instructions.
A (tile, warp) is counted by the executions of the tile's first HGMMA of O = P V (the .tnspB one that starts from
zero). Usage: python3 sass_summary.py FILE.csv.gz..."""
import collections
import csv
import gzip
import sys


def summarize(path):
    rows = list(csv.reader(gzip.open(path, "rt")))
    head, body = rows[1], rows[2:]
    src, executed = head.index("Source"), head.index("Instructions Executed")
    samples = head.index("Warp Stall Sampling (All Samples)")
    reasons = [h for h in head if h.startswith("stall_") and "Not Issued" not in h]
    value = lambda r, i: float(r[i].replace(",", "") or 0)
    opcode = lambda r: next((w for w in r[src].split() if not w.startswith("@")), "?")
    tiles = max(value(r, executed) for r in body if "HGMMA" in r[src] and "tnspB" in r[src] and "RZ" in r[src])
    mix, stalled = collections.Counter(), collections.Counter()
    by_reason = collections.Counter()
    for r in body:
        mix[opcode(r).split(".")[0]] += value(r, executed) / tiles
        stalled[opcode(r).split(".")[0]] += value(r, samples)
        for x in reasons:
            by_reason[x[len("stall_"):]] += value(r, head.index(x))
    total = sum(by_reason.values())
    print(f"== {path}: {sum(mix.values()):.0f} instructions per (tile, warp), {total:.0f} stall samples")
    print("  instructions per (tile, warp):", ", ".join(f"{k} {v:.0f}" for k, v in mix.most_common(16)))
    print("  samples by reason (%):", ", ".join(f"{k} {100 * v / total:.1f}" for k, v in by_reason.most_common(8)))
    print("  samples by opcode (%):", ", ".join(f"{k} {100 * v / total:.1f}" for k, v in stalled.most_common(10)))
    for r in sorted(body, key=lambda r: -value(r, samples))[:6]:
        top = max(reasons, key=lambda x: value(r, head.index(x)))
        print(f"  {100 * value(r, samples) / total:4.1f}% {r[src].strip()[:64]:64s} ({top[len('stall_'):]})")


for path in sys.argv[1:]:
    summarize(path)

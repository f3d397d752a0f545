"""Summarize Nsight Compute SASS exports of one kernel launch (ncu --section SourceCounters, then
ncu --import REPORT --page source --csv --print-source sass; plain or gzipped): instructions per unit of work by
opcode, stall samples by reason and by opcode, and the hottest instructions. The unit is counted by the executions
of the most executed instruction matching --unit (default: the first wgmma of O = P V in the attention tiles, the
.tnspB one that starts from zero, so the unit is one (tile, warp)). Where the kernel's roles (warp-specialized
warps) or phases sit in address ranges, --window BYTES adds the samples and instructions per unit of each window of
that many bytes of code (offsets from the kernel's first instruction), and --region NAME=START-END (hex offsets,
repeatable) the same for named ranges.
Usage: python3 scripts/device/sass_summary.py [--unit REGEX] [--window HEX] [--region NAME=START-END]... FILE..."""
import argparse
import collections
import csv
import gzip
import re


def summarize(path, unit, window=0, regions=()):
    rows = list(csv.reader((gzip.open if path.endswith(".gz") else open)(path, "rt")))
    head, body = rows[1], rows[2:]
    src, executed = head.index("Source"), head.index("Instructions Executed")
    samples = head.index("Warp Stall Sampling (All Samples)")
    reasons = {h[len("stall_"):]: i for i, h in enumerate(head) if h.startswith("stall_") and "Not Issued" not in h}
    value = lambda r, i: float(r[i].replace(",", "") or 0)
    opcode = lambda r: next((w for w in r[src].split() if not w.startswith("@")), "?")
    units = [value(r, executed) for r in body if re.search(unit, r[src])]
    if not units:
        raise SystemExit(f"{path}: no instruction matches --unit {unit!r}")
    tiles = max(units)
    mix, stalled = collections.Counter(), collections.Counter()
    by_reason = collections.Counter()
    for r in body:
        mix[opcode(r).split(".")[0]] += value(r, executed) / tiles
        stalled[opcode(r).split(".")[0]] += value(r, samples)
        for reason, column in reasons.items():
            by_reason[reason] += value(r, column)
    total = sum(by_reason.values())
    print(f"== {path}: {sum(mix.values()):.0f} instructions per unit, {total:.0f} stall samples")
    print("  instructions per unit:", ", ".join(f"{k} {v:.0f}" for k, v in mix.most_common(16)))
    print("  samples by reason (%):", ", ".join(f"{k} {100 * v / total:.1f}" for k, v in by_reason.most_common(8)))
    print("  samples by opcode (%):", ", ".join(f"{k} {100 * v / total:.1f}" for k, v in stalled.most_common(10)))
    for r in sorted(body, key=lambda r: -value(r, samples))[:6]:
        top = max(reasons, key=lambda reason: value(r, reasons[reason]))
        print(f"  {100 * value(r, samples) / total:4.1f}% {r[src].strip()[:64]:64s} ({top})")
    first = int(body[0][0], 16)
    offset = lambda r: int(r[0], 16) - first

    def show_range(name, start, end, least_share=0.0):  # [start, end) of code, where it holds instructions
        inside = [r for r in body if start <= offset(r) < end]
        share = sum(value(r, samples) for r in inside) / total
        if not inside or share < least_share:
            return
        ops = collections.Counter()
        for r in inside:
            ops[opcode(r).split(".")[0]] += value(r, executed) / tiles
        print(f"  {name:16s} {100 * share:5.1f}% of samples, {sum(ops.values()):6.0f} instructions per unit:",
              ", ".join(f"{k} {v:.0f}" for k, v in ops.most_common(4)))

    for start in range(0, offset(body[-1]) + 1, window) if window else []:  # windows under 0.3% left out
        show_range(f"{start:#x}-{start + window:#x}", start, start + window, least_share=0.003)
    for name, start, end in regions:
        show_range(name, start, end)


def region(text):
    """NAME=START-END (hex offsets from the kernel's first instruction, END excluded) -> (NAME, START, END)."""
    match = re.fullmatch(r"([^=]+)=(?:0x)?([0-9a-fA-F]+)-(?:0x)?([0-9a-fA-F]+)", text)
    if not match:
        raise argparse.ArgumentTypeError(f"--region {text!r}: must be NAME=START-END in hex")
    return match[1], int(match[2], 16), int(match[3], 16)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--unit", default=r"HGMMA.*tnspB.*RZ", help="regex of the instruction that counts the unit")
    p.add_argument("--window", type=lambda x: int(x, 16), default=0, help="bytes of code per window (hex)")
    p.add_argument("--region", action="append", default=[], type=region, help="NAME=START-END, hex offsets")
    p.add_argument("files", nargs="+")
    args = p.parse_args()
    for path in args.files:
        summarize(path, args.unit, args.window, args.region)


if __name__ == "__main__":
    main()

"""The main branch on honest inputs, one device run: the bf16 GEMM ceiling measured first, then bench/gpu_bench's
prefill at each length with the main branch on each selection of bench/selections.h (random: the lower bound;
overlap50, overlap90; last: MiniMax's "last 16 blocks"; pages: MiniMax's shared pages, the upper bound) and on the
pipeline's own selection (indexer) of i.i.d. and of structured index inputs (bench/structured_index.h: lowrank,
clustered). Each row prints the selection's mean union of 4 and 8
consecutive queries' rows, the main branch's median time, and its useful FLOPs (4 Hq D sum |S_t|, SPEC section 6)
as a share of the GEMM ceiling. gpu_bench checks every row of the selection and that no output stays poisoned.

Usage: python3 bench/gpu_selection_bench.py --bin BUILD/bench/gpu_bench --out DIR [--prefill 131072] [--reps 5]
         [--plan attend=kvouter-wgmma]
Writes DIR/gpu_selection_bench_<date>.json and .md and prints the markdown."""
import argparse
import datetime
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_bench import ceilings, ints, ours  # noqa: E402  (the same ceilings and driver call as the main benchmark)

# (selection, index inputs): the generators of bench/selections.h, and the indexer's own selection on i.i.d. and on
# structured index inputs (bench/structured_index.h).
SELECTIONS = [("indexer", "random"), ("indexer", "lowrank"), ("indexer", "clustered"), ("random", "random"),
              ("overlap50", "random"), ("overlap90", "random"), ("last", "random"), ("pages", "random")]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--prefill", default="131072")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--plan", default="", help="plan keys for gpu_bench (comma-separated key=value)")
    p.add_argument("--commit", default=os.environ.get("COMMIT", "unknown"))
    args = p.parse_args()
    ceiling = ceilings()
    print(f"bf16 GEMM ceiling {ceiling['gemm_bf16_tflops']:.1f} TFLOP/s", flush=True)
    plan = [key for key in args.plan.split(",") if key]
    rows = []
    for n in ints(args.prefill):
        for selection, index_inputs in SELECTIONS:
            name = selection if selection != "indexer" else f"indexer on {index_inputs} index inputs"
            r = ours(args.bin, "prefill", n, args.reps, f"selection={selection}", f"index_inputs={index_inputs}", *plan)
            if "error" in r:
                rows.append(dict(n=n, selection=name, error=r["error"]))
                print(f"{n} {name}: {r['error']}", flush=True)
                continue
            r["n"] = n
            r["selection"] = name
            r["main_share_of_gemm"] = r["main_flops"] / (r["main_ms"] * 1e-3) / (ceiling["gemm_bf16_tflops"] * 1e12)
            rows.append(r)
            print(f"{n} {name}: union4 {r['union4']:.1f} main {r['main_ms']:.2f} ms "
                  f"{100 * r['main_share_of_gemm']:.1f}% of GEMM, checks {r['checks_passed']}", flush=True)
    date = datetime.date.today().isoformat()
    result = dict(date=date, commit=args.commit, ceilings=ceiling, rows=rows)
    stem = os.path.join(args.out, f"gpu_selection_bench_{date}")
    with open(stem + ".json", "w") as f:
        json.dump(result, f, indent=1)
    lines = [f"# Main branch by selection, M3 prefill (bf16; Hq 64, Hkv 4, D 128, Bk 128, top_k 16)", "",
             f"commit {args.commit}; bf16 GEMM ceiling {ceiling['gemm_bf16_tflops']:.1f} TFLOP/s measured in this "
             f"run; median of {args.reps} repetitions; plan {rows[0].get('plan', '?') if rows else '?'}", "",
             "| N | selection | mean union, 4 queries | 8 queries | main ms | % of GEMM | checks |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['n']} | {r['selection']} | | | | | error: {r['error'][:80]} |")
            continue
        lines.append(f"| {r['n']} | {r['selection']} | {r['union4']:.1f} | {r['union8']:.1f} | {r['main_ms']:.2f} | "
                     f"{100 * r['main_share_of_gemm']:.1f} | {'pass' if r['checks_passed'] else 'FAIL'} |")
    table = "\n".join(lines) + "\n"
    with open(stem + ".md", "w") as f:
        f.write(table)
    print(table)
    return 0 if all(r.get("checks_passed") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

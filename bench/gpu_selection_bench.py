"""The main branch on honest inputs, one device run: the bf16 GEMM ceiling measured first, then bench/gpu_bench's
prefill at each length with the main branch on each selection of bench/selections.h (random: the lower bound;
overlap50, overlap90; last: MiniMax's "last 16 blocks"; pages: MiniMax's shared pages, the upper bound) and on the
pipeline's own selection (indexer) of i.i.d. and of structured index inputs (bench/structured_index.h: lowrank,
clustered), under each main-branch plan asked for (--plans; e.g. kv-outer-wgmma = path K, union-tile = path U, routed =
both by the device planner). Each row prints the selection's mean union of 4 and 8 consecutive queries' rows, the main
branch's median time (out and lse written as bf16 and fp32 unless a plan asks out=fp64), and its useful
FLOPs (4 Hq D sum |S_t|, SPEC section 6) as a share of the GEMM ceiling. With
--sdpa, torch SDPA's dense causal prefill is timed at each length in the same run, and each row also gets the whole
prefill: the index branch and top-k of that plan's indexer row (i.i.d. inputs) plus the row's main branch, against
SDPA. gpu_bench checks every row of the selection and that no output stays poisoned.

Usage: python3 bench/gpu_selection_bench.py --bin BUILD/bench/gpu_bench --out DIR [--prefill 131072] [--reps 5]
         [--plans "attend=kv-outer-wgmma;attend=union-tile"] [--selections random,overlap90] [--sdpa] [--tag T]
Writes DIR/gpu_selection_bench_<date>[_T].json and .md and prints the markdown."""
import argparse
import datetime
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_bench import ceilings, ints, ours, sdpa_prefill, write_report  # noqa: E402  (the main benchmark's ceilings, peer, driver)

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
    p.add_argument("--plans", default="", help="';'-separated plans, each comma-separated key=value for gpu_bench")
    p.add_argument("--selections", default="", help="comma-separated selection names (default: all)")
    p.add_argument("--sdpa", action="store_true", help="time torch SDPA's dense prefill at each length")
    p.add_argument("--tag", default="")
    p.add_argument("--commit", default=os.environ.get("COMMIT", "unknown"))
    args = p.parse_args()
    ceiling = ceilings()
    print(f"bf16 GEMM ceiling {ceiling['gemm_bf16_tflops']:.1f} TFLOP/s", flush=True)
    plans = [plan for plan in args.plans.split(";") if plan] or [""]
    wanted = [name for name in args.selections.split(",") if name]
    selections = [(s, i) for s, i in SELECTIONS if not wanted or s in wanted or f"{s}:{i}" in wanted]
    rows, sdpa_ms = [], {}
    for n in ints(args.prefill):
        if args.sdpa:
            sdpa_ms[n] = sdpa_prefill(n)
            print(f"{n} torch SDPA dense causal prefill {sdpa_ms[n]:.2f} ms", flush=True)
        for plan in plans:
            indexer = None
            for selection, index_inputs in selections:
                name = selection if selection != "indexer" else f"indexer on {index_inputs} index inputs"
                r = ours(args.bin, "prefill", n, args.reps, f"selection={selection}", f"index_inputs={index_inputs}",
                         *[key for key in plan.split(",") if key])
                if "error" in r:
                    rows.append(dict(n=n, selection=name, requested=plan, error=r["error"]))
                    print(f"{n} {name} {plan}: {r['error']}", flush=True)
                    continue
                r.update(n=n, selection=name, requested=plan)
                r["main_share_of_gemm"] = r["main_flops"] / (r["main_ms"] * 1e-3) / (ceiling["gemm_bf16_tflops"] * 1e12)
                if (selection, index_inputs) == ("indexer", "random"):
                    indexer = r
                if indexer is not None and n in sdpa_ms:
                    r["prefill_ms"] = indexer["index_ms"] + indexer["topk_ms"] + r["main_ms"]
                    r["sdpa_ms"] = sdpa_ms[n]
                    r["speedup_vs_sdpa"] = sdpa_ms[n] / r["prefill_ms"]
                rows.append(r)
                print(f"{n} {name} {r['plan']}: union4 {r['union4']:.1f} main {r['main_ms']:.2f} ms "
                      f"{100 * r['main_share_of_gemm']:.1f}% of GEMM, checks {r['checks_passed']}", flush=True)
    date = datetime.date.today().isoformat()
    result = dict(date=date, commit=args.commit, ceilings=ceiling, sdpa_ms=sdpa_ms, rows=rows)
    stem = os.path.join(args.out, f"gpu_selection_bench_{date}" + (f"_{args.tag}" if args.tag else ""))
    lines = [f"# Main branch by selection and plan, M3 prefill (bf16; Hq 64, Hkv 4, D 128, Bk 128, top_k 16)", "",
             f"commit {args.commit}; bf16 GEMM ceiling {ceiling['gemm_bf16_tflops']:.1f} TFLOP/s measured in this "
             f"run; median of {args.reps} repetitions"
             + "".join(f"; torch SDPA dense causal prefill {ms:.2f} ms at {n}" for n, ms in sdpa_ms.items()), "",
             "| N | selection | attend | out, lse | mean union, 4 queries | 8 queries | main ms | % of GEMM | prefill ms "
             "| vs SDPA | checks |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['n']} | {r['selection']} | {r['requested']} | | | | | | | | error: {r['error'][:80]} |")
            continue
        attend = r["plan"].split("attend=")[-1]
        written = "bf16, fp32" if r.get("out_format") == "bf16" else "fp64, fp64"
        prefill = f"{r['prefill_ms']:.2f} | {r['speedup_vs_sdpa']:.1f}x" if "prefill_ms" in r else " | "
        lines.append(f"| {r['n']} | {r['selection']} | {attend} | {written} | {r['union4']:.1f} | {r['union8']:.1f} | "
                     f"{r['main_ms']:.2f} | {100 * r['main_share_of_gemm']:.1f} | {prefill} | "
                     f"{'pass' if r['checks_passed'] else 'FAIL'} |")
    return write_report(stem, result, lines)


if __name__ == "__main__":
    sys.exit(main())

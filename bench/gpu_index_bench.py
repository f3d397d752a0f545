"""The index branch (block maxima) of two or more gpu_bench builds side by side, one device run: the bf16 GEMM and
copy ceilings measured first, then each build's prefill at each length and decode at each KV, the builds interleaved
in every round so that clocks and heat treat them alike. Prefill rows give the index kernel's FLOPs (Hkv Di N(N+1),
gpu_bench's index_flops) per second as a share of the GEMM ceiling; decode rows the index time alone. The top-k time
and the index branch's whole (index + top-k, per run, then the median) stand beside it: a build or plan that moves work
between the two (topk=running ranks inside the index kernel) is judged by the sum. gpu_bench checks
every selection row of every run (checks: passed only when every run of the row did). The index branch decides the
selection and so the outputs: "outputs" says whether a build's out and lse (gpu_bench's outputs_digest, every run)
have the first build's bits on the same case.

Usage: python3 bench/gpu_index_bench.py --bins LABEL=PATH,LABEL=PATH --out DIR
         [--prefill 32768,131072] [--decode 262144,1048576] [--rounds 3] [--reps 3] [--tag T]
Writes DIR/gpu_index_bench_<date>[_T].json and .md and prints the markdown."""
import argparse
import datetime
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_bench import ceilings, ints, ours, write_report  # noqa: E402  (the main benchmark's helpers)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bins", required=True, help="comma-separated LABEL=PATH")
    p.add_argument("--out", required=True)
    p.add_argument("--prefill", default="32768,131072")
    p.add_argument("--decode", default="262144,1048576")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--tag", default="")
    p.add_argument("--commit", default=os.environ.get("COMMIT", "unknown"))
    args = p.parse_args()
    bins = [entry.split("=", 1) for entry in args.bins.split(",") if entry]
    ceiling = ceilings()
    gemm = ceiling["gemm_bf16_tflops"]
    print(f"bf16 GEMM ceiling {gemm:.1f} TFLOP/s, copy {ceiling['copy_gbps']:.0f} GB/s", flush=True)
    cases = [("prefill", n) for n in ints(args.prefill)] + [("decode", n) for n in ints(args.decode)]
    runs = {(mode, n, label): [] for mode, n in cases for label, _ in bins}
    for round_index in range(args.rounds):
        for mode, n in cases:
            for label, path in bins:
                r = ours(path, mode, n, args.reps)
                runs[(mode, n, label)].append(r)
                print(f"round {round_index + 1} {mode} {n} {label}: "
                      f"{r.get('error') or '%.4f ms index' % r['index_ms']}", flush=True)
    rows = []
    first_build = bins[0][0]
    for (mode, n, label), results in runs.items():
        good = [r for r in results if "error" not in r]
        row = dict(mode=mode, n=n, build=label, runs=len(results), checks_passed=len(good) == len(results) and
                   all(r["checks_passed"] for r in good))
        if good:
            row["index_ms"] = statistics.median(r["index_ms"] for r in good)
            row["index_ms_all"] = [r["index_ms"] for r in good]
            row["topk_ms"] = statistics.median(r["topk_ms"] for r in good)
            row["branch_ms"] = statistics.median(r["index_ms"] + r["topk_ms"] for r in good)
            row["plan"] = good[0]["plan"]
            row["outputs_digests"] = sorted({r.get("outputs_digest", "") for r in good})
            if mode == "prefill":
                row["index_share_of_gemm"] = good[0]["index_flops"] / (row["index_ms"] * 1e-3) / (gemm * 1e12)
        else:
            row["error"] = results[0]["error"]
        rows.append(row)
    date = datetime.date.today().isoformat()
    stem = os.path.join(args.out, f"gpu_index_bench_{date}" + (f"_{args.tag}" if args.tag else ""))
    result = dict(date=date, commit=args.commit, ceilings=ceiling, builds=dict(bins), rows=rows)
    lines = ["# Index branch (block maxima) by build, M3 shapes (bf16; Hidx 4, Di 128, Bk 128), random inputs", "",
             f"commit {args.commit}; bf16 GEMM ceiling {gemm:.1f} TFLOP/s and copy {ceiling['copy_gbps']:.0f} GB/s "
             f"measured in this run; each row the median of {args.rounds} rounds (each the median of {args.reps} "
             "repetitions), the builds interleaved in every round", "",
             "| mode | N or KV | build | index ms | every round | % of GEMM | top-k ms | index + top-k ms | outputs "
             "| checks |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    digests = {(r["mode"], r["n"], r["build"]): r.get("outputs_digests") for r in rows}
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['mode']} | {r['n']} | {r['build']} | | | | | | | error: {r['error'][:80]} |")
            continue
        share = f"{100 * r['index_share_of_gemm']:.1f}" if "index_share_of_gemm" in r else ""
        every = ", ".join(f"{ms:.4f}" for ms in r["index_ms_all"])
        first = digests.get((r["mode"], r["n"], first_build))
        if "" in r["outputs_digests"] or (first and "" in first):
            outputs = "not compared (a build without outputs_digest)"
        elif len(r["outputs_digests"]) != 1:
            outputs = "runs differ: " + ", ".join(r["outputs_digests"])
        elif r["build"] == first_build:
            outputs = r["outputs_digests"][0]
        else:
            outputs = f"same bits as {first_build}" if r["outputs_digests"] == first else "BITS DIFFER"
        lines.append(f"| {r['mode']} | {r['n']} | {r['build']} | {r['index_ms']:.4f} | {every} | {share} | "
                     f"{r['topk_ms']:.4f} | {r['branch_ms']:.4f} | {outputs} | "
                     f"{'passed' if r['checks_passed'] else 'FAILED'} |")
    return write_report(stem, result, lines)


if __name__ == "__main__":
    sys.exit(main())

"""The decode step under several main-branch plans, one device run: the copy ceiling measured first, then
bench/gpu_bench's decode at each shape under each plan asked for (--plans; e.g. attend=kv-outer-wgmma, attend=split-k).
Each row: the index branch, the top-k and the main branch timed alone (CUDA events), the main branch and the whole step
(index, top-k, main) each captured as one CUDA graph and replayed, one replay at a time (launch latency included), one
at a time after an L2 flush ("cold": inputs read from memory, as in a model whose other layers evict this one's) and
20 in a row (the device's time per step when the host runs ahead, as a decode loop does), and the bytes a decode step
must read (index keys, queries, K and V of the selected blocks) against the copy ceiling at the back-to-back step time. gpu_bench checks every row
of the selection and that no output stays poisoned after the repetitions (which reuse one workspace).

Usage: python3 bench/gpu_decode_bench.py --bin BUILD/bench/gpu_bench --out DIR
         [--shapes 1x1x4096,1x1x65536,...] [--plans "auto;attend=kv-outer-wgmma;attend=split-k"] [--reps 20] [--tag T]
Shapes are BATCHxQ_LENxKV. A plan "auto" (or an empty entry) is the planner's own choice; without --plans, auto alone.
Writes DIR/gpu_decode_bench_<date>[_T].json and .md and prints the markdown."""
import argparse
import datetime
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_bench import ceilings, ours, write_report  # noqa: E402  (the main benchmark's helpers)

SHAPES = "1x1x4096,1x1x65536,1x1x262144,1x1x1048576,128x1x4096,128x1x32768,8x16x65536"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--shapes", default=SHAPES)
    p.add_argument("--plans", default="auto",
                   help="';'-separated plans, each comma-separated key=value for gpu_bench, or auto")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--tag", default="")
    p.add_argument("--commit", default=os.environ.get("COMMIT", "unknown"))
    args = p.parse_args()
    copy = ceilings()["copy_gbps"]
    print(f"copy ceiling {copy:.0f} GB/s", flush=True)
    plans = ["" if plan.strip() in ("", "auto") else plan.strip() for plan in args.plans.split(";")]
    rows = []
    for shape in [s for s in args.shapes.split(",") if s]:
        batch, q_len, kv = (int(x) for x in shape.split("x"))
        for plan in plans:
            r = ours(args.bin, "decode", kv, args.reps, f"batch={batch}", f"q_len={q_len}",
                     *[key for key in plan.split(",") if key])
            r.update(shape=shape, requested=plan)
            if "error" not in r and r.get("step_graph_ms", 0) > 0:
                r["step_share_of_copy"] = r["decode_bytes"] / (r["step_stream_ms"] * 1e-3) / (copy * 1e9)
            rows.append(r)
            print(f"{shape} {plan}: {r.get('error') or r['plan']} step graph {r.get('step_graph_ms', 0) * 1e3:.1f} us, "
                  f"cold {r.get('step_cold_ms', 0) * 1e3:.1f} us, back to back {r.get('step_stream_ms', 0) * 1e3:.1f} us",
                  flush=True)
    date = datetime.date.today().isoformat()
    stem = os.path.join(args.out, f"gpu_decode_bench_{date}" + (f"_{args.tag}" if args.tag else ""))
    result = dict(date=date, commit=args.commit, copy_gbps=copy, rows=rows)
    formats = ", ".join(sorted({r["out_format"] for r in rows if "out_format" in r})) or "-"
    lines = ["# Decode step by main-branch plan, M3 shapes (bf16; Hq 64, Hkv 4, D 128, Bk 128, top_k 16)", "",
             f"commit {args.commit}; copy ceiling {copy:.0f} GB/s measured in this run; median of {args.reps} "
             "repetitions; times in microseconds; out and lse written as "
             f"{formats} (bf16: bf16 out, fp32 lse)", "",
             "| batch x q_len x KV | plan | index | top-k | main | main graph | step graph | main graph, cold | "
             "step graph, cold | main graph, back to back | step graph, back to back | MB read | "
             "% copy (step, back to back) | checks |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['shape']} | {r['requested']} | | | | | | | | | | | | error: {r['error'][:80]} |")
            continue
        us = [f"{r[key] * 1e3:.1f}" for key in ("index_ms", "topk_ms", "main_ms", "main_graph_ms", "step_graph_ms",
                                                "main_cold_ms", "step_cold_ms", "main_stream_ms", "step_stream_ms")]
        share = f"{100 * r['step_share_of_copy']:.1f}" if "step_share_of_copy" in r else "-"
        lines.append(f"| {r['shape']} | {r['plan']} | {' | '.join(us)} | "
                     f"{r['decode_bytes'] / 1e6:.1f} | {share} | {'pass' if r['checks_passed'] else 'FAIL'} |")
    return write_report(stem, result, lines)


if __name__ == "__main__":
    sys.exit(main())

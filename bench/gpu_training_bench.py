"""The training benchmark's device run: the gpu backend's bf16 backward (bench/gpu_training_bench) against torch SDPA's
dense causal GQA backward on M3 shapes (Hq 64, Hkv 4, D 128, bf16), in the same run, with the forward speed-up of the
same run beside it (ours: bench/gpu_bench prefill; SDPA's forward) for the issue's target: the backward faster than
dense by at least half the forward's speed-up ratio. The bf16 GEMM ceiling is measured too (bench/gpu_bench.py).
Our selection is i.i.d. random (the worst case for locality); SDPA's backward is torch.autograd.grad of its output.

Usage: python3 bench/gpu_training_bench.py --bin BUILD/bench --out DIR [--lengths 32768,131072] [--commit ID]
Writes DIR/gpu_training_bench_<date>.json and .md and prints the markdown."""
import argparse
import datetime
import json
import os
import subprocess
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_bench  # noqa: E402  (its timing helper, ceilings, SDPA forward and our forward's driver)

HQ, HKV, D = gpu_bench.HQ, gpu_bench.HKV, gpu_bench.D


def sdpa_backward(n):
    """Median ms of SDPA's dense causal GQA backward (dq, dk, dv) at length n, its forward done once."""
    q = torch.randn(1, HQ, n, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(1, HKV, n, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(1, HKV, n, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    dout = torch.randn_like(out)
    ms = gpu_bench.bench(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True), warm=1, rep=3)
    del q, k, v, out, dout
    torch.cuda.empty_cache()
    return ms


def ours_backward(binary, n, reps):
    proc = subprocess.run([binary, str(n), str(reps)], capture_output=True, text=True, timeout=500)
    if proc.returncode != 0 and not proc.stdout.strip():
        return {"error": proc.stderr.strip()[-300:]}
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["checks_passed"] = proc.returncode == 0
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", required=True, help="the folder holding gpu_training_bench and gpu_bench")
    p.add_argument("--out", required=True)
    p.add_argument("--lengths", default="32768,131072")
    p.add_argument("--commit", default=os.environ.get("COMMIT", "unknown"))
    args = p.parse_args()
    log = lambda *a: print(*a, file=sys.stderr, flush=True)  # noqa: E731
    res = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "commit": args.commit, "device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "shapes": {"hq": HQ, "hkv": HKV, "d": D, "bk": 128, "top_k": 16, "dtype": "bf16"},
           "selection": "iid random", "ceilings": gpu_bench.ceilings(), "rows": []}
    gemm = res["ceilings"]["gemm_bf16_tflops"]
    for n in gpu_bench.ints(args.lengths):
        row = {"n": n, "ours_backward": ours_backward(os.path.join(args.bin, "gpu_training_bench"), n, 3)}
        log("ours backward", n, row["ours_backward"])
        row["ours_forward"] = gpu_bench.ours(os.path.join(args.bin, "gpu_bench"), "prefill", n, 3)
        log("ours forward", n, row["ours_forward"])
        for name, fn in (("sdpa_backward_ms", sdpa_backward), ("sdpa_forward_ms", gpu_bench.sdpa_prefill)):
            try:
                row[name] = fn(n)
            except Exception as e:  # noqa: BLE001 (report what failed, keep going)
                row[name.replace("_ms", "_error")] = f"{type(e).__name__}: {str(e)[:200]}"
            log(name, n, row.get(name))
        back, fwd = row["ours_backward"], row["ours_forward"]
        if "backward_ms" in back:
            row["backward_tflops"] = back["backward_flops"] / back["backward_ms"] / 1e9
            row["backward_frac_gemm"] = row["backward_tflops"] / gemm
            if "sdpa_backward_ms" in row:
                row["backward_speedup"] = row["sdpa_backward_ms"] / back["backward_ms"]
        if "total_ms" in fwd and "sdpa_forward_ms" in row:
            row["forward_speedup"] = row["sdpa_forward_ms"] / fwd["total_ms"]
        if "backward_speedup" in row and "forward_speedup" in row:
            row["target_met"] = row["backward_speedup"] >= 0.5 * row["forward_speedup"]
        res["rows"].append(row)

    f = lambda x, spec=".2f": "-" if x is None else format(x, spec)  # noqa: E731
    md = [f"# gpu training benchmark: the bf16 backward vs torch SDPA's dense backward on one {res['device']}", "",
          f"commit {res['commit']}, torch {res['torch']}, {res['date']}; M3 shapes (Hq 64, Hkv 4, D 128, Bk 128, "
          f"top_k 16, bf16), one causal prefill, our selection i.i.d. random. bf16 GEMM ceiling "
          f"{gemm:.0f} TFLOP/s (measured in this run).", "",
          "| N | ours backward ms | TFLOP/s (% GEMM) | SDPA backward ms | x SDPA | forward x SDPA (same run) | "
          "target: backward x SDPA >= forward x SDPA / 2 | checks |",
          "|---|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        b = r["ours_backward"]
        met = {True: "met", False: "**missed**", None: "-"}[r.get("target_met")]
        md.append(f"| {r['n']} | {f(b.get('backward_ms'))} | {f(r.get('backward_tflops'), '.1f')} "
                  f"({f(r.get('backward_frac_gemm', 0) * 100, '.0f')}%) | {f(r.get('sdpa_backward_ms'))} | "
                  f"{f(r.get('backward_speedup'))} | {f(r.get('forward_speedup'))} | {met} | "
                  f"{'ok' if b.get('checks_passed') else b.get('error', 'FAILED')} |")
    md += ["", "Useful FLOPs of the backward: 2.5x the forward main branch's (4*Hq*D*sum|S_t|). Ours times the kernels "
           "of gpu/training (BackwardOnDevice, CUDA events, median of 3 after a warm-up); SDPA's backward is "
           "torch.autograd.grad of its output (median of 3). checks: dq, dk, dv finite after poisoning."]
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, "gpu_training_bench_" + res["date"][:10])
    with open(stem + ".json", "w") as fh:
        json.dump(res, fh, indent=1)
    with open(stem + ".md", "w") as fh:
        fh.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()

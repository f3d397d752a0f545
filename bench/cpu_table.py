#!/usr/bin/env python3
"""Turns the JSON of bench/cpu_bench (Google Benchmark) into a markdown table.

Usage: bench/cpu_table.py RESULTS.json [--commit SHA] > RESULTS.md
Every ratio is between numbers measured in the same run: branch FLOP/s against the FMA peak, the fp32 mode
against the Eigen dense peer (compared with Eq. 12's FLOP ratio), exact mode against the fp32 mode; the backward's
FLOP/s (2.5x the forward main branch's) against the FMA peak, its exact mode against its fp32 mode. A run of part of
the benchmarks (--benchmark_filter) gives the tables of what it ran; the FMA peak is always needed.
"""
import argparse
import json
import sys

# One M3 GQA group (bench/cpu_bench.cc): the Eq. 12 ratio is the full layer's.
HQ, HKV, D, DI, BK, TOP_K = 16, 1, 128, 128, 128, 16


def eq12_ratio(n):
    """SPEC section 6: dense 2*Hq*D*N^2 over MSA Hkv*Di*N^2 + 4*Hq*D*N*k*Bk."""
    return (2 * HQ * D * n * n) / (HKV * DI * n * n + 4 * HQ * D * n * TOP_K * BK)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results")
    parser.add_argument("--commit", default="unknown")
    args = parser.parse_args()
    with open(args.results) as f:
        data = json.load(f)
    runs = {}
    for b in data["benchmarks"]:
        if b.get("error_occurred"):
            sys.exit(f"cpu_table: {b['name']} failed: {b.get('error_message')}")
        runs[b["run_name"]] = b

    def find(prefix):
        for name, b in runs.items():
            if name.startswith(prefix):
                return b
        sys.exit(f"cpu_table: no benchmark {prefix} in {args.results}")

    def ms(b):
        assert b["time_unit"] == "ms"
        return b["real_time"]

    ctx = data["context"]
    threads = int(ctx["omp_threads"])

    def cpu_use(b):
        """Process CPU time over (wall time x threads): near 100% on a quiet machine; lower means other jobs
        took the cores (or a serial part left one idle), and the wall-clock rates are understated."""
        return b["cpu_time"] / (b["real_time"] * threads)

    def ran(prefix):
        return any(name.startswith(prefix) for name in runs)

    peak = find("BM_FmaPeak")["FLOP/s"]
    out = []
    out.append(f"# CPU benchmarks, {ctx['date']}, commit {args.commit}\n")
    out.append(f"Machine: {ctx['num_cpus']} CPUs at {ctx['mhz_per_cpu']} MHz, OpenMP threads {ctx['omp_threads']}, "
               f"Highway target {ctx['fma_target']}, load average at start {ctx.get('load_avg')}.  ")
    out.append(f"Layer: {ctx['layer']}; a single causal prefill of N tokens.  ")
    out.append("Command: `make bench` (bench/cpu_bench, then bench/cpu_table.py).\n")
    out.append("| ceiling (measured in this run) | value |\n|---|---|")
    out.append(f"| fp32 FMA peak, register-resident, all threads | {peak / 1e9:.1f} GFLOP/s, "
               f"cpu {cpu_use(find('BM_FmaPeak')):.0%} |")
    if ran("BM_CopyBandwidth"):
        bandwidth = find("BM_CopyBandwidth")
        out.append(f"| memory copy bandwidth (read + written) | {bandwidth['bytes/s'] / 1e9:.1f} GB/s, "
                   f"cpu {cpu_use(bandwidth):.0%} |")
    if ran("BM_EigenGemm"):
        gemm = find("BM_EigenGemm")["FLOP/s"]
        out.append(f"| Eigen fp32 GEMM at the dense peer's tile shape | {gemm / 1e9:.1f} GFLOP/s ({gemm / peak:.0%} of peak) |")
    out.append("")
    targets = []
    forward = sorted({int(name.split("/")[1]) for name in runs if name.startswith("BM_IndexBranch/")})
    if forward:
        out.append("| N | index branch | main branch | fp32 mode (index + main) | exact mode | reference | Eigen dense peer |")
        out.append("|---|---|---|---|---|---|---|")
    for n in forward:
        index, main_ = find(f"BM_IndexBranch/{n}"), find(f"BM_MainBranch/{n}")
        fast, exact = find(f"BM_Run/n:{n}/mode:2"), find(f"BM_Run/n:{n}/mode:1")
        reference, dense = find(f"BM_Run/n:{n}/mode:0"), find(f"BM_EigenDense/{n}")
        cell = lambda b: (f"{ms(b):.0f} ms, {b['FLOP/s'] / 1e9:.1f} GFLOP/s ({b['FLOP/s'] / peak:.0%}), "
                          f"cpu {cpu_use(b):.0%}")
        out.append(f"| {n} | {cell(index)} | {cell(main_)} | {cell(fast)} | {ms(exact):.0f} ms, cpu {cpu_use(exact):.0%} | "
                   f"{ms(reference):.0f} ms, cpu {cpu_use(reference):.0%} | {cell(dense)} |")
        for name, b in (("index branch", index), ("main branch", main_)):
            share = b["FLOP/s"] / peak
            targets.append((f"{name} at N = {n}: >= 50% of the fp32 peak", f"{share:.0%}", share >= 0.5))
        speedup, ideal = ms(dense) / ms(fast), eq12_ratio(n)
        targets.append((f"fp32 mode vs Eigen dense at N = {n}: >= 70% of the Eq. 12 ratio {ideal:.2f}x",
                        f"{speedup:.2f}x = {speedup / ideal:.0%} of it", speedup >= 0.7 * ideal or n != 32768))
        slowdown = ms(exact) / ms(fast)
        targets.append((f"exact mode within 5x of fp32 mode at N = {n}", f"{slowdown:.2f}x", slowdown <= 5))
        targets.append((f"simd exact vs reference at N = {n} (no target)", f"{ms(reference) / ms(exact):.1f}x faster",
                        None))
    backward = sorted({int(name.split("/")[1].split(":")[1]) for name in runs if name.startswith("BM_Backward/")})
    if backward:
        out.append("\n| N | backward (dq, dk, dv), simd fp32 | backward, simd exact |\n|---|---|---|")
    for n in backward:
        fast, exact = find(f"BM_Backward/n:{n}/mode:0"), find(f"BM_Backward/n:{n}/mode:1")
        share = fast["FLOP/s"] / peak
        out.append(f"| {n} | {ms(fast):.0f} ms, {fast['FLOP/s'] / 1e9:.1f} GFLOP/s ({share:.0%}), "
                   f"cpu {cpu_use(fast):.0%} | {ms(exact):.0f} ms, cpu {cpu_use(exact):.0%} |")
        targets.append((f"backward fp32 at N = {n}: share of the fp32 peak (no target set)", f"{share:.0%}", None))
        slowdown = ms(exact) / ms(fast)
        targets.append((f"backward exact within 5x of fp32 at N = {n}", f"{slowdown:.2f}x", slowdown <= 5))
    out.append("\nPercentages are shares of the fp32 FMA peak; FLOPs are SPEC section 6's (index Hkv*Di*N^2, main "
               "4*Hq*D*sum|S_t| with the keys the selection holds, dense 2*Hq*D*N^2; the backward 2.5x the main "
               "branch's). `cpu` is process CPU time over wall time x threads: near 100% means the run had the cores "
               "to itself.\n")
    out.append("| target | measured | met |\n|---|---|---|")
    for name, value, met in targets:
        verdict = "-" if met is None else ("yes" if met else "**no**")
        if "N = 8192" in name and "Eq. 12" in name:
            verdict = "(target is at 32K)"
        out.append(f"| {name} | {value} | {verdict} |")
    print("\n".join(out))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Floors for the GPU-speed targets, from arithmetic on measured ceilings and measured selections: what each main-branch
path must move and compute, and the best share of the bf16 GEMM ceiling it could reach; then the prefill and decode
targets against the floors of their stages. No device needed: the inputs are committed results.

Main branch (M3 prefill, bf16; per (query t, head h) the |S_t| selected blocks of Bk keys):
  useful FLOPs  4 Hq D sum_t |S_t| Bk (QK^T and PV, SPEC section 6)
  path K (KV-outer, what runs today): per (query, head, selected block) it reads the query row (D bf16) and writes a
        partial (Dv values + m, l) that the merge reads back; K and V are read once per (block, group) list. With
        fp32 partials 2 (4 Dv + 8) bytes, with bf16 partials 2 (2 Dv + 8).
  path U (union tile of 8 queries x 16 heads of a group): reads the tile's query rows once, writes out once, and
        computes every query against every block of the tile's union (masked where the row lacks it): executed
        FLOPs = useful x 8 u8 / sum |S| over the tile. K and V bytes: u8 blocks per tile when neighbouring tiles
        share nothing through L2 (worst), the whole K and V once when they share everything (best).
  floor = max(FLOPs / GEMM ceiling, bytes / copy ceiling); share of GEMM at the floor = useful / GEMM / floor.

Usage: bench/main_branch_roofline.py [--bench bench/results/gpu_bench_2026-11-30_s5.json]
         [--bench-1m bench/results/gpu_bench_2026-11-30_s5_1m.json]
         [--selections bench/results/gpu_selection_bench_2026-12-02.json] [--out bench/results]
Writes OUT/roofline_<date>.md and prints it."""
import argparse
import datetime
import json
import os

HQ, HKV, D, DV, BK, TOP_K = 64, 4, 128, 128, 128, 16
HEADS_PER_GROUP = HQ // HKV
TILE = 8  # queries per union tile


def selected_blocks(n):
    """sum over queries of |S_t| (in blocks) and of the keys they see, for one causal sequence of n tokens."""
    blocks = keys = 0
    for t in range(n):
        local = t // BK
        count = min(local + 1, TOP_K)
        blocks += count
        keys += (count - 1) * BK + t % BK + 1
    return blocks, keys


def main_branch_rows(n, unions, gemm, copy):
    """Per selection: (name, u4, u8, K fp32 share, K bf16 share, U share worst, U share best)."""
    blocks, keys = selected_blocks(n)
    useful = 4 * HQ * D * keys
    kv_once = 2 * n * HKV * D * 2  # K and V, bf16, read once
    rows = []
    for name, u4, u8 in unions:
        per_qhb_fp32 = D * 2 + 2 * (DV * 4 + 8)
        per_qhb_bf16 = D * 2 + 2 * (DV * 2 + 8)
        k_fp32 = max(useful / gemm, (blocks * HQ * per_qhb_fp32 + kv_once) / copy)
        k_bf16 = max(useful / gemm, (blocks * HQ * per_qhb_bf16 + kv_once) / copy)
        tiles = n / TILE * HKV
        executed = useful * (TILE * u8) / (blocks / (n / TILE))  # union blocks computed per query over rows' own
        q_and_out = n * HQ * (D * 2 + DV * 2 + 4)
        u_worst = max(executed / gemm, (tiles * u8 * BK * (D + DV) * 2 + q_and_out) / copy)
        u_best = max(executed / gemm, (kv_once + q_and_out) / copy)
        share = lambda floor: useful / gemm / floor  # noqa: E731
        rows.append((name, u4, u8, share(k_fp32), share(k_bf16), share(u_worst), share(u_best)))
    return useful, rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    parser.add_argument("--bench", default=os.path.join(root, "gpu_bench_2026-11-30_s5.json"))
    parser.add_argument("--bench-1m", default=os.path.join(root, "gpu_bench_2026-11-30_s5_1m.json"))
    parser.add_argument("--selections", default=os.path.join(root, "gpu_selection_bench_2026-12-02.json"))
    parser.add_argument("--out", default=root)
    args = parser.parse_args()
    bench = json.load(open(args.bench))
    bench_1m = json.load(open(args.bench_1m))
    selections = json.load(open(args.selections))
    gemm = selections["ceilings"]["gemm_bf16_tflops"] * 1e12
    copy = selections["ceilings"]["copy_gbps"] * 1e9
    n = 131072
    unions = [(r["selection"], r["union4"], r["union8"]) for r in selections["rows"] if r["n"] == n]
    measured = {r["selection"]: r["main_share_of_gemm"] for r in selections["rows"] if r["n"] == n}
    useful, rows = main_branch_rows(n, unions, gemm, copy)
    lines = [f"# Floors for the GPU-speed targets (bench/main_branch_roofline.py, {datetime.date.today()})", "",
             f"Ceilings measured on the H200 in bench/results/gpu_selection_bench_2026-12-02: bf16 GEMM "
             f"{gemm / 1e12:.0f} TFLOP/s, copy {copy / 1e9:.0f} GB/s. M3 prefill at {n} tokens (Hq {HQ}, Hkv {HKV}, "
             f"D {D}, Bk {BK}, top_k {TOP_K}); useful main-branch FLOPs {useful / 1e12:.2f} TFLOP. Union sizes are the "
             "measured ones of each selection generator.", "",
             "## Main branch: best share of the GEMM ceiling each path can reach", "",
             "| selection | union, 4 q | union, 8 q | measured today (K, fp32 partials) | K floor, fp32 partials | "
             "K floor, bf16 partials | U floor, no L2 reuse | U floor, full L2 reuse |",
             "|---|---|---|---|---|---|---|---|"]
    for name, u4, u8, kf, kb, uw, ub in rows:
        lines.append(f"| {name} | {u4:.1f} | {u8:.1f} | {100 * measured.get(name, 0):.1f}% | {100 * kf:.0f}% | "
                     f"{100 * kb:.0f}% | {100 * uw:.0f}% | {100 * ub:.0f}% |")
    prefill = {p["n"]: p for p in bench["prefill"]}
    p128 = prefill[n]
    ours = p128["ours"]
    index_floor = ours["index_flops"] / gemm * 1e3
    main_floor_bf16 = useful / gemm / rows[1][4] * 1e3  # random, K with bf16 partials
    best_random = index_floor + ours["topk_ms"] + main_floor_bf16
    p1m = bench_1m["prefill"][0]
    n1m = p1m["n"]
    index_floor_1m = HKV * D * n1m * n1m / gemm * 1e3  # Hkv Di N^2: half the square of 2-FLOP dots
    blocks_1m = n1m * TOP_K  # every row is full but the first 15 blocks' queries (0.2% of them)
    main_floor_1m = max(4 * HQ * D * blocks_1m * BK / gemm, blocks_1m * HQ * (D * 2 + 2 * (DV * 2 + 8)) / copy) * 1e3
    topk_1m = p1m["ours"]["topk_ms"] if "ours" in p1m else 0.0
    index_budget_1m = p1m["sdpa_ms"] / 30 - main_floor_1m - topk_1m
    lines += ["", "## The targets against their floors", "",
              "| measure | today | target | floor (arithmetic) | what is in the way |", "|---|---|---|---|---|",
              f"| main branch 128K, random | {100 * measured.get('random', 0):.1f}% of GEMM | >= 30% | "
              f"{100 * rows[1][3]:.0f}% with fp32 partials, {100 * rows[1][4]:.0f}% with bf16 | partial traffic: "
              f"fp32 partials cap K below the target; bf16 partials needed |",
              f"| main branch 128K, 90% overlap | {100 * measured.get('overlap90', 0):.1f}% | >= 55% | K "
              f"{100 * rows[3][4]:.0f}% (bf16), U {100 * rows[3][5]:.0f}-{100 * rows[3][6]:.0f}% | today's kernel "
              "is blind to overlap (same time on every selection): only path U can reach it |",
              f"| index branch 128K | {100 * p128['index_frac_gemm']:.0f}% of GEMM | >= 75% | 100% (compute-bound; "
              f"block scores {HKV * n * (n // BK) * 4 / 1e9:.1f} GB fp32 = "
              f"{HKV * n * (n // BK) * 4 / copy * 1e3:.2f} ms of copy) | pipeline depth, not traffic |",
              f"| prefill 128K vs SDPA, random | {p128['speedup_vs_sdpa']:.1f}x | >= 12x | "
              f"{p128['sdpa_ms'] / best_random:.1f}x (index at 100% GEMM {index_floor:.1f} ms + today's top-k "
              f"{ours['topk_ms']:.1f} ms + main at its bf16-K floor {main_floor_bf16:.1f} ms) | needs every stage "
              "at its floor |",
              f"| prefill 1M vs SDPA, random | {p1m['speedup_vs_sdpa']:.1f}x | >= 30x | "
              f"{p1m['sdpa_ms'] / (index_floor_1m + topk_1m + main_floor_1m):.1f}x (index {index_floor_1m:.0f} ms "
              f"at 100% GEMM + today's top-k {topk_1m:.0f} ms + main {main_floor_1m:.0f} ms at its bf16-K floor) | "
              f"the index branch's N^2: with main and top-k at those, 30x needs the index at "
              f"{100 * index_floor_1m / index_budget_1m:.0f}% of GEMM (today {100 * p1m['index_frac_gemm']:.0f}%), "
              "or fp8 |",
              "| decode batch 1, KV 4K | 25 us (graph) | <= 10 us | 1.3 us of traffic (5.3 MB); 3 dependent "
              "kernels at a few us of launch and drain each | latency: needs programmatic dependent launch |"]
    text = "\n".join(lines) + "\n"
    path = os.path.join(args.out, f"roofline_{datetime.date.today()}.md")
    with open(path, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()

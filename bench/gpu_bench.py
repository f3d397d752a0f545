"""Side-by-side GPU benchmark, one device run: the ceilings, the peers and our kernels on M3 shapes.

Ceilings, measured in the same run: bf16 GEMM (torch.matmul, 8192^3), fp8 e4m3 GEMM (torch._scaled_mm, 8192^3,
unit scales, bf16 output; null where torch lacks it) and device-to-device copy (2 GiB, bytes read + written). Peers: torch SDPA dense causal GQA, and FlexAttention with a per-token block selection
(local block + 15 random earlier blocks per (query, group), as /shared/anchors/h200_peers.py sets it up).
Ours: bench/gpu_bench (built from bench/gpu_bench.cu, the backend's pipeline), which times the index branch (block maxima), the top-k
and the main branch (KV-outer; also timed as a replayed CUDA graph, and the Q-outer kernel as a second row at
the --qouter lengths and the small decode shapes) of the gpu backend's bf16 mode separately on
device-resident random inputs, and checks its outputs (every selection row valid, no NaN left after
poisoning, the KV-outer output against the Q-outer kernel's where memory allows). In decode the index branch runs
batched (one block-max launch and one top-k for every sequence, checked bit for bit against the per-sequence launches)
and the whole step is also timed as one replayed CUDA graph (step_graph_ms, reported with the % of copy bandwidth it
implies). At the --fp8 prefill lengths and --fp8-decode lengths (batch 1) the index branch is also timed on e4m3
inputs (index=fp8: BlockMaxScoresFp8, checked against BlockMaxScores on the same values) and reported against the fp8
GEMM ceiling. Every time is the median of CUDA-event timed repetitions after a warm-up; inputs are random, never zeros.

Usage: python3 bench/gpu_bench.py --bin BUILD/bench/gpu_bench --out DIR [--prefill 32768,131072,1048576]
         [--decode 4096,...] [--decode-batched 128x1x4096,...] [--qouter 32768,131072] [--flex 32768,131072]
         [--sdpa 32768,131072,1048576] [--fp8 32768,131072] [--fp8-decode 1048576] [--commit ID]
         [--deadline SECONDS]
Writes DIR/gpu_bench_<date>.json and .md and prints the markdown.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

HQ, HKV, D, BK, TOP_K = 64, 4, 128, 128, 16
dev = "cuda"


def bench(fn, warm=2, rep=5):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(rep):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]


def ceilings():
    n = 8192
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    ms = bench(lambda: a @ b, warm=3, rep=10)
    gemm = 2 * n ** 3 / ms / 1e9
    x = torch.randint(0, 255, (2 * 1024 ** 3,), dtype=torch.uint8, device=dev)
    y = torch.empty_like(x)
    ms_copy = bench(lambda: y.copy_(x), warm=3, rep=10)
    copy = 2 * 2 * 1024 ** 3 / ms_copy / 1e6  # GB/s, read + written
    del a, b, x, y
    torch.cuda.empty_cache()
    res = {"gemm_bf16_tflops": gemm, "gemm_ms": ms, "copy_gbps": copy, "copy_ms": ms_copy}
    res.update(fp8_gemm(n))
    return res


def fp8_gemm(n):
    """e4m3 x e4m3 GEMM rate (torch._scaled_mm, unit per-tensor scales, bf16 out; the second operand column-major
    as _scaled_mm requires), timed as the bf16 GEMM; null with the reason where torch or the device lacks it."""
    try:
        a = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn).t()
        one = torch.ones((), device=dev, dtype=torch.float32)
        ms = bench(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16), warm=3, rep=10)
        del a, b
        torch.cuda.empty_cache()
        return {"gemm_fp8_tflops": 2 * n ** 3 / ms / 1e9, "gemm_fp8_ms": ms}
    except Exception as e:  # noqa: BLE001 (no fp8 GEMM here: report why, keep going)
        torch.cuda.empty_cache()
        return {"gemm_fp8_tflops": None, "gemm_fp8_error": f"{type(e).__name__}: {str(e)[:200]}"}


def sdpa_prefill(n):
    q = torch.randn(1, HQ, n, D, device=dev, dtype=torch.bfloat16)
    k = torch.randn(1, HKV, n, D, device=dev, dtype=torch.bfloat16)
    v = torch.randn(1, HKV, n, D, device=dev, dtype=torch.bfloat16)
    f = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    reps = (1, 1) if n > 262144 else (2, 5)
    ms = bench(f, warm=reps[0], rep=reps[1])
    del q, k, v
    torch.cuda.empty_cache()
    return ms


def sdpa_decode(kv, batch=1, q_len=1):
    # q_len > 1 (speculative decode): no mask; the last q_len keys' causal triangle is a negligible share.
    q = torch.randn(batch, HQ, q_len, D, device=dev, dtype=torch.bfloat16)
    k = torch.randn(batch, HKV, kv, D, device=dev, dtype=torch.bfloat16)
    v = torch.randn(batch, HKV, kv, D, device=dev, dtype=torch.bfloat16)
    ms = bench(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), warm=3, rep=20)
    del q, k, v
    torch.cuda.empty_cache()
    return ms


def flex_prefill(n):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    flex = torch.compile(flex_attention)
    nb = n // BK
    g = torch.Generator(device=dev).manual_seed(1)
    scores = torch.rand(HKV, n, nb, device=dev, generator=g)
    pos = torch.arange(n, device=dev)
    blk = torch.arange(nb, device=dev)
    local = pos // BK
    scores = scores.masked_fill(blk[None, None, :] > local[None, :, None], -1.0)
    scores[:, pos, local] = 2.0
    top = scores.topk(TOP_K, dim=-1).indices
    del scores
    sel = torch.zeros(HKV, n, nb, dtype=torch.bool, device=dev)
    sel.scatter_(-1, top, True)
    sel &= blk[None, None, :] <= local[None, :, None]
    group = HQ // HKV

    def mask_mod(b, h, qi, ki):
        return sel[h // group, qi, ki // BK] & (ki <= qi)

    bm = create_block_mask(mask_mod, 1, HQ, n, n, device=dev, BLOCK_SIZE=128, _compile=True)
    q = torch.randn(1, HQ, n, D, device=dev, dtype=torch.bfloat16)
    k = torch.randn(1, HKV, n, D, device=dev, dtype=torch.bfloat16)
    v = torch.randn(1, HKV, n, D, device=dev, dtype=torch.bfloat16)
    ms = bench(lambda: flex(q, k, v, block_mask=bm, enable_gqa=True), warm=2, rep=5)
    density = bm.kv_num_blocks.float().mean().item() / nb
    del q, k, v, sel, bm
    torch.cuda.empty_cache()
    return ms, density


def ours(binary, mode, n, reps, *extra):
    proc = subprocess.run([binary, mode, str(n), str(reps), *extra], capture_output=True, text=True, timeout=400)
    if proc.returncode != 0 and not proc.stdout.strip():
        return {"error": proc.stderr.strip()[-300:]}
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["checks_passed"] = proc.returncode == 0
    return result


def write_report(stem, result, lines):
    """Writes stem.json (result) and stem.md (the lines), prints the markdown; the exit status: 0 when every row of
    result["rows"] passed its checks."""
    with open(stem + ".json", "w") as f:
        json.dump(result, f, indent=1)
    table = "\n".join(lines) + "\n"
    with open(stem + ".md", "w") as f:
        f.write(table)
    print(table)
    return 0 if all(r.get("checks_passed") for r in result["rows"]) else 1


def ints(text):
    return [int(x) for x in text.split(",") if x]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--prefill", default="32768,131072")
    p.add_argument("--sdpa", default="32768,131072")
    p.add_argument("--flex", default="32768,131072")
    p.add_argument("--decode", default="4096,16384,65536,262144,1048576")
    p.add_argument("--decode-batched", default="128x1x4096,128x1x32768,8x16x65536",
                   help="BATCHxQ_LENxKV decode shapes")
    p.add_argument("--qouter", default="32768,131072",
                   help="prefill N at which the Q-outer main branch and the earlier kernels (mma.sync index and "
                        "KV-outer tiles, warp-per-row top-k) are also timed")
    p.add_argument("--fp8", default="32768,131072",
                   help="prefill N at which the index branch is also timed on e4m3 inputs (index=fp8)")
    p.add_argument("--fp8-decode", default="1048576", help="KV of batch-1 decodes timed with index=fp8")
    p.add_argument("--commit", default=os.environ.get("COMMIT", "unknown"))
    p.add_argument("--deadline", type=float, default=1e9, help="seconds: later measurements that would not fit are skipped")
    args = p.parse_args()
    started = time.time()
    log = lambda *a: print(*a, file=sys.stderr, flush=True)
    # Seconds a measurement needs at most, by kind and size (H200, from earlier runs), to skip what won't fit.
    need = lambda kind, n: {"sdpa": 1.1, "flex": 20.0, "ours": 1.2}[kind] * (n / 131072) ** 2 + 20
    fits = lambda kind, n: time.time() - started + need(kind, n) < args.deadline
    res = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "commit": args.commit, "device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "shapes": {"hq": HQ, "hkv": HKV, "d": D, "bk": BK, "top_k": TOP_K, "dtype": "bf16", "pooling": "max"}}
    res["ceilings"] = ceilings()
    log("ceilings", res["ceilings"])
    gemm = res["ceilings"]["gemm_bf16_tflops"]
    gemm_fp8 = res["ceilings"]["gemm_fp8_tflops"]  # None: no fp8 GEMM in this torch / on this device
    copy = res["ceilings"]["copy_gbps"]
    decode = []
    shapes = [(1, 1, kv) for kv in ints(args.decode)]
    shapes += [tuple(int(x) for x in t.split("x")) for t in args.decode_batched.split(",") if t]
    for batch, q_len, kv in shapes:
        row = {"kv": kv, "batch": batch, "q_len": q_len,
               "ours": ours(args.bin, "decode", kv, 20, f"batch={batch}", f"q_len={q_len}")}
        if batch * q_len * HKV <= 512:
            row["ours_qouter"] = ours(args.bin, "decode", kv, 20, f"batch={batch}", f"q_len={q_len}", "attend=q-outer")
        try:
            row["sdpa_ms"] = sdpa_decode(kv, batch, q_len)
        except Exception as e:  # noqa: BLE001
            row["sdpa_error"] = f"{type(e).__name__}: {str(e)[:200]}"
        if batch == 1 and q_len == 1 and kv in ints(args.fp8_decode):
            row["ours_fp8"] = ours(args.bin, "decode", kv, 20, "index=fp8")
        o = row["ours"]
        if "total_ms" in o:
            row["gbps"] = o["decode_bytes"] / o["total_ms"] / 1e6
            row["frac_copy"] = row["gbps"] / copy
            row["index_gbps"] = batch * kv * D * 2 / o["index_ms"] / 1e6
            if o.get("step_graph_ms", 0) > 0:  # the whole step as one replayed CUDA graph
                row["step_gbps"] = o["decode_bytes"] / o["step_graph_ms"] / 1e6
                row["step_frac_copy"] = row["step_gbps"] / copy
            if "sdpa_ms" in row:
                row["speedup_vs_sdpa"] = row["sdpa_ms"] / o["total_ms"]
        log("decode", kv, row)
        decode.append(row)
    res["decode"] = decode
    prefill = []
    for n in sorted(set(ints(args.prefill)) | set(ints(args.sdpa)) | set(ints(args.flex))):
        row = {"n": n}
        if n in ints(args.prefill) and fits("ours", n):
            row["ours"] = ours(args.bin, "prefill", n, 3 if n > 262144 else 5)
            log("ours", n, row["ours"])
            if n in ints(args.fp8):
                row["ours_fp8"] = ours(args.bin, "prefill", n, 3 if n > 262144 else 5, "index=fp8")
                log("ours fp8 index", n, row["ours_fp8"])
            if n in ints(args.qouter):
                row["ours_qouter"] = ours(args.bin, "prefill", n, 3, "attend=q-outer")
                log("ours q-outer", n, row["ours_qouter"])
                row["ours_kvouter_mma"] = ours(args.bin, "prefill", n, 3, "attend=kv-outer", "index=mma", "topk=warp")
                log("ours kv-outer mma.sync", n, row["ours_kvouter_mma"])
        if n in ints(args.sdpa) and not fits("sdpa", n):
            row["sdpa_error"] = "skipped: would not fit the deadline"
        elif n in ints(args.sdpa):
            try:
                row["sdpa_ms"] = sdpa_prefill(n)
            except Exception as e:  # noqa: BLE001 (report what failed, keep going)
                row["sdpa_error"] = f"{type(e).__name__}: {str(e)[:200]}"
            log("sdpa", n, row.get("sdpa_ms"), row.get("sdpa_error"))
        if n in ints(args.flex) and not fits("flex", n):
            row["flex_error"] = "skipped: would not fit the deadline"
        elif n in ints(args.flex):
            try:
                row["flex_ms"], row["flex_tile_density"] = flex_prefill(n)
            except Exception as e:  # noqa: BLE001
                row["flex_error"] = f"{type(e).__name__}: {str(e)[:200]}"
            log("flex", n, row.get("flex_ms"), row.get("flex_error"))
        o = row.get("ours", {})
        if "index_ms" in o:
            row["index_tflops"] = o["index_flops"] / o["index_ms"] / 1e9
            row["main_tflops"] = o["main_flops"] / o["main_ms"] / 1e9
            row["index_frac_gemm"] = row["index_tflops"] / gemm
            row["main_frac_gemm"] = row["main_tflops"] / gemm
            if "sdpa_ms" in row:
                row["speedup_vs_sdpa"] = row["sdpa_ms"] / o["total_ms"]
            if "flex_ms" in row:
                row["speedup_vs_flex"] = row["flex_ms"] / o["total_ms"]
        o8 = row.get("ours_fp8", {})
        if o8.get("index_ms", 0) > 0:
            row["fp8_index_tflops"] = o8["index_flops"] / o8["index_ms"] / 1e9
            if gemm_fp8:
                row["fp8_index_frac_gemm_fp8"] = row["fp8_index_tflops"] / gemm_fp8
        prefill.append(row)
    res["prefill"] = prefill
    res["seconds"] = time.time() - started

    f = lambda x, spec=".2f": "-" if x is None else format(x, spec)
    formats = ", ".join(sorted({r["ours"]["out_format"] for r in prefill if "out_format" in r.get("ours", {})})) or "-"
    md = [f"# gpu benchmark: MSA kernels vs torch SDPA and FlexAttention on one {res['device']}", "",
          f"{res['date']}, commit {res['commit']}, torch {res['torch']}; M3 shapes (Hq 64, Hkv = Hidx 4, D = Di 128, "
          f"Bk 128, top_k 16), bf16, max pooling; the main branch writes out and lse as "
          f"{formats} "
          f"(bf16: bf16 out, fp32 lse); medians of CUDA-event timed repetitions after warm-up.", "",
          f"Ceilings measured in this run: bf16 GEMM {gemm:.0f} TFLOP/s (8192^3 torch.matmul), fp8 e4m3 GEMM "
          f"{f(gemm_fp8, '.0f')} TFLOP/s (8192^3 torch._scaled_mm, unit scales), device copy "
          f"{copy / 1000:.2f} TB/s (2 GiB, read + written).", "",
          "Selections: the pipeline's own (index branch + top-k) on i.i.d. random index inputs, nearly random "
          "selections (the worst case for sharing; bench/gpu_selection_bench.py times the main branch on the other "
          "generators of bench/selections.h). Mean distinct blocks of 4 consecutive queries' rows per N: "
          + ", ".join(f"{r['n']}: {r['ours']['union4']:.1f}" for r in prefill if "union4" in r.get("ours", {}))
          + ".", "",
          "## Prefill (one causal sequence of N tokens)", "",
          "| N | SDPA ms | Flex ms | index kernel | ours index ms | index TFLOP/s (% GEMM) | index ms (mma.sync) "
          "| top-k ms | top-k ms (warp per row) | main kernel | main ms | main TFLOP/s (% GEMM) | main ms (KV-outer mma.sync) | main ms (Q-outer) "
          "| max diff vs Q-outer (out, lse) | max diff vs mma.sync tiles (out, lse) | ours total ms | x SDPA "
          "| x Flex | checks |",
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
          "| --- | --- |"]
    for r in prefill:
        o = r.get("ours", {})
        idx = f"{r['index_tflops']:.0f} ({100 * r['index_frac_gemm']:.0f}%)" if "index_tflops" in r else "-"
        mn = f"{r['main_tflops']:.0f} ({100 * r['main_frac_gemm']:.0f}%)" if "main_tflops" in r else "-"
        diff = (f"{o['out_diff_vs_qouter']:.1e}, {o['lse_diff_vs_qouter']:.1e}"
                if o.get("out_diff_vs_qouter", -1) >= 0 else "-")
        diff_mma = (f"{o['out_diff_vs_kvouter']:.1e}, {o['lse_diff_vs_kvouter']:.1e}"
                    if o.get("out_diff_vs_kvouter", -1) >= 0 else "-")
        peers = [r.get(key, {}) for key in ("ours_qouter", "ours_kvouter_mma")]
        checks = "-" if not o else ("ok" if all(x.get("checks_passed", True) for x in [o] + peers) else f"FAILED {o}")
        md.append(f"| {r['n']} | {f(r.get('sdpa_ms'))} | {f(r.get('flex_ms'))} | {o.get('index_kernel', '-')} | "
                  f"{f(o.get('index_ms'))} | {idx} | {f(r.get('ours_kvouter_mma', {}).get('index_ms'))} | "
                  f"{f(o.get('topk_ms'))} | {f(r.get('ours_kvouter_mma', {}).get('topk_ms'))} | "
                  f"{o.get('main_kernel', '-')} | {f(o.get('main_ms'))} | {mn} | "
                  f"{f(r.get('ours_kvouter_mma', {}).get('main_ms'))} | {f(r.get('ours_qouter', {}).get('main_ms'))} | "
                  f"{diff} | {diff_mma} | {f(o.get('total_ms'))} | "
                  f"{f(r.get('speedup_vs_sdpa'), '.1f')} | {f(r.get('speedup_vs_flex'), '.1f')} | {checks} |")
    md += ["", "Useful FLOPs: index `Hkv*Di*N^2`, main `4*Hq*D*sum|S_t|` (SPEC section 6). SDPA: "
           "`F.scaled_dot_product_attention(is_causal=True, enable_gqa=True)`; Flex: `flex_attention` compiled, "
           "per-token selection of 16 blocks (local + 15 random earlier) as a block mask. Total = index + top-k + "
           "main. The max diff columns compare the main kernel with the Q-outer kernel and with KV-outer's mma.sync "
           "tiles on the same selection (all bf16; each is judged against the FP64 reference by the test suite).", "",
           "## Decode (batch sequences of KV keys, q_len queries each)", "",
           "| batch | q_len | KV | index launch | index ms | top-k ms | main ms (KV-outer, wgmma tiles) | main ms (graph replay) "
           "| main ms (Q-outer) | total ms | bytes read (MB) | GB/s | % copy | step graph ms | % copy (step graph) "
           "| SDPA dense ms | x SDPA | checks |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in decode:
        o = r["ours"]
        checks = "ok" if o.get("checks_passed") and r.get("ours_qouter", {}).get("checks_passed", True) else f"FAILED {o}"
        md.append(f"| {r['batch']} | {r['q_len']} | {r['kv']} | {o.get('index_batch', '-')} | "
                  f"{f(o.get('index_ms'), '.4f')} | "
                  f"{f(o.get('topk_ms'), '.4f')} | {f(o.get('main_ms'), '.4f')} | {f(o.get('main_graph_ms'), '.4f')} | "
                  f"{f(r.get('ours_qouter', {}).get('main_ms'), '.4f')} | {f(o.get('total_ms'), '.4f')} | "
                  f"{f(o.get('decode_bytes', 0) / 1e6, '.1f')} | "
                  f"{f(r.get('gbps'), '.0f')} | {f(100 * r['frac_copy'] if 'frac_copy' in r else None, '.1f')} | "
                  f"{f(o.get('step_graph_ms') or None, '.4f')} | "
                  f"{f(100 * r['step_frac_copy'] if 'step_frac_copy' in r else None, '.1f')} | "
                  f"{f(r.get('sdpa_ms'), '.4f')} | {f(r.get('speedup_vs_sdpa'), '.1f')} | {checks} |")
    md += ["", "Decode bytes that must be read: index keys (KV x Di x 2), the index and main queries, K and V of the "
           "selected keys (4 groups x up to 16 blocks x 128 keys x D x 2 x 2, per query). Total = index + top-k + "
           "KV-outer main (direct launches; wgmma tiles on an sm_90 device). Index launch: batched = one block-max "
           "launch and one top-k for every sequence of the decode batch, per-sequence = one each per sequence. Step "
           "graph = index + top-k + main branch captured as one CUDA graph and replayed; its % copy = bytes read / "
           "step graph time against the copy ceiling above.", ""]
    md += ["## Index branch on e4m3 inputs (index=fp8: BlockMaxScoresFp8, wgmma m64n128k32 e4m3)", "",
           "| shape | bf16 index kernel | bf16 index ms | bf16 TFLOP/s (% bf16 GEMM) | fp8 index ms "
           "| fp8 TFLOP/s (% fp8 GEMM) | x bf16 | index keys GB/s (bf16, fp8) | max abs diff | max rel diff (bound) "
           "| top-k rows differing (blocks) | fp8 check |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    fp8_rows = [(f"prefill {r['n']}", r.get("ours", {}), r["ours_fp8"], None) for r in prefill if "ours_fp8" in r]
    fp8_rows += [(f"decode {r['kv']}", r["ours"], r["ours_fp8"], r["kv"]) for r in decode if "ours_fp8" in r]
    for name, o, o8, kv in fp8_rows:
        rate = lambda x: x["index_flops"] / x["index_ms"] / 1e9 if x.get("index_ms", 0) > 0 else None
        r16, r8 = rate(o), rate(o8)
        pct16 = f" ({100 * r16 / gemm:.0f}%)" if r16 else ""
        pct8 = f" ({100 * r8 / gemm_fp8:.0f}%)" if r8 and gemm_fp8 else ""
        speedup = o["index_ms"] / o8["index_ms"] if o.get("index_ms") and o8.get("index_ms") else None
        # decode reads the index keys once: KV x Di elements of 2 (bf16) or 1 (e4m3) bytes
        gbps = (f"{f(kv * D * 2 / o['index_ms'] / 1e6 if o.get('index_ms') else None, '.0f')}, "
                f"{f(kv * D / o8['index_ms'] / 1e6 if o8.get('index_ms') else None, '.0f')}") if kv else "-"
        md.append(f"| {name} | {o.get('index_kernel', '-')} | {f(o.get('index_ms'), '.4f')} | "
                  f"{f(r16, '.0f')}{pct16} | {f(o8.get('index_ms'), '.4f')} | {f(r8, '.0f')}{pct8} | "
                  f"{f(speedup)} | {gbps} | {f(o8.get('fp8_max_abs_diff'), '.2e')} | "
                  f"{f(o8.get('fp8_max_rel_diff'), '.2e')} ({f(o8.get('fp8_rel_bound'), '.1e')}) | "
                  f"{o8.get('fp8_topk_diff_rows', '-')} ({o8.get('fp8_topk_diff_blocks', '-')}) | "
                  f"{o8.get('fp8_check', o8.get('error', '-'))} |")
    md += ["", "The fp8 runs round the random index inputs to e4m3 first; the bf16 columns are the default run's "
           "(bf16 inputs, same shapes). Diffs: BlockMaxScoresFp8 against BlockMaxScores (bf16 mma.sync, fp32 "
           "accumulation) on the same e4m3 values, in score units and relative to index_scale * the block's largest "
           "sum |q_i k_i|; top-k rows whose selected set differs (near-ties: counted, not failed).", ""]
    text = "\n".join(md) + "\n"
    os.makedirs(args.out, exist_ok=True)
    day = res["date"][:10]
    with open(os.path.join(args.out, f"gpu_bench_{day}.json"), "w") as fh:
        json.dump(res, fh, indent=1)
    with open(os.path.join(args.out, f"gpu_bench_{day}.md"), "w") as fh:
        fh.write(text)
    print(text)


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# gpu/fp8_index_first_run.sh [OUT_DIR]: first device check of the e4m3 index branch (gpu/block_max_fp8.cu
# BlockMaxScoresFp8, RoundToE4M3 / E4M3ToLowp in gpu/common_kernels.cu), one call (under 2 min), with THIS branch's
# binaries laid out as gpu/device_check.sh says (BUILD=.devbuild/build-gpu LIBS=.devbuild/lib). Small shapes first with
# index=fp8, each checked against BlockMaxScores on the same e4m3 values (fp8_check: every entry within
# kFp8IndexRelBound * its magnitude, the same entries written, the same bad rows; on a failure: memcheck, stop), then
# the e4m3 gtests (exact block maxima, host rounding, bad rows), the ceilings (torch: bf16 and fp8 e4m3 GEMM),
# timings bf16 wgmma vs fp8 at prefill 32K / 128K and a batch-1 decode over 1M keys, sanitizers, a summary table.
# Every step runs under `timeout`; DEADLINE (default 115 s) bounds the whole script (steps past it are listed as skipped).
source "$(dirname "$0")/first_run_lib.sh" fp8_index_first_run_out 115 6 "${1:-}"
summary() { python3 - "$O" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
rcs = dict(l.split() for l in open(os.path.join(out, "rc.list"))) if os.path.exists(os.path.join(out, "rc.list")) else {}
ceil = {}
if os.path.exists(os.path.join(out, "ceilings.txt")):
    ceil = ([json.loads(l) for l in open(os.path.join(out, "ceilings.txt"), errors="replace") if l.startswith("{")] or [{}])[-1]
g16, g8 = ceil.get("gemm_bf16_tflops"), ceil.get("gemm_fp8_tflops")
print(f"ceilings: bf16 GEMM {g16 or '-'} TFLOP/s, fp8 e4m3 GEMM {g8 or '-'} TFLOP/s {ceil.get('gemm_fp8_error', '')}")
print(f"{'run':24} {'rc':>3} {'index':6} {'index ms':>9} {'TFLOP/s':>8} {'% GEMM':>7} {'fp8_check':12} {'max abs':>9} "
      f"{'max rel':>9} {'bound':>8} {'topk rows (blocks)':>18} {'bad':>4}")
res = {}
for f in sorted(glob.glob(os.path.join(out, "*.txt"))):
    name = os.path.basename(f)[:-4]
    if name == "ceilings": continue
    d = ([json.loads(l) for l in open(f, errors="replace") if l.startswith("{")] or [None])[-1]
    if d and "index_ms" in d:
        res[name] = d
        tf = d["index_flops"] / d["index_ms"] / 1e9 if d["index_ms"] > 0 else 0
        ref = g8 if d["index_kernel"] == "fp8" else g16
        pct = f"{100 * tf / ref:6.1f}%" if ref else "      -"
        print(f"{name:24} {rcs.get(name, '?'):>3} {d['index_kernel']:6} {d['index_ms']:9.4f} {tf:8.1f} {pct} "
              f"{d.get('fp8_check', '?'):12} {d.get('fp8_max_abs_diff', 0):9.2e} {d.get('fp8_max_rel_diff', 0):9.2e} "
              f"{d.get('fp8_rel_bound', 0):8.1e} {str(d.get('fp8_topk_diff_rows', '-')) + ' (' + str(d.get('fp8_topk_diff_blocks', '-')) + ')':>18} "
              f"{d['bad_selection_rows']:4}")
    else:
        lines = [l.strip() for l in open(f, errors="replace") if "PASSED" in l or "FAILED" in l or "ERROR SUMMARY" in l
                 or "magnitude" in l]
        print(f"{name:24} {rcs.get(name, '?'):>3} {' | '.join(lines[-8:]) or '(see ' + name + '.txt)'}")
skipped = [n for n, r in rcs.items() if r == "skipped"]
if skipped: print("skipped (deadline):", " ".join(skipped))
for name in sorted(n[:-6] for n in res if n.endswith("_wgmma")):
    if name + "_fp8" in res:
        w, e = res[name + "_wgmma"], res[name + "_fp8"]
        print(f"{name:20} index wgmma bf16 {w['index_ms']:9.4f} ms, fp8 {e['index_ms']:9.4f} ms ({w['index_ms'] / e['index_ms']:5.2f}x)")
PY
echo "fp8_index_first_run: rc=$rc, $((SECONDS - T0)) s (outputs in $O)"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; F=index=fp8
# 1. Small shapes with the fp8 index kernel, each checked against BlockMaxScores on the same e4m3 values (fp8_check):
#    prefill 300 and 1000 (partial last blocks), 8 x 16 decode queries over 4096 keys (64 rows: one warpgroup per CTA),
#    2 x 1 query over 5000 keys (8 rows, a partial last block), 4 x 1 over 300 keys (3 blocks < top_k).
run small_prefill_300 25 "$G" prefill 300 2 $F; run small_prefill_1000 25 "$G" prefill 1000 2 $F
run small_decode_b8_q16 25 "$G" decode 4096 2 batch=8 q_len=16 $F; run small_decode_b2_5000 25 "$G" decode 5000 2 batch=2 $F
run small_decode_b4_300 25 "$G" decode 300 2 batch=4 $F
# Stop (after memcheck) on a broken kernel: a crash or CUDA error (no JSON), entries written by one kernel only or other
# bad rows, invalid selections, NaN outputs, or diffs past 2^-5 of the magnitude (a layout or descriptor error gives
# ~1). Entries only past kFp8IndexRelBound (2^-10) fail the run but do not stop it: the hardware's precision is then
# worse than stated, and the timings still come.
broken() { python3 - "$O" <<'PY'
import glob, json, os, sys
for f in glob.glob(os.path.join(sys.argv[1], "small_*.txt")):
    d = ([json.loads(l) for l in open(f, errors="replace") if l.startswith("{")] or [None])[-1]
    if (not d or d.get("fp8_check") not in ("ok", "FAILED") or d.get("fp8_written_mismatch", 1) or d["bad_selection_rows"]
            or d["nonfinite_outputs"] or d.get("fp8_max_rel_diff", 1) > 2 ** -5):
        print("broken:", os.path.basename(f)); sys.exit(0)
sys.exit(1)
PY
}
[ $rc -eq 0 ] || ! broken || { run memcheck_small 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$G" prefill 300 1 $F; summary; exit 1; }
# 2. The e4m3 tests: exact block maxima (prefill, prefix chunk, decode, Di 16/32/64/128, Bk 64/128/256), RoundToE4M3
#    against the test's own nearest-e4m3 search from F64/F32/BF16/F16, E4M3ToLowp on all 256 codes, NaN bad rows.
run gpu_tests 40 "$B/tests/gpu_backend_test" --gtest_filter='E4M3Reference.*:GpuKernels.*' --gtest_brief=0
# 3. Ceilings (torch, as bench/gpu_bench.py measures them), then timings bf16 wgmma vs fp8 (both checked).
run ceilings 40 python3 -c "import json, sys; sys.path.insert(0, 'bench'); import gpu_bench; print(json.dumps(gpu_bench.ceilings()))"
for n in 32768 131072; do for k in wgmma fp8; do run "prefill_${n}_$k" 25 "$G" prefill $n 5 index=$k; done; done
for k in wgmma fp8; do run "decode_1m_b1_$k" 20 "$G" decode 1048576 10 index=$k; done
# 4. Sanitizers on prefill 300 with the fp8 index branch (memory, shared-memory races of the cp.async ring).
for t in memcheck racecheck; do run "$t" 40 compute-sanitizer --tool $t --error-exitcode 9 "$G" prefill 300 1 $F; done
summary; exit $rc

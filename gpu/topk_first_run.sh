#!/usr/bin/env bash
# gpu/topk_first_run.sh [OUT_DIR]: first device check of RankTopKThreshold (gpu/index_kernels.cu: the threshold-filtered
# warp-per-row top-k and its split-row form for decode), one call (under 3 min), with THIS branch's binaries laid out as
# gpu/device_check.sh says (BUILD=.devbuild/build-gpu LIBS=.devbuild/lib). Small shapes first with topk=fast, each
# selection compared entry for entry with RankTopK on the same block scores (on a failure: memcheck, stop), then the top-k
# tests and conformance with MSA_GPU_TOPK_KERNEL=fast, timings warp vs fast, sanitizers on small shapes, a summary table.
# Every step runs under `timeout`; DEADLINE (default 175 s) bounds the whole script (steps past it are listed as skipped).
source "$(dirname "$0")/first_run_lib.sh" topk_first_run_out 175 8 "${1:-}"
summary() { python3 - "$O" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
rcs = dict(l.split() for l in open(os.path.join(out, "rc.list"))) if os.path.exists(os.path.join(out, "rc.list")) else {}
print(f"{'run':24} {'rc':>3} {'topk':5} {'splits':>6} {'topk ms':>10} {'index ms':>10} {'check':9} {'diff':>5} {'bad rows':>8}")
for f in sorted(glob.glob(os.path.join(out, "*.txt"))):
    name = os.path.basename(f)[:-4]
    d = ([json.loads(l) for l in open(f, errors="replace") if l.startswith("{")] or [None])[-1]
    if d and "topk_ms" in d:
        print(f"{name:24} {rcs.get(name, '?'):>3} {d.get('topk_kernel', '?'):5} {d.get('topk_splits', 0):6} "
              f"{d['topk_ms']:10.4f} {d['index_ms']:10.3f} {d.get('topk_check', '?'):9} {d.get('topk_diff_entries', -1):5} "
              f"{d['bad_selection_rows']:8}")
    else:
        lines = [l.strip() for l in open(f, errors="replace") if "PASSED" in l or "FAILED" in l or "ERROR SUMMARY" in l]
        print(f"{name:24} {rcs.get(name, '?'):>3} {' | '.join(lines[-3:]) or '(see ' + name + '.txt)'}")
skipped = [n for n, r in rcs.items() if r == "skipped"]
if skipped: print("skipped (deadline):", " ".join(skipped))
ms = {}
for f in glob.glob(os.path.join(out, "*_warp.txt")) + glob.glob(os.path.join(out, "*_fast.txt")):
    d = ([json.loads(l) for l in open(f, errors="replace") if l.startswith("{")] or [None])[-1]
    if d and d.get("topk_ms", 0) > 0: ms[os.path.basename(f)[:-4]] = d["topk_ms"]
for name in sorted(n[:-5] for n in ms if n.endswith("_warp")):
    if name + "_fast" in ms:
        w, t = ms[name + "_warp"], ms[name + "_fast"]
        print(f"speedup {name:22} warp {w:9.4f} ms  fast {t:9.4f} ms  {w / t:6.2f}x")
PY
echo "topk_first_run: rc=$rc, $((SECONDS - T0)) s (outputs in $O)"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; F=topk=fast
# 1. Small shapes, topk=fast, each checked against RankTopK (topk_check). Warp per row: prefill 1000 (4000 rows), prefill
#    300 (1200 rows, 0-2 candidates: take > candidates), decode 8 x 16 queries over 4096 keys. Split rows: 1 query over
#    70000 keys (546 blocks: 3 splits), 2 x 4 queries over 300000 keys (16 rows, 2343 blocks: 10 splits).
run small_prefill 40 "$G" prefill 1000 2 $F; run small_prefill_odd 40 "$G" prefill 300 2 $F
run small_decode 40 "$G" decode 4096 2 batch=8 q_len=16 $F; run small_split 40 "$G" decode 70000 2 $F
run small_split_batch 40 "$G" decode 300000 2 batch=2 q_len=4 $F
[ $rc -eq 0 ] || { run memcheck_split 90 compute-sanitizer --tool memcheck --error-exitcode 9 "$G" decode 70000 1 $F
  run memcheck_prefill 90 compute-sanitizer --tool memcheck --error-exitcode 9 "$G" prefill 300 1 $F; summary; exit 1; }
# 2. The suites with the threshold kernel forced: fast vs warp bit for bit on every max-pooling case and the split / tie /
#    short cases, the tie order vs the FP64 reference, the refusal of an unknown value; conformance vs the oracle.
E="env MSA_GPU_TOPK_KERNEL=fast"
run gpu_tests 90 $E "$B/tests/gpu_backend_test" --gtest_filter='GpuBackend.*TopK*:GpuBackend.LowPrecisionSelectionEquals*' --gtest_brief=1
run conformance 60 $E "$B/tests/conformance_test" --gtest_brief=1
# 3. Timings, warp (RankTopK) then fast (RankTopKThreshold, checked).
for k in warp fast; do run "prefill_131072_$k" 40 "$G" prefill 131072 5 topk=$k; done
for k in warp fast; do run "decode_1m_b1_$k" 40 "$G" decode 1048576 5 topk=$k; done
for k in warp fast; do run "decode_64k_b8_q16_$k" 40 "$G" decode 65536 5 batch=8 q_len=16 topk=$k; done
for k in warp fast; do run "decode_32k_b128_$k" 40 "$G" decode 32768 5 batch=128 topk=$k; done
for k in warp fast; do run "prefill_1048576_$k" 60 "$G" prefill 1048576 2 topk=$k; done
# 4. Sanitizers on a small split shape (the top-k kernels use no shared memory; racecheck covers the bench's other kernels).
for t in memcheck racecheck; do run "$t" 60 compute-sanitizer --tool $t --error-exitcode 9 "$G" decode 70000 1 $F; done
summary; exit $rc

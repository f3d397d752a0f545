#!/usr/bin/env bash
# gpu/wgmma_index_first_run.sh [OUT_DIR]: first device check of BlockMaxScoresWgmma (gpu/block_max_wgmma.cu), one call (~5 min),
# with THIS branch's binaries laid out as gpu/device_check.sh says (BUILD=.devbuild/build-gpu LIBS=.devbuild/lib). Small shapes
# first, each compared bit for bit with BlockMaxScores (on a failure: memcheck, stop), then the suites with the index kernel
# forced (vs the FP64 oracle, and the forced-kernel test vs mma bit for bit), timings vs mma.sync, sanitizers.
set -uo pipefail; cd "$(dirname "$0")/.."; B=${BUILD:-.devbuild/build-gpu}; O=${1:-${OUT:-$PWD/wgmma_index_first_run_out}}; mkdir -p "$O"; rc=0; G=$B/gpu/gpu_bench
[ -n "${LIBS:-}" ] && export LD_LIBRARY_PATH="$(cd "$LIBS" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
run() { local n=$1 t=$2; shift 2; echo "=== $n: $*"; timeout "$t" "$@" >"$O/$n.txt" 2>&1; local r=$?
  tail -n 2 "$O/$n.txt" | cut -c1-400; echo "=== $n rc=$r"; [ $r -eq 0 ] || rc=1; }
summary() { python3 - "$O" <<'PY'
import glob, json, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.txt"))):
    d = ([json.loads(l) for l in open(f) if l.startswith("{")] or [None])[-1]
    if d and "index_kernel" in d:
        tflops = d["index_flops"] / d["index_ms"] / 1e9 if d["index_ms"] > 0 else 0
        print(f"{os.path.basename(f)[:-4]:24} index {d['index_kernel']:5} {d['index_ms']:9.3f} ms {tflops:6.1f} TFLOP/s "
              f"({100 * tflops / 745:4.1f}% of 745)  topk {d['topk_ms']:8.3f} ms  check {d['index_check']} "
              f"({d['index_diff_entries']} differing)  bad rows {d['bad_selection_rows']}")
PY
echo "wgmma_index_first_run: rc=$rc (outputs in $O)"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; W=index=wgmma; E="env MSA_GPU_INDEX_KERNEL=wgmma"
run small_prefill 60 "$G" prefill 1000 2 $W  # index_check: bs bit for bit vs BlockMaxScores on the same inputs
run small_prefill_odd 60 "$G" prefill 300 2 $W; run small_decode 60 "$G" decode 4096 2 batch=8 q_len=16 $W
run small_decode_one 60 "$G" decode 5000 2 batch=2 $W  # 8 rows: the one-warpgroup kernel, a partial last block
[ $rc -eq 0 ] || { run memcheck_small 180 compute-sanitizer --tool memcheck --error-exitcode 9 "$G" prefill 300 1 $W; summary; exit 1; }
run conformance 240 $E "$B/tests/conformance_test" --gtest_brief=1
run gpu_tests 240 $E "$B/tests/gpu_backend_test" --gtest_filter='GpuBackend.LowPrecision*:GpuBackend.*IndexKernel*:GpuBackend.Decode*' --gtest_brief=1
for n in 32768 131072; do for k in mma wgmma; do run "prefill_${n}_$k" 150 "$G" prefill $n 5 index=$k; done; done
for k in mma wgmma; do run "decode_$k" 90 "$G" decode 65536 5 batch=8 q_len=16 index=$k; done
for t in memcheck racecheck synccheck; do run "$t" 150 compute-sanitizer --tool $t --error-exitcode 9 "$G" prefill 300 1 $W; done
summary; exit $rc

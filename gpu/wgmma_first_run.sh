#!/usr/bin/env bash
# gpu/wgmma_first_run.sh [OUT_DIR]: first device check of KvOuterAttendWgmma (gpu/kv_outer_wgmma.cu), one call (~6 min), with
# THIS branch's binaries laid out as gpu/device_check.sh says (BUILD=.devbuild/build-gpu LIBS=.devbuild/lib). Small shapes
# first (on a failure: memcheck, stop), then the forced suites vs the FP64 oracle, timings vs KV-outer, sanitizers.
set -uo pipefail; cd "$(dirname "$0")/.."; B=${BUILD:-.devbuild/build-gpu}; O=${1:-${OUT:-$PWD/wgmma_first_run_out}}; mkdir -p "$O"; rc=0; G=$B/gpu/gpu_bench
[ -n "${LIBS:-}" ] && export LD_LIBRARY_PATH="$(cd "$LIBS" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
run() { local n=$1 t=$2; shift 2; echo "=== $n: $*"; timeout "$t" "$@" >"$O/$n.txt" 2>&1; local r=$?
  tail -n 2 "$O/$n.txt" | cut -c1-400; echo "=== $n rc=$r"; [ $r -eq 0 ] || rc=1; }
summary() { python3 - "$O" <<'PY'
import glob, json, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.txt"))):
    d = ([json.loads(l) for l in open(f) if l.startswith("{")] or [None])[-1]
    if d: print(f"{os.path.basename(f)[:-4]:28} {d['main_kernel']:15} main {d['main_ms']:9.3f} ms graph {d['main_graph_ms']:9.3f} ms  vs kv-outer out {d['out_diff_vs_kvouter']:.1e} lse {d['lse_diff_vs_kvouter']:.1e}  vs q-outer out {d['out_diff_vs_qouter']:.1e}  {d['wgmma_check']}")
PY
echo "wgmma_first_run: rc=$rc (outputs in $O)"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; W=main=kv-outer-wgmma; E="env MSA_GPU_ATTEND_KERNEL=kv-outer-wgmma"
run small_prefill 60 "$G" prefill 1000 2 $W  # wgmma_check: out / lse vs KvOuterAttend on the same lists
run small_decode 60 "$G" decode 4096 2 batch=8 q_len=16 $W; run small_prefill_odd 60 "$G" prefill 300 2 $W
[ $rc -eq 0 ] || { run memcheck_small 180 compute-sanitizer --tool memcheck --error-exitcode 9 "$G" prefill 300 1 $W; summary; exit 1; }
run conformance 240 $E "$B/tests/conformance_test" --gtest_brief=1
run gpu_tests 240 $E "$B/tests/gpu_backend_test" --gtest_filter='GpuBackend.LowPrecision*:GpuBackend.Decode*:GpuProperty.*' --gtest_brief=1
for n in 32768 131072; do for m in kv-outer kv-outer-wgmma; do run "prefill_${n}_$m" 150 "$G" prefill $n 5 main=$m; done; done
for m in kv-outer kv-outer-wgmma; do run "decode_$m" 90 "$G" decode 65536 5 batch=8 q_len=16 main=$m; done
for t in memcheck racecheck synccheck; do run "$t" 150 compute-sanitizer --tool $t --error-exitcode 9 "$G" prefill 300 1 $W; done
summary; exit $rc

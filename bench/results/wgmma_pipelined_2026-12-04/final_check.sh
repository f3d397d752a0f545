#!/usr/bin/env bash
# bench/results/wgmma_pipelined_2026-12-04/final_check.sh (run 4, kept with its results): the commit's binaries in one
# device call: union-tile-ws = union-tile and routed's rows (gpu_union_tile_test); the wgmma plans of path K (first S
# wgmma now declared write-only) and of path U against the FP64 reference and their twins (gpu_plans_test); the twins;
# the conformance suite's gpu cases; memcheck, racecheck and synccheck on union-tile-ws and routed prefills; then an
# A/B against BIN/gpu_bench_base (main before the change) of kv-outer-wgmma-p16 at the 128K prefill.
# Binaries as scripts/device/kernel_check.sh (BIN, LIBS). Usage: final_check.sh OUT_DIR
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT_DIR=$1
BIN=$(cd "${BIN:-.devbuild/union/bin}" && pwd)
export LD_LIBRARY_PATH=$(cd "${LIBS:-.devbuild/union/lib}" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p "$OUT_DIR"
verdict() { grep -E '^\[  (PASSED|FAILED) |bit for bit|plans run|^(routed|device route)' "$1" | tr '\n' ' '; }
timeout 90 "$BIN/gpu_union_tile_test" >"$OUT_DIR/union.log" 2>&1
echo "gpu_union_tile_test exit $?: $(verdict "$OUT_DIR/union.log")"
for m in "attend=kv-outer-wgmma:bf16" "attend=union-tile:fp16"; do
  MSA_GPU_PLANS_MATCHING=${m%%:*} timeout 150 "$BIN/gpu_plans_test" --gtest_filter="Precisions/GpuPlans.*/${m##*:}" \
    >"$OUT_DIR/plans_${m##*=}.log" 2>&1
  echo "gpu_plans_test $m exit $?: $(verdict "$OUT_DIR/plans_${m##*=}.log")"
done
timeout 90 "$BIN/gpu_twins_test" --gtest_filter='*DirectKvLists*:*SplitK*:*LowPrecisionOnLocalBlocks*' >"$OUT_DIR/twins.log" 2>&1
echo "twins exit $?: $(verdict "$OUT_DIR/twins.log")"
timeout 60 "$BIN/conformance_test" --gtest_filter='*/gpu_bf16_*:*/gpu_fp16_*' >"$OUT_DIR/conformance.log" 2>&1
echo "conformance gpu exit $?: $(verdict "$OUT_DIR/conformance.log")"
for plan in attend=union-tile-ws attend=routed; do
  for tool in memcheck racecheck synccheck; do
    n=4096
    [ $tool = racecheck ] && n=1024
    log="$OUT_DIR/${tool}_${plan#attend=}.log"
    timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 "$BIN/gpu_bench" prefill $n 1 $plan >"$log" 2>&1
    echo "$tool $plan prefill $n exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -n 1)"
  done
done
PLANS="attend=kv-outer-wgmma-p16" SELECTIONS=random ROUNDS=2 REPS=5 scripts/device/ab_bench.sh 2>&1 | tee "$OUT_DIR/ab_p16.log" |
  grep -E 'A / B|bad rows [1-9]'

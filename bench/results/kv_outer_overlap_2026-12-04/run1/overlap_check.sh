#!/usr/bin/env bash
# bench/results/kv_outer_overlap_2026-12-04/run1/overlap_check.sh (the script of run 1, kept with its results): path K
# with S of the next tile issued before this tile's softmax, in one short device call: kv-outer-wgmma still gives
# kv-outer's bits (twins), the wgmma plans against the FP64 reference (gpu_plans_test, bf16), routed's K rows (union
# tile test), the conformance suite under auto, the sanitizers on a p16 prefill, then an interleaved A/B of two
# gpu_bench builds (BIN/gpu_bench: this commit; BIN/gpu_bench_base: the commit before) on the 128K prefill's main
# branch. Binaries as scripts/device/kernel_check.sh (BIN, LIBS). Usage: OUT_DIR.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
OUT_DIR=$1
BIN=$(cd "${BIN:-.devbuild/union/bin}" && pwd)
export LD_LIBRARY_PATH=$(cd "${LIBS:-.devbuild/union/lib}" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p "$OUT_DIR"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
fields() { grep -o '"plan": "[^"]*"\|"main_ms": [0-9.]*\|"index_ms": [0-9.]*\|"topk_ms": [0-9.]*\|"gemm_tflops": [0-9.]*\|"nonfinite_outputs": [0-9]*' | tr '\n' ' '; echo; }
verdict() { grep -E '^\[  (PASSED|FAILED) |^(routed|device route)' "$1" | tr '\n' ' '; }
timeout 60 "$BIN/gpu_twins_test" --gtest_filter='*DirectKvLists*:*SplitK*:*LowPrecisionOnLocalBlocks*' >"$OUT_DIR/twins.log" 2>&1
echo "twins exit $?: $(verdict "$OUT_DIR/twins.log")"
MSA_GPU_PLANS_MATCHING=attend=kv-outer-wgmma timeout 150 "$BIN/gpu_plans_test" --gtest_filter='Precisions/GpuPlans.*/bf16' >"$OUT_DIR/plans_bf16.log" 2>&1
echo "gpu_plans_test bf16 kv-outer-wgmma* exit $?: $(verdict "$OUT_DIR/plans_bf16.log") $(grep -i 'plans' "$OUT_DIR/plans_bf16.log" | tail -n 1)"
timeout 60 "$BIN/gpu_union_tile_test" >"$OUT_DIR/union.log" 2>&1
echo "gpu_union_tile_test exit $?: $(verdict "$OUT_DIR/union.log")"
timeout 60 "$BIN/conformance_test" --gtest_filter='*/gpu_bf16_*:*/gpu_fp16_*' >"$OUT_DIR/conformance.log" 2>&1
echo "conformance gpu exit $?: $(verdict "$OUT_DIR/conformance.log")"
timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/gpu_bench" prefill 4096 1 attend=kv-outer-wgmma-p16 >"$OUT_DIR/memcheck.log" 2>&1
echo "memcheck p16 prefill 4096 exit $?: $(tail -n 1 "$OUT_DIR/memcheck.log")"
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/gpu_bench" prefill 1024 1 attend=kv-outer-wgmma-p16 >"$OUT_DIR/racecheck.log" 2>&1
echo "racecheck p16 prefill 1024 exit $?: $(tail -n 1 "$OUT_DIR/racecheck.log")"
timeout 40 compute-sanitizer --tool synccheck --error-exitcode 9 "$BIN/gpu_bench" prefill 4096 1 attend=kv-outer-wgmma-p16 >"$OUT_DIR/synccheck.log" 2>&1
echo "synccheck p16 prefill 4096 exit $?: $(tail -n 1 "$OUT_DIR/synccheck.log")"
for round in 1 2; do
  for build in gpu_bench gpu_bench_base; do
    for plan in attend=kv-outer-wgmma-p16 attend=kv-outer-wgmma; do
      echo "$build round $round: $(timeout 40 "$BIN/$build" prefill 131072 5 selection=random $plan 2>&1 | fields)"
    done
  done
done
echo "auto 128K indexer: $(timeout 40 "$BIN/gpu_bench" prefill 131072 5 2>&1 | fields)"

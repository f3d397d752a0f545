#!/usr/bin/env bash
# bench/results/wgmma_pipelined_2026-12-04/check.sh (runs 1 and 2, kept with their results; the binaries had
# three_warpgroups.patch and read_only_softmax.patch applied): in one device call, union-tile-ws with its
# wgmma instructions pipelined and the three-warpgroup path K (attend=kv-outer-wgmma-3wg):
#   correctness  union-tile-ws = union-tile and routed's rows (gpu_union_tile_test); kv-outer-wgmma-3wg against the
#                FP64 reference and bit for bit against kv-outer-wgmma-p16 (gpu_plans_test, bf16 and fp16); the
#                twins; the conformance suite's gpu cases; memcheck, racecheck, synccheck on 3wg and union-tile-ws
#   speed        an interleaved A/B of this build's gpu_bench against BIN/gpu_bench_base (main before the change) on
#                the 128K prefill's main branch (routed and union-tile-ws: random, overlap90, last), then, in this
#                build, kv-outer-wgmma-3wg against kv-outer-wgmma-p16 (prefills and decode batches)
# Binaries as scripts/device/kernel_check.sh (BIN, LIBS). Usage: check.sh OUT_DIR [PART] (PART: all, checks, speed).
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT_DIR=$1 PART=${2:-all}
BIN=$(cd "${BIN:-.devbuild/union/bin}" && pwd)
export LD_LIBRARY_PATH=$(cd "${LIBS:-.devbuild/union/lib}" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p "$OUT_DIR"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
verdict() { grep -E '^\[  (PASSED|FAILED) |^\[  SKIPPED|bit for bit|^(routed|device route)' "$1" | tr '\n' ' '; }
field() { grep -o "\"$1\": [0-9.]*" | head -n 1 | awk '{print $2}'; }
if [ "$PART" != speed ]; then
  timeout 90 "$BIN/gpu_union_tile_test" >"$OUT_DIR/union.log" 2>&1
  echo "gpu_union_tile_test exit $?: $(verdict "$OUT_DIR/union.log")"
  for p in bf16 fp16; do
    MSA_GPU_PLANS_MATCHING=attend=kv-outer-wgmma- timeout 150 "$BIN/gpu_plans_test" --gtest_filter="Precisions/GpuPlans.*/$p" \
      >"$OUT_DIR/plans_$p.log" 2>&1
    echo "gpu_plans_test $p attend=kv-outer-wgmma-* exit $?: $(verdict "$OUT_DIR/plans_$p.log") $(grep -i 'plans' "$OUT_DIR/plans_$p.log" | tail -n 2 | tr '\n' ' ')"
  done
  timeout 60 "$BIN/gpu_twins_test" --gtest_filter='*DirectKvLists*:*SplitK*:*LowPrecisionOnLocalBlocks*' >"$OUT_DIR/twins.log" 2>&1
  echo "twins exit $?: $(verdict "$OUT_DIR/twins.log")"
  timeout 60 "$BIN/conformance_test" --gtest_filter='*/gpu_bf16_*:*/gpu_fp16_*' >"$OUT_DIR/conformance.log" 2>&1
  echo "conformance gpu exit $?: $(verdict "$OUT_DIR/conformance.log")"
  for plan in attend=kv-outer-wgmma-3wg attend=union-tile-ws; do
    for tool in memcheck racecheck synccheck; do
      n=4096
      [ $tool = racecheck ] && n=1024
      name=${tool}_${plan#attend=}
      timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 "$BIN/gpu_bench" prefill $n 1 $plan >"$OUT_DIR/$name.log" 2>&1
      echo "$tool $plan prefill $n exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT_DIR/$name.log" | tail -n 1)"
    done
  done
fi
if [ "$PART" != checks ]; then
  PLANS="attend=routed;attend=union-tile-ws" SELECTIONS=random,overlap90,last ROUNDS=2 REPS=5 \
    BIN=$BIN scripts/device/ab_bench.sh 2>&1 | tee "$OUT_DIR/ab_union.log" | grep -E '^==|A / B'
  run() {  # LABEL ARGS...: main_ms (prefill) or step_stream_ms (decode) of one gpu_bench run
    local key=main_ms
    [ "$2" = decode ] && key=step_stream_ms
    local out
    out=$(timeout 60 "$BIN/gpu_bench" "${@:2}" 2>&1)
    echo "$out" >>"$OUT_DIR/w3.log"
    echo "$1: $key $(echo "$out" | field $key), main_flops $(echo "$out" | grep -o '"main_flops": [0-9.e+]*' | awk '{print $2}'), $(echo "$out" | grep -o '"plan": "[^"]*"'), bad rows $(echo "$out" | field bad_selection_rows), nonfinite $(echo "$out" | field nonfinite_outputs)"
  }
  for round in 1 2; do
    for plan in attend=kv-outer-wgmma-3wg attend=kv-outer-wgmma-p16; do
      run "prefill 131072 random $plan round $round" prefill 131072 5 selection=random $plan
      run "prefill 131072 overlap90 $plan round $round" prefill 131072 5 selection=overlap90 $plan
    done
  done
  for shape in 128x1x32768 8x16x65536 64x4x16384; do
    IFS=x read -r batch q_len kv <<<"$shape"
    for plan in attend=kv-outer-wgmma-3wg attend=kv-outer-wgmma-p16; do
      run "decode $shape $plan" decode "$kv" 20 "batch=$batch" "q_len=$q_len" $plan
    done
  done
  run "prefill 131072 auto" prefill 131072 5
fi

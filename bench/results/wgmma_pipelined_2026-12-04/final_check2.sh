#!/usr/bin/env bash
# bench/results/wgmma_pipelined_2026-12-04/final_check2.sh (run 5, kept with its results): the committed union-tile-ws
# (main's wgmma.cuh: run 4's binaries also declared the first S wgmma write-only, which cost path K 1.5-2.6%) in one
# device call: gpu_union_tile_test, memcheck and synccheck on a union-tile-ws prefill, then an interleaved A/B against
# BIN/gpu_bench_base (main before the change) of routed and union-tile-ws at the 128K prefill (random, overlap90).
# Binaries as scripts/device/kernel_check.sh (BIN, LIBS). Usage: final_check2.sh OUT_DIR
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT_DIR=$1
BIN=$(cd "${BIN:-.devbuild/union/bin}" && pwd)
export LD_LIBRARY_PATH=$(cd "${LIBS:-.devbuild/union/lib}" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p "$OUT_DIR"
timeout 90 "$BIN/gpu_union_tile_test" >"$OUT_DIR/union.log" 2>&1
echo "gpu_union_tile_test exit $?: $(grep -E '^\[  (PASSED|FAILED) |bit for bit|^(routed|device route)' "$OUT_DIR/union.log" | tr '\n' ' ')"
for tool in memcheck synccheck; do
  timeout 40 compute-sanitizer --tool $tool --error-exitcode 9 "$BIN/gpu_bench" prefill 4096 1 attend=union-tile-ws \
    >"$OUT_DIR/$tool.log" 2>&1
  echo "$tool union-tile-ws prefill 4096 exit $?: $(grep 'ERROR SUMMARY' "$OUT_DIR/$tool.log" | tail -n 1)"
done
PLANS="attend=routed;attend=union-tile-ws" SELECTIONS=random,overlap90 ROUNDS=2 REPS=5 scripts/device/ab_bench.sh 2>&1 |
  tee "$OUT_DIR/ab.log" | grep -E 'A / B|bad rows [1-9]'

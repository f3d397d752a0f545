#!/usr/bin/env bash
# bench/results/kv_outer_p16_2026-12-03/run4/p16_final_check.sh (the script of run 4, kept with its results): auto with kv-outer-wgmma-p16 as path K, in one short device call: the union-tile
# tests (routed's rows = their path's bits), the gpu conformance suite under auto, an interleaved A/B of two gpu_bench
# builds (BIN/gpu_bench and BIN/gpu_bench_oldtiles) on the 128K prefill's main branch, auto's 128K prefill, then
# compute-sanitizer on a routed prefill. Binaries as scripts/device/kernel_check.sh (BIN, LIBS). Usage: OUT_DIR.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
OUT_DIR=$1
BIN=$(cd "${BIN:-.devbuild/union/bin}" && pwd)
export LD_LIBRARY_PATH=$(cd "${LIBS:-.devbuild/union/lib}" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p "$OUT_DIR"
fields() { grep -o '"plan": "[^"]*"\|"main_ms": [0-9.]*\|"index_ms": [0-9.]*\|"topk_ms": [0-9.]*\|"nonfinite_outputs": [0-9]*' | tr '\n' ' '; echo; }
timeout 90 "$BIN/gpu_union_tile_test" >"$OUT_DIR/union.log" 2>&1
echo "gpu_union_tile_test exit $?: $(grep -E '^(routed|device route)|PASSED|FAILED' "$OUT_DIR/union.log" | tr '\n' ' ')"
timeout 60 "$BIN/conformance_test" --gtest_filter='*/gpu_bf16_*:*/gpu_fp16_*' >"$OUT_DIR/conformance.log" 2>&1
echo "conformance gpu exit $?: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT_DIR/conformance.log" | tr '\n' ' ')"
for round in 1 2; do
  for build in gpu_bench gpu_bench_oldtiles; do
    echo "$build round $round: $(timeout 40 "$BIN/$build" prefill 131072 5 selection=random attend=kv-outer-wgmma-p16 2>&1 | fields)"
  done
done
echo "auto 128K indexer: $(timeout 40 "$BIN/gpu_bench" prefill 131072 5 2>&1 | fields)"
timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/gpu_bench" prefill 4096 1 >"$OUT_DIR/memcheck.log" 2>&1
echo "memcheck auto prefill 4096 exit $?: $(tail -n 1 "$OUT_DIR/memcheck.log")"
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/gpu_bench" prefill 1024 1 >"$OUT_DIR/racecheck.log" 2>&1
echo "racecheck auto prefill 1024 exit $?: $(tail -n 1 "$OUT_DIR/racecheck.log")"

#!/usr/bin/env bash
# Run 2's command (kept with its results): attend=routed with MergeKernel's grid a few blocks per SM (rows strided) and
# path K on a side stream, on the H200. gpu_union_tile_test (routed's rows = their path's bits) and gpu_twins_test;
# the conformance suite's gpu cases; memcheck, racecheck and synccheck on a routed prefill; then two interleaved A/Bs
# against main (gpu_bench_base): this build (bin/), and the merge change alone (merge/, no side stream).
# Binaries as scripts/device/kernel_check.sh. Run from the repository root with OUT set.
tar xJf .devbuild/carry/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
B=.devbuild/union/bin
timeout 90 $B/gpu_union_tile_test >$OUT/union.log 2>&1
echo "union exit $?: $(grep -E '^\[  (PASSED|FAILED) |^routed|device route' $OUT/union.log | tr '\n' ' ')"
timeout 60 $B/gpu_twins_test >$OUT/twins.log 2>&1
echo "twins exit $?: $(grep -E '^\[  (PASSED|FAILED) ' $OUT/twins.log | tr '\n' ' ')"
timeout 60 $B/conformance_test --gtest_filter='*/gpu_bf16_*:*/gpu_fp16_*' >$OUT/conformance.log 2>&1
echo "conformance exit $?: $(grep -E '^\[  (PASSED|FAILED) ' $OUT/conformance.log | tr '\n' ' ')"
for tool in memcheck racecheck synccheck; do
  timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu_bench prefill 4096 1 selection=overlap90 \
    attend=routed >$OUT/sanitize_$tool.log 2>&1
  echo "$tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/sanitize_$tool.log | tr '\n' ' ')"
done
for variant in bin merge; do
  echo "== A/B: $variant against main"
  BIN=.devbuild/union/$variant PLANS='attend=routed;attend=kv-outer-wgmma-p16' SELECTIONS=overlap90,random \
    timeout 200 scripts/device/ab_bench.sh 2>&1 | tee $OUT/ab_$variant.log | grep -v '^prefill'
done

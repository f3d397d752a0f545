#!/usr/bin/env bash
# Run 3's command (kept with its results): MergeKernel's grid one wave of blocks (occupancy), rows strided, and path K
# of attend=routed on a side stream, on the H200. gpu_union_tile_test; racecheck on a routed prefill; then interleaved
# A/Bs against main (gpu_bench_base): this build (bin/, the one-wave grid for every plan), and m0/ (the one-wave grid
# for routed only, a block per 8 rows otherwise). Binaries as scripts/device/kernel_check.sh. Run from the
# repository root with OUT set.
tar xJf .devbuild/carry/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
B=.devbuild/union/bin
timeout 90 $B/gpu_union_tile_test >$OUT/union.log 2>&1
echo "union exit $?: $(grep -E '^\[  (PASSED|FAILED) |^routed|device route' $OUT/union.log | tr '\n' ' ')"
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 $B/gpu_bench prefill 4096 1 selection=overlap90 \
  attend=routed >$OUT/racecheck.log 2>&1
echo "racecheck exit $?: $(grep -E 'RACECHECK SUMMARY' $OUT/racecheck.log)"
for variant in bin m0; do
  echo "== A/B: $variant against main"
  BIN=.devbuild/union/$variant PLANS='attend=routed;attend=kv-outer-wgmma-p16' SELECTIONS=overlap90,random \
    timeout 220 scripts/device/ab_bench.sh 2>&1 | tee $OUT/ab_$variant.log | grep -v '^prefill'
done

#!/usr/bin/env bash
# Run 3's command (kept with its results): run 2's code, with path K walking every query in order (no list) where
# every query has a row on K, and the union built with loops that have no data-dependent exit (BuildUnion's
# first-occurrence test, and the device planner's), on the H200: gpu_union_tile_test, routed's graph digest at 8K,
# then an interleaved A/B against main at e9d4333 (gpu_bench_base).
# Binaries as scripts/device/kernel_check.sh. Run from the repository root with OUT set.
tar xJf .devbuild/carry/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
B=.devbuild/union/bin
timeout 60 $B/gpu_union_tile_test >$OUT/union.log 2>&1
echo "union exit $?: $(grep -E '^\[  (PASSED|FAILED) |^routed' $OUT/union.log | tr '\n' ' ')"
for sel in random overlap90; do
  echo "routed 8192 $sel exit $?: $(timeout 40 $B/gpu_bench prefill 8192 3 selection=$sel attend=routed |
    grep -o '"main_ms": [0-9.]*\|"main_graph_ms": [0-9.]*\|"nonfinite_outputs": [0-9]*\|"graph_bits_differ": [0-9]*' |
    tr '\n' ' ')"
done
PLANS='attend=routed;attend=union-tile-ws' SELECTIONS=overlap90 timeout 150 scripts/device/ab_bench.sh 2>&1 |
  tee $OUT/ab_u.log | grep -v '^prefill'
PLANS='attend=routed' SELECTIONS=random timeout 80 scripts/device/ab_bench.sh 2>&1 | tee $OUT/ab_k.log |
  grep -v '^prefill'

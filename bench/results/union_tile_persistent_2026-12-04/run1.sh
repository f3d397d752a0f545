#!/usr/bin/env bash
# Run 1's command (kept with its results): union-tile-ws made persistent (one CTA per multiprocessor; the producer
# warpgroup's three idle warps build the next tile's union while the consumers compute). On the H200: a smoke run,
# gpu_union_tile_test (now with a many-tile case: 350 tiles in this run, its comment said 700), graph digests at 8K,
# an interleaved A/B against main at 8db1df2 (gpu_bench_base: that commit's kernels). Binaries as
# scripts/device/kernel_check.sh. Run from the repository root with OUT set.
tar xJf .devbuild/carry/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
B=.devbuild/union/bin
smoke=$(timeout 30 $B/gpu_bench prefill 8192 2 selection=overlap90 attend=union-tile-ws 2>&1)
echo "smoke exit $?: $(echo "$smoke" | grep -o '"main_ms": [0-9.]*\|"nonfinite_outputs": [0-9]*\|"graph_bits_differ": [0-9]*' | tr '\n' ' ')"
echo "$smoke" | grep -qi 'error' && { echo "$smoke" | tail -5; exit 1; }
timeout 150 $B/gpu_union_tile_test >$OUT/union.log 2>&1
echo "union exit $?: $(grep -E '^\[  (PASSED|FAILED) |^routed|^union' $OUT/union.log | tr '\n' ' ')"
for plan in routed union-tile-ws; do
  for sel in random overlap50 overlap90; do
    echo "$plan 8192 $sel: $(timeout 40 $B/gpu_bench prefill 8192 3 selection=$sel attend=$plan |
      grep -o '"nonfinite_outputs": [0-9]*\|"graph_bits_differ": [0-9]*' | tr '\n' ' ')"
  done
done
PLANS='attend=routed;attend=union-tile-ws' SELECTIONS=overlap90,overlap50 timeout 150 scripts/device/ab_bench.sh 2>&1 |
  tee $OUT/ab_overlap.log | grep -v '^prefill'
PLANS='attend=routed' SELECTIONS=random timeout 60 scripts/device/ab_bench.sh 2>&1 |
  tee $OUT/ab_random.log | grep -v '^prefill'

#!/usr/bin/env bash
# Run 3's command (kept with its results): union-tile-ws persistent with a tile counter (the builders take the next
# list entry from a counter in global memory, zeroed by the launch). On the H200: gpu_union_tile_test, graph digests
# at 8K, an interleaved A/B against main at 8db1df2 (gpu_bench_base). Binaries as scripts/device/kernel_check.sh.
tar xJf .devbuild/carry/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
B=.devbuild/union/bin
timeout 150 $B/gpu_union_tile_test >$OUT/union.log 2>&1
echo "union exit $?: $(grep -E '^\[  (PASSED|FAILED) |^routed|^union' $OUT/union.log | tr '\n' ' ')"
for plan in routed union-tile-ws; do
  for sel in random overlap90 pages; do
    echo "$plan 8192 $sel: $(timeout 40 $B/gpu_bench prefill 8192 3 selection=$sel attend=$plan |
      grep -o '"nonfinite_outputs": [0-9]*\|"graph_bits_differ": [0-9]*' | tr '\n' ' ')"
  done
done
PLANS='attend=union-tile-ws;attend=routed' SELECTIONS=overlap90,pages,overlap50 timeout 220 scripts/device/ab_bench.sh 2>&1 |
  tee $OUT/ab_overlap.log | grep -v '^prefill'
PLANS='attend=routed' SELECTIONS=random timeout 60 scripts/device/ab_bench.sh 2>&1 |
  tee $OUT/ab_random.log | grep -v '^prefill'

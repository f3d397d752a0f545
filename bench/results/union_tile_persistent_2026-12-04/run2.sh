#!/usr/bin/env bash
# Run 2's command (kept with its results): union-tile-ws persistent, warpgroup 1 letting warpgroup 0 start the next
# tile before writing its rows; CTAs per launch swept by an experiment-only variable (MSA_UNION_TILES_PER_CTA: the
# grid is max(SMs, tiles / N) CTAs, 0 = one per SM), against main at 8db1df2 (gpu_bench_base), interleaved, 2 rounds
# of 5 repetitions, 128K prefill main branch. Binaries as scripts/device/kernel_check.sh.
tar xJf .devbuild/carry/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
B=.devbuild/union/bin
timeout 150 $B/gpu_union_tile_test >$OUT/union.log 2>&1
echo "union exit $?: $(grep -E '^\[  (PASSED|FAILED) |^routed|^union' $OUT/union.log | tr '\n' ' ')"
for round in 1 2; do
  for c in "union-tile-ws overlap90" "routed overlap90" "union-tile-ws pages"; do
    set -- $c
    for v in base 1 4 16 0; do
      if [ $v = base ]; then bin=gpu_bench_base; else bin=gpu_bench; fi
      ms=$(MSA_UNION_TILES_PER_CTA=$v timeout 60 $B/$bin prefill 131072 5 selection=$2 attend=$1 2>&1 |
        grep -o '"main_ms": [0-9.]*\|"nonfinite_outputs": [0-9]*\|"graph_bits_differ": [0-9]*' | tr '\n' ' ')
      echo "round $round $1 $2 per_cta=$v: $ms"
    done
  done
done | tee $OUT/sweep.log

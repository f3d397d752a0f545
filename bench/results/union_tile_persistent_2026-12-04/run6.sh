#!/usr/bin/env bash
# Run 6's command (kept with its results): union-tile-ws's producer prefetching K and V into L2 (bulk tensor
# prefetches) 2 (gpu_bench_p2) or 4 (gpu_bench_p4) union blocks ahead of its loads, against e13bc79 without them
# (gpu_bench_base); interleaved, 2 rounds of 5 repetitions, 128K prefill main branch. Binaries as
# scripts/device/kernel_check.sh.
tar xJf .devbuild/carry/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
B=.devbuild/union/bin
for round in 1 2; do
  for c in "union-tile-ws overlap90" "union-tile-ws pages" "union-tile-ws overlap50" "routed overlap90"; do
    set -- $c
    for bin in gpu_bench_base gpu_bench_p2 gpu_bench_p4; do
      ms=$(timeout 60 $B/$bin prefill 131072 5 selection=$2 attend=$1 2>&1 |
        grep -o '"main_ms": [0-9.]*\|"nonfinite_outputs": [0-9]*\|"graph_bits_differ": [0-9]*' | tr '\n' ' ')
      echo "round $round $1 $2 $bin: $ms"
    done
  done
done | tee $OUT/prefetch.log

#!/usr/bin/env bash
# Call 3 of bench/results/synccheck_2026-12-06.md (no carry: it builds from the tree): repro.cu and repro_cluster.cu
# (the same kernel in clusters of 16, as a programmatic dependent, with split-k's opening and closing) built on the
# device, each run three times under compute-sanitizer's synccheck. Reports on repro_cluster and none on repro would
# pin the false reports on clusters with dependent launch, in code that is correct by construction.
set -uo pipefail
for name in repro repro_cluster; do
  nvcc -I. -Iinclude -O3 -gencode=arch=compute_90a,code=sm_90a -std=c++17 --expt-relaxed-constexpr \
    bench/results/synccheck_2026-12-06/$name.cu -o $OUT/$name || { echo "$name: build failed"; continue; }
  for run in 1 2 3; do
    timeout 60 compute-sanitizer --tool synccheck --print-limit 100000 $OUT/$name >$OUT/now.log 2>&1
    echo "$name run $run: exit $?, $(grep -oE 'ERROR SUMMARY: [0-9]+' $OUT/now.log | tail -n 1)," \
      "$(grep -oE '\+0x[0-9a-f]+' $OUT/now.log | sort | uniq -c | tr -s ' ' | head -n 3 | paste -sd' ')," \
      "$(grep -E '^round|^nkeys' $OUT/now.log | paste -sd' ')"
  done
  rm -f $OUT/$name
done
rm -f $OUT/now.log

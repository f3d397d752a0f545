#!/usr/bin/env bash
# Call 4 of bench/results/synccheck_2026-12-06.md (no carry): repro_cluster.cu in its three launch modes (clusters of
# 16 as a programmatic dependent; clusters alone; a dependent alone), each run once plainly (its results checked) and
# three times under synccheck: which of the two launch features the false reports need.
set -uo pipefail
nvcc -I. -Iinclude -O3 -gencode=arch=compute_90a,code=sm_90a -std=c++17 --expt-relaxed-constexpr \
  bench/results/synccheck_2026-12-06/repro_cluster.cu -o $OUT/repro_cluster || { echo "build failed"; exit 1; }
for mode in both cluster dependent; do
  $OUT/repro_cluster $mode >$OUT/now.log 2>&1
  echo "$mode plain: exit $?, $(grep -c ' 0 of ' $OUT/now.log) of 4 rounds right"
  for run in 1 2 3; do
    timeout 60 compute-sanitizer --tool synccheck --print-limit 100000 $OUT/repro_cluster $mode >$OUT/now.log 2>&1
    echo "$mode run $run: exit $?, $(grep -oE 'ERROR SUMMARY: [0-9]+' $OUT/now.log | tail -n 1)," \
      "$(grep -oE '\+0x[0-9a-f]+' $OUT/now.log | sort | uniq -c | tr -s ' ' | head -n 3 | paste -sd' ')"
  done
done
rm -f $OUT/repro_cluster $OUT/now.log

#!/usr/bin/env bash
# Call 2 of bench/results/synccheck_2026-12-06.md (carry .devbuild/carry after scripts/device/build_bundles.sh): the
# same HEAD binaries under synccheck three times each (split-k's twin test, fused-decode's), to see whether the
# divergent-warp reports change from run to run on the same code. Prints each run's error count and flagged blocks.
set -uo pipefail
source scripts/device/head_bundle.sh
for run in 1 2 3; do
  for test in "gpu_twins_test *SplitK*" "gpu_fused_decode_test *Bits*"; do
    set -- $test
    timeout 60 compute-sanitizer --tool synccheck --print-limit 100000 $B/$1 --gtest_filter="$2" >$OUT/now.log 2>&1
    echo "$1 run $run: exit $?, $(grep -oE 'ERROR SUMMARY: [0-9]+' $OUT/now.log | tail -n 1)," \
      "$(grep -oE '\+0x[0-9a-f]+' $OUT/now.log | sort | uniq -c | tr -s ' ' | head -n 3 | paste -sd' ')," \
      "blocks $(grep -oE 'in block \([0-9]+' $OUT/now.log | grep -oE '[0-9]+' | sort -un | head -n 8 | paste -sd' ')"
  done
done
rm -f $OUT/now.log

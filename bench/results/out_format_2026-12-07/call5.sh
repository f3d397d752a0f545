#!/usr/bin/env bash
# Call 5 of bench/results/out_format_2026-12-07.md (carry .devbuild/carry after scripts/device/build_bundles.sh):
# compute-sanitizer racecheck on gpu_out_format_test one main-branch kernel at a time (call 4 ran them all in one
# process and did not finish in 448 s), each with its own limit, so that each one that finishes is a verdict.
set -uo pipefail
source scripts/device/head_bundle.sh
export STEPS_BUDGET=${STEPS_BUDGET:-570}
source scripts/device/steps.sh
for kernel in split_k fused_decode kv_outer_ws union_tile union_tile_ws routed kv_outer_wgmma kv_outer_wgmma_p16 \
  kv_outer q_outer gathered; do
  step race_$kernel ${LIMIT:-50} compute-sanitizer --tool racecheck --error-exitcode 9 $B/gpu_out_format_test \
    --gtest_filter="*/$kernel"
done
# One file back (a call returns at most 8): the logs end to end.
for log in $OUT/race_*.log; do echo "=== $(basename $log)"; tail -n 30 $log; done >$OUT/racecheck_by_kernel.log
rm -f $OUT/race_*.log

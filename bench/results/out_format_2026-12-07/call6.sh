#!/usr/bin/env bash
# Call 6 of bench/results/out_format_2026-12-07.md (carry .devbuild/carry after scripts/device/build_bundles.sh):
# racecheck on split-k, which did not finish in 285 s in call 5. Its test case list starts with a 370-query prefill
# (23,680 one-query CTAs a launch, wide and narrow); the planner takes split-k only for one query per sequence. So
# racecheck here checks only SplitKAttendKernel, from its third launch on: the decode batch and the fp16 case, each in
# both formats. The other kernels run unchecked.
set -uo pipefail
source scripts/device/head_bundle.sh
export STEPS_BUDGET=${STEPS_BUDGET:-200}
source scripts/device/steps.sh
# The filter's syntax, as this compute-sanitizer prints it.
compute-sanitizer --help | grep -E -A2 -- '--(kernel-name|filter|launch-skip|launch-count)' >$OUT/sanitizer_filters.log
filter=(--kernel-name kns=SplitKAttendKernel)
grep -q -- '--kernel-name' $OUT/sanitizer_filters.log || filter=(--filter kns=SplitKAttendKernel)
step race_split_k_decode ${LIMIT:-150} compute-sanitizer --tool racecheck --error-exitcode 9 "${filter[@]}" \
  --launch-skip 2 $B/gpu_out_format_test --gtest_filter='*/split_k'
tail -n 12 $OUT/race_split_k_decode.log

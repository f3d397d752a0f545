#!/usr/bin/env bash
# Call 7 of bench/results/out_format_2026-12-07.md (carry .devbuild/carry after scripts/device/build_bundles.sh): the
# split-k decode step at 4K (gpu_bench writes bf16 out and fp32 lse unless given out=fp64) under the sanitizers, since
# racecheck on split-k's test did not finish (calls 5 and 6): plain, memcheck, racecheck on every kernel, and racecheck
# on SplitKAttendKernel alone (a kernel filter) in both formats. It ran as three commands on one machine.
set -uo pipefail
source scripts/device/head_bundle.sh
export STEPS_BUDGET=${STEPS_BUDGET:-450}
source scripts/device/steps.sh
run=($B/gpu_bench decode 4096 1 attend=split-k)
filter=(--kernel-name kns=SplitKAttendKernel --launch-count 2)
step race_split_k_filtered_bf16 150 compute-sanitizer --tool racecheck --error-exitcode 9 "${filter[@]}" "${run[@]}"
step plain 30 "${run[@]}"
step memcheck 60 compute-sanitizer --tool memcheck --error-exitcode 9 "${run[@]}"
step race_nofilter 120 compute-sanitizer --tool racecheck --error-exitcode 9 "${run[@]}"
step race_fp64 60 compute-sanitizer --tool racecheck --error-exitcode 9 "${filter[@]}" "${run[@]}" out=fp64

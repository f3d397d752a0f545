#!/usr/bin/env bash
# Call 4 of bench/results/out_format_2026-12-07.md (carry .devbuild/carry after scripts/device/build_bundles.sh): the
# racecheck that call 3's deadline cut at 133 s, alone: compute-sanitizer racecheck on gpu_out_format_test (every
# requestable main-branch kernel, both output formats). Its memcheck passed in call 3.
set -uo pipefail
source scripts/device/head_bundle.sh
export STEPS_BUDGET=${STEPS_BUDGET:-570}
source scripts/device/steps.sh
step racecheck 560 compute-sanitizer --tool racecheck --error-exitcode 9 $B/gpu_out_format_test
tail -n 5 $OUT/racecheck.log

#!/usr/bin/env bash
# Call 3 of bench/results/out_format_2026-12-07.md (carry .devbuild/carry after scripts/device/build_bundles.sh): the
# checks call 1 left out for a change of every main-branch store: gpu_plans_test at bf16 (every runnable plan
# against the FP64 reference under the oracle, claimed twins bit for bit: the backend's FP64 stores), then
# compute-sanitizer memcheck and racecheck on gpu_out_format_test (every requestable main-branch kernel, both formats).
set -uo pipefail
source scripts/device/head_bundle.sh
BIN=$B LIBS=.devbuild/union/lib SANITIZE="gpu_out_format_test:*" TESTS="gpu_plans_test:*bf16*" \
  DEADLINE=${DEADLINE:-540} bash scripts/device/kernel_check.sh "$OUT"

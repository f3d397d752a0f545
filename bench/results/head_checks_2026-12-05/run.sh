#!/usr/bin/env bash
# bench/results/head_checks_2026-12-05.md: HEAD's device tests on an H200 after this session's changes (the chunk
# budget, the bundles), with carry .devbuild/carry (build_bundles.sh's head bundle): the low-precision tests of a
# block of -inf scores and of overflowing scores, the kernel twins, path U's property test, then the low-precision
# oracle on every case.
set -uo pipefail
source scripts/device/head_bundle.sh
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,memory.total --format=csv,noheader
source scripts/device/steps.sh
step lowp_overflow 40 $B/gpu_lowp_test --gtest_filter='*Overflow*:*Weighs*'
grep -E 'main-branch runs' $OUT/lowp_overflow.log
step twins 150 $B/gpu_twins_test
grep -E 'bit-identical' $OUT/twins.log
step union_tile_test 100 $B/gpu_union_tile_test
step lowp_every_case 150 $B/gpu_lowp_test --gtest_filter='*OnEveryCase*:*GatheredAttendRuns*:*ExactlyTied*'

#!/usr/bin/env bash
# Calls 4 to 6 of the targets run (bench/results/targets_2026-12-05.md), on the same warm H100 after call 3, kept as
# one script (each call ran one line of steps): sanitizers and plans that cover the kernels the commit under test
# changed (the mma.sync tiles, split-k, the 16-bit partials), on HEAD's binaries.
set -uo pipefail
source scripts/device/head_bundle.sh
source scripts/device/steps.sh
# call 4 (STEPS_BUDGET=420)
step memcheck_overflow 120 compute-sanitizer --tool memcheck $B/gpu_lowp_test --gtest_filter='*Weighs*'
step racecheck_decode_512 240 compute-sanitizer --tool racecheck $B/gpu_bench decode 512 1
# call 5 (STEPS_BUDGET=440)
step synccheck_decode_512 60 compute-sanitizer --tool synccheck $B/gpu_bench decode 512 1
step racecheck_overflow 150 compute-sanitizer --tool racecheck $B/gpu_lowp_test --gtest_filter='*Weighs*'
MSA_GPU_PLANS_MATCHING='attend=kv-outer-wgmma-p16' step plans_p16 200 $B/gpu_plans_test
# call 6 (STEPS_BUDGET=320)
MSA_GPU_PLANS_MATCHING='attend=routed' step plans_routed 190 $B/gpu_plans_test
step lowp_every_case 120 $B/gpu_lowp_test --gtest_filter='*OnEveryCase*:*GatheredAttendRuns*:*ExactlyTied*'

#!/usr/bin/env bash
# Call 1 of bench/results/running_topk_2026-12-07.md (carry .devbuild/carry after scripts/device/build_bundles.sh; an
# H100 or an H200), most wanted first, each step skipped where the budget has no room for it:
#   plans     gpu_plans_test at bf16 on the plans with attend kv-outer-wgmma and kv-outer-wgmma-p16, which fit
#             every max-pooling case of the test (kv-outer-ws needs groups of 8 or more, which none of them has):
#             every top-k among them, so topk=running is compared bit for bit with topk=warp (its claimed twin) on
#             every case, besides the oracle;
#   index     the index branch at 128K and 1M, auto (threshold) against topk=running in the same run, interleaved:
#             index, top-k and their sum, and whether the outputs keep their bits (the same selections);
#   memcheck  compute-sanitizer memcheck on a 32K prefill with topk=running;
#   prefill   the 1M prefill target under topk=running against torch SDPA (bench/gpu_bench.py);
#   racecheck compute-sanitizer racecheck on the 32K prefill.
set -uo pipefail
source scripts/device/head_bundle.sh
export COMMIT=${COMMIT:-unknown} PYTHONUNBUFFERED=1 STEPS_BUDGET=${STEPS_BUDGET:-560}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
source scripts/device/steps.sh
plan_bench gpu_bench_running topk=running
step plans 240 env MSA_GPU_PLANS_MATCHING=attend=kv-outer-wgmma $B/gpu_plans_test --gtest_filter='*bf16*'
step index 150 python3 bench/gpu_index_bench.py --bins auto=$B/gpu_bench,running=$B/gpu_bench_running --out $OUT \
  --prefill 131072,1048576 --decode '' --rounds 1 --reps 2 --tag running
grep -E '^\| prefill' $OUT/index.log
step memcheck 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu_bench prefill 32768 1 topk=running
step prefill 200 env MSA_GPU_PLAN=topk=running python3 bench/gpu_bench.py --bin $B/gpu_bench --out $OUT \
  --prefill 1048576 --sdpa 1048576 --flex '' --decode '' --decode-batched '' --qouter '' --fp8 '' --fp8-decode '' \
  --deadline 190
grep -E '^\| 1048576' $OUT/prefill.log | tail -n 1
step racecheck 90 compute-sanitizer --tool racecheck --error-exitcode 9 $B/gpu_bench prefill 32768 1 topk=running

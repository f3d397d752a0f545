#!/usr/bin/env bash
# Call 2 of bench/results/running_topk_2026-12-07.md (carry .devbuild/carry after scripts/device/build_bundles.sh; an
# H100 or an H200): the running lists padded by one key (no bank conflicts among a warp's inserting lanes), against
# auto in the same run, most wanted first:
#   index     the index branch at 128K and 1M, auto against topk=running, interleaved: index, top-k, their sum and
#             whether the outputs keep their bits;
#   ncu       Nsight Compute on the 32K prefill's index kernel, auto and running: time, instructions, shared-memory
#             wavefronts (the excess that call 1's profile showed);
#   plans     gpu_plans_test at bf16 on the kv-outer-wgmma plans (running against its warp twin, and the oracle).
set -uo pipefail
source scripts/device/head_bundle.sh
export COMMIT=${COMMIT:-unknown} PYTHONUNBUFFERED=1 STEPS_BUDGET=${STEPS_BUDGET:-300}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
source scripts/device/steps.sh
plan_bench gpu_bench_running topk=running
step index 120 python3 bench/gpu_index_bench.py --bins auto=$B/gpu_bench,running=$B/gpu_bench_running --out $OUT \
  --prefill 131072,1048576 --decode '' --rounds 1 --reps 2 --tag running_padded
grep -E '^\| prefill' $OUT/index.log
for p in auto running; do
  step ncu_$p 40 ncu --clock-control none -k regex:BlockMax --launch-count 1 --section SpeedOfLight \
    --section InstructionStats --section MemoryWorkloadAnalysis_Tables $B/gpu_bench prefill 32768 1 topk=$p
  grep -E '^ +Duration|Executed Instructions  |excessive wavefronts' $OUT/ncu_$p.log
done
step plans 120 env MSA_GPU_PLANS_MATCHING=attend=kv-outer-wgmma $B/gpu_plans_test --gtest_filter='*bf16*'

#!/usr/bin/env bash
# Call 1 of bench/results/kv_outer_ws_2026-12-06.md (carry .devbuild/carry after scripts/device/build_bundles.sh at
# the commit that added attend=kv-outer-ws): whether kv-outer-ws gives kv-outer-wgmma-p16's bits (the twin test,
# then every runnable plan of both under the oracle), then the 128K prefill's main branch under both plans on random
# and 90%-overlap selections, in the same run (bench/gpu_selection_bench.py: its GEMM ceiling measured there too).
set -uo pipefail
source scripts/device/head_bundle.sh
export COMMIT=${COMMIT:-unknown} PYTHONUNBUFFERED=1 STEPS_BUDGET=${STEPS_BUDGET:-560}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
source scripts/device/steps.sh
step twins 90 $B/gpu_twins_test --gtest_filter='*WarpSpecialized*'
grep -E "bit-identical|Failure|ws_twin" $OUT/twins.log | head -n 8
step plans 150 env MSA_GPU_PLANS_MATCHING="attend=kv-outer-w" $B/gpu_plans_test
grep -E "Failure|vs its twin" $OUT/plans.log | head -n 6
step selection 260 python3 bench/gpu_selection_bench.py --bin $B/gpu_bench --out $OUT --prefill 131072 \
  --plans "attend=kv-outer-wgmma-p16;attend=kv-outer-ws" --selections random,overlap90 --reps 3 --tag ws
tail -n 12 $OUT/selection.log

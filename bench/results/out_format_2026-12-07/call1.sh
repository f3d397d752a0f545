#!/usr/bin/env bash
# Call 1 of bench/results/out_format_2026-12-07.md (carry .devbuild/carry after scripts/device/build_bundles.sh): the
# two output formats' test, the twin and oracle tests the change of every main-branch store touches, then the 128K
# prefill's main branch under routed writing FP64 (the format before) and bf16 out with fp32 lse, on three selections,
# against torch SDPA and the bf16 GEMM ceiling measured in the same run.
set -uo pipefail
source scripts/device/head_bundle.sh
export COMMIT=${COMMIT:-unknown} PYTHONUNBUFFERED=1 STEPS_BUDGET=${STEPS_BUDGET:-570}
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader
source scripts/device/steps.sh
step out_format 60 $B/gpu_out_format_test
grep -E "runs,|Failure|PASSED|FAILED" $OUT/out_format.log | head -n 6
step fused 30 $B/gpu_fused_decode_test
step twins 60 $B/gpu_twins_test --gtest_filter='*SplitK*:*WarpSpecialized*:*DirectKvLists*'
step union 60 $B/gpu_union_tile_test
step lowp 120 $B/gpu_lowp_test
step selection 230 python3 bench/gpu_selection_bench.py --bin $B/gpu_bench --out $OUT --prefill 131072 \
  --plans "attend=routed,out=fp64;attend=routed" --selections indexer:random,random,overlap90 --reps 3 --sdpa \
  --tag out_format
grep -E '^\| 131072|SDPA|ceiling' $OUT/selection.log | head -n 10

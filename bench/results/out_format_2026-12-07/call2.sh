#!/usr/bin/env bash
# Call 2 of bench/results/out_format_2026-12-07.md (carry .devbuild/carry after scripts/device/build_bundles.sh): call
# 1 for a short device budget, without the 1M prefill and the decode targets: the output formats' test, the twin tests
# that the change of every main-branch store touches, then the 128K routed main branch writing FP64 and bf16 out.
set -uo pipefail
source scripts/device/head_bundle.sh
export COMMIT=${COMMIT:-unknown} PYTHONUNBUFFERED=1 STEPS_BUDGET=${STEPS_BUDGET:-300}
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader
source scripts/device/steps.sh
step out_format 60 $B/gpu_out_format_test
grep -E "runs,|Failure" $OUT/out_format.log | head -n 6
step fused 30 $B/gpu_fused_decode_test
step twins 60 $B/gpu_twins_test --gtest_filter='*SplitK*:*WarpSpecialized*:*DirectKvLists*'
step union 60 $B/gpu_union_tile_test
step selection 150 python3 bench/gpu_selection_bench.py --bin $B/gpu_bench --out $OUT --prefill 131072 \
  --plans "attend=routed,out=fp64;attend=routed" --selections random,overlap90 --reps 3 --tag out_format
grep -E '^\| 131072|ceiling' $OUT/selection.log | head -n 8

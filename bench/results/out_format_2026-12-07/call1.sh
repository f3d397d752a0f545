#!/usr/bin/env bash
# Call 1 of bench/results/out_format_2026-12-07.md (carry .devbuild/carry after scripts/device/build_bundles.sh), most
# wanted first, each step skipped where the budget has no room for it: the output formats' test; the 1M prefill
# against torch SDPA (bf16 out: 16 GiB, where FP64 out alone is 64 GiB); the 128K routed main branch writing FP64 and
# bf16 out; the twin and oracle tests that the change of every main-branch store touches; then the decode targets.
set -uo pipefail
source scripts/device/head_bundle.sh
export COMMIT=${COMMIT:-unknown} PYTHONUNBUFFERED=1 STEPS_BUDGET=${STEPS_BUDGET:-570}
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader
source scripts/device/steps.sh
step out_format 60 $B/gpu_out_format_test
grep -E "runs,|Failure" $OUT/out_format.log | head -n 6
step prefill_1m 240 python3 bench/gpu_bench.py --bin $B/gpu_bench --out $OUT --prefill 1048576 --sdpa 1048576 \
  --flex '' --decode '' --decode-batched '' --qouter '' --fp8 '' --fp8-decode '' --deadline 230
grep -E '^\| 1048576' $OUT/prefill_1m.log | tail -n 2
step selection 150 python3 bench/gpu_selection_bench.py --bin $B/gpu_bench --out $OUT --prefill 131072 \
  --plans "attend=routed,out=fp64;attend=routed" --selections indexer:random,random,overlap90 --reps 3 --sdpa \
  --tag out_format
grep -E '^\| 131072|SDPA|ceiling' $OUT/selection.log | head -n 10
step fused 30 $B/gpu_fused_decode_test
step twins 60 $B/gpu_twins_test --gtest_filter='*SplitK*:*WarpSpecialized*:*DirectKvLists*'
step union 60 $B/gpu_union_tile_test
step lowp 120 $B/gpu_lowp_test
step decode 100 python3 bench/gpu_decode_bench.py --bin $B/gpu_bench --out $OUT \
  --shapes 1x1x4096,1x1x262144,1x1x1048576,8x16x65536,128x1x32768 --tag targets
tail -n 8 $OUT/decode.log

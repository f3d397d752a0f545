#!/usr/bin/env bash
# Call 1 of the targets run (bench/results/targets_2026-12-05.md), HEAD's binaries (build_bundles.sh's head bundle):
# first the checks of the commit under test (a block whose scores all overflow to -inf; the kernel twins, kv-outer =
# kv-outer-wgmma = split-k bit for bit; path U's property test), then the decode targets against the copy ceiling
# measured in the same call: the step at batch 1 (4K, 256K, 1M) and at batch >= 8, and the batch-1 step at 4K, 16K
# and 256K with the mma.sync index kernel, the warp top-k or kv-outer-wgmma in place of auto's choice.
set -uo pipefail
source scripts/device/head_bundle.sh
export COMMIT=${COMMIT:-unknown} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader
source scripts/device/steps.sh
step lowp_overflow 40 $B/gpu_lowp_test --gtest_filter='*Overflow*:*Weighs*'
grep -E 'main-branch runs|Failure|FAILED' $OUT/lowp_overflow.log | head -n 12
step twins 140 $B/gpu_twins_test
step union_tile_test 90 $B/gpu_union_tile_test
step decode 150 python3 bench/gpu_decode_bench.py --bin $B/gpu_bench --out $OUT \
  --shapes 1x1x4096,1x1x262144,1x1x1048576,8x16x65536,128x1x32768 --tag targets
tail -n 12 $OUT/decode.log
step decode_plans 100 python3 bench/gpu_decode_bench.py --bin $B/gpu_bench --out $OUT \
  --shapes 1x1x4096,1x1x16384,1x1x262144 --plans 'attend=auto;index=mma;topk=warp;attend=kv-outer-wgmma' --tag plans
tail -n 14 $OUT/decode_plans.log

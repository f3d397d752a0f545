#!/usr/bin/env bash
# Prepared for the next device session (not run yet): bench/results/topk_cta_table_2026-12-05.md. Carry
# .devbuild/carry after scripts/device/build_bundles.sh (its variant `table`). RankTopKCta's group maxima through a
# [warps][32] table (A: table/bin/gpu_bench) against the shared 64-bit atomicMax (B: table/bin/gpu_bench_base, HEAD):
# the top-k twins (topk=cta against warp), then the decode step A/B, interleaved.
source scripts/device/head_bundle.sh
tar xJf .devbuild/carry/table.tar.xz
T=.devbuild/table/bin
export PYTHONUNBUFFERED=1 STEPS_BUDGET=400
source scripts/device/steps.sh
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
step twins 120 $T/gpu_twins_test --gtest_filter='*WarpTwinTopK*:*BatchedDecode*'
grep -E "runs compared" $OUT/twins.log
step ab 200 env BIN=$T LIBS=.devbuild/union/lib PLANS= DECODE_SHAPES=1x1x65536,1x1x262144,1x1x1048576,8x1x262144 \
  ROUNDS=3 LIMIT=190 scripts/device/ab_bench.sh
sed -n '/== A \/ B/,$p' $OUT/ab.log

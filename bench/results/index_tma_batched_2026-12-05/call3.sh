#!/usr/bin/env bash
# Call 3 of bench/results/index_tma_batched_2026-12-05.md (carry .devbuild/carry after scripts/device/build_bundles.sh):
# call 1 found the batched chunk's bulk copies faster where a one-warpgroup CTA takes few key blocks (256K: 16,
# 8 x 16 x 64K: 31) and slower where it takes many (1M: 63, 128 x 1 x 32K: 128). batched_rule.patch takes them only
# for CTAs of at most 32 blocks (BulkCopiesPay). First that rule against HEAD on call 1's shapes and on shapes
# either side of the rule's bound (512K and 2 x 256K: 32 blocks; 768K: 47), then the unconditional bulk copies
# (call 1's A) against HEAD on those new shapes, then the index twins on the rule's build. Call 2 ran on an H100;
# this is call 2 again for an H200, with two more A/Bs of the rule against HEAD, both on plain decode chunks (which
# HEAD copies by bulk copies at any length): the e4m3 index (index=fp8, one box per tile: whole 128-byte rows) and
# the bf16 index run per sequence (batch=per-sequence).
source scripts/device/head_bundle.sh
tar xJf .devbuild/carry/rule.tar.xz
tar xJf .devbuild/carry/batched.tar.xz
export PYTHONUNBUFFERED=1 STEPS_BUDGET=${STEPS_BUDGET:-330}
source scripts/device/steps.sh
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
step rule_ab 150 env BIN=.devbuild/rule/bin LIBS=.devbuild/union/lib PLANS= ROUNDS=3 LIMIT=145 \
  DECODE_SHAPES=1x1x4096,1x1x262144,1x1x524288,2x1x262144,1x1x786432,1x1x1048576,8x16x65536,128x1x32768 \
  scripts/device/ab_bench.sh
sed -n '/== A \/ B/,$p' $OUT/rule_ab.log
step batched_ab 80 env BIN=.devbuild/batched/bin LIBS=.devbuild/union/lib PLANS= ROUNDS=3 LIMIT=75 \
  DECODE_SHAPES=1x1x524288,2x1x262144,1x1x786432 scripts/device/ab_bench.sh
sed -n '/== A \/ B/,$p' $OUT/batched_ab.log
step twins 60 .devbuild/rule/bin/gpu_twins_test --gtest_filter='*WgmmaIndex*:*BatchedDecodeIndex*'
grep -E "bit-identical|refused" $OUT/twins.log | head -n 6
step fp8_ab 60 env BIN=.devbuild/rule/bin LIBS=.devbuild/union/lib PLANS= ROUNDS=3 LIMIT=55 DECODE_PLAN=index=fp8 \
  DECODE_SHAPES=1x1x262144,1x1x1048576 scripts/device/ab_bench.sh
sed -n '/== A \/ B/,$p' $OUT/fp8_ab.log
step per_sequence_ab 60 env BIN=.devbuild/rule/bin LIBS=.devbuild/union/lib PLANS= ROUNDS=3 LIMIT=55 \
  DECODE_PLAN=batch=per-sequence DECODE_SHAPES=1x1x262144,1x1x1048576 scripts/device/ab_bench.sh
sed -n '/== A \/ B/,$p' $OUT/per_sequence_ab.log

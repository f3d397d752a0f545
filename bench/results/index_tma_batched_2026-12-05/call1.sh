#!/usr/bin/env bash
# The batched index chunk's key tiles by bulk tensor copy (bench/results/index_tma_batched_2026-12-05.md). Carry
# .devbuild/carry after scripts/device/build_bundles.sh (variant `batched`). A = batched/bin/gpu_bench (HEAD with
# batched_tma.patch), B = gpu_bench_base (HEAD). In order of need, for a call that may be cut short: the index twins
# on A (batched chunks, now by bulk copies, against per-sequence ones, and wgmma against mma.sync), the decode step
# A/B (every decode shape of issue 19's table: the auto plan batches the index chunk even at batch 1), the decode
# index alone, then the decode-shape low-precision test, the bf16 index=wgmma plans and memcheck of a decode batch.
source scripts/device/head_bundle.sh
tar xJf .devbuild/carry/batched.tar.xz
A=.devbuild/batched/bin
export PYTHONUNBUFFERED=1 STEPS_BUDGET=${STEPS_BUDGET:-570}
source scripts/device/steps.sh
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
step twins 60 $A/gpu_twins_test --gtest_filter='*WgmmaIndex*:*BatchedDecodeIndex*'
grep -E "bit-identical|refused" $OUT/twins.log | head -n 6
step decode_step 150 env BIN=$A LIBS=.devbuild/union/lib PLANS= \
  DECODE_SHAPES=1x1x4096,1x1x262144,1x1x1048576,8x16x65536,128x1x32768 ROUNDS=3 LIMIT=145 scripts/device/ab_bench.sh
sed -n '/== A \/ B/,$p' $OUT/decode_step.log
step index 70 python3 bench/gpu_index_bench.py --bins batched=$A/gpu_bench,head=$A/gpu_bench_base --out $OUT \
  --prefill '' --decode 262144,1048576 --rounds 3 --tag batched
tail -n 6 $OUT/index.log
step lowp_decode 60 $A/gpu_lowp_test --gtest_filter='*DecodeShapes*'
step plans 150 env MSA_GPU_PLANS_MATCHING=index=wgmma $A/gpu_plans_test --gtest_filter='*/bf16'
step memcheck 60 compute-sanitizer --tool memcheck $A/gpu_bench decode 4096 1 batch=4
tail -n 1 $OUT/memcheck.log

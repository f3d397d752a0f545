#!/usr/bin/env bash
# Call 1 of bench/results/topk_prewait_2026-12-08.md (carry .devbuild/carry/head.tar.xz, bundle.tar.xz and
# prewait.tar.xz): A = HEAD with prewait.patch (RankTopKCta finds its row's place, the sequence table's load and the
# 64-bit arithmetic of PlaceRankRow, before its WaitForPrimary instead of after it), B = HEAD (the head bundle's
# gpu_bench). In order of need: the top-k twins and the batched decode index test on A (topk=cta and threshold against
# topk=warp on every max-pooling case; batched decode chunks, which read the sequence table, against per-sequence
# ones), then the decode step back to back under A and B (ab_bench: interleaved rounds, "same bits" from the outputs
# digests) at the shapes where auto takes topk=cta and split-k.
source scripts/device/head_bundle.sh
tar xJf .devbuild/carry/prewait.tar.xz
A=.devbuild/prewait/bin
cp $B/gpu_bench $A/gpu_bench_base
export PYTHONUNBUFFERED=1 STEPS_BUDGET=${STEPS_BUDGET:-250}
source scripts/device/steps.sh
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
step twins 60 $A/gpu_twins_test --gtest_filter='*WarpTwinTopK*:*BatchedDecodeIndex*'
grep -E "compared|Failure|PASSED|FAILED" $OUT/twins.log | head -n 8
step decode_ab 190 env BIN=$A LIBS=.devbuild/union/lib PLANS= ROUNDS=${ROUNDS:-3} LIMIT=${AB_LIMIT:-185} \
  DECODE_SHAPES=1x1x262144,1x1x65536,1x1x1048576,2x1x262144 scripts/device/ab_bench.sh
sed -n '/== A \/ B/,$p' $OUT/decode_ab.log

#!/usr/bin/env bash
# Call 1 of bench/results/topk_held_2026-12-06.md (carry .devbuild/carry after scripts/device/build_bundles.sh,
# variant `held`): A = HEAD with held_keys.patch (RankTopKCta folds its 32 group maxima from per-thread maxima in
# shared memory instead of a shared 64-bit atomicMax, a compare-and-swap loop that the CTA's 32 warps contend for,
# and loads a thread's first 4 candidates at once, keeping them in registers for the survivors pass), B = HEAD. In
# order of need: the top-k twins on A (topk=cta and threshold against topk=warp on every max-pooling case, the
# split rows' cases included: rows of 3125 to 4687 candidates take the path past the held keys), the decode step
# back to back under A and B (ab_bench: 3 interleaved rounds, "same bits" from the outputs digests), then racecheck
# and synccheck of a 256K decode step on A.
source scripts/device/head_bundle.sh
tar xJf .devbuild/carry/held.tar.xz
A=.devbuild/held/bin
export PYTHONUNBUFFERED=1 STEPS_BUDGET=${STEPS_BUDGET:-300}
source scripts/device/steps.sh
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
step twins 90 $A/gpu_twins_test --gtest_filter='*WarpTwinTopK*'
grep -E "runs compared|Failure" $OUT/twins.log | head -n 6
step decode_ab 120 env BIN=$A LIBS=.devbuild/union/lib PLANS= ROUNDS=3 LIMIT=115 \
  DECODE_SHAPES=1x1x4096,1x1x65536,1x1x262144,1x1x1048576,2x1x262144 scripts/device/ab_bench.sh
sed -n '/== A \/ B/,$p' $OUT/decode_ab.log
step racecheck 40 compute-sanitizer --tool racecheck $A/gpu_bench decode 262144 1
tail -n 1 $OUT/racecheck.log
step synccheck 40 compute-sanitizer --tool synccheck $A/gpu_bench decode 262144 1
tail -n 1 $OUT/synccheck.log

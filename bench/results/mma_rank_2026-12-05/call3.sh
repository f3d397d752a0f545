#!/usr/bin/env bash
# Call 3 of bench/results/mma_rank_2026-12-05.md (carry .devbuild/carry, built by scripts/device/build_bundles.sh at
# c352766): split-k with each CTA storing its partials into the merging CTAs' shared memory (A: HEAD) against the
# merge reading them from L2 (B: split_k_l2_merge.patch, the code before), interleaved, after the split-k twins, every
# runnable split-k plan under the oracle, and racecheck of one split-k decode step at 2048 keys.
source scripts/device/head_bundle.sh
tar xJf .devbuild/carry/l2merge.tar.xz
export COMMIT=c352766 PYTHONUNBUFFERED=1 STEPS_BUDGET=570
source scripts/device/steps.sh
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
mkdir -p ab && cp $B/gpu_bench ab/gpu_bench && cp .devbuild/l2merge/bin/gpu_bench ab/gpu_bench_base
step ab 200 env BIN=ab LIBS=.devbuild/union/lib PLANS= DECODE_SHAPES=1x1x4096,1x1x65536,1x1x262144,2x1x4096 \
  ROUNDS=3 LIMIT=180 scripts/device/ab_bench.sh
sed -n '/== A \/ B/,$p' $OUT/ab.log
step twins 100 $B/gpu_twins_test --gtest_filter='*SplitK*:*LocalBlocks*'
grep -E "vs kv-outer|forced index-branch" $OUT/twins.log
step plans_split 100 env MSA_GPU_PLANS_MATCHING=attend=split-k $B/gpu_plans_test
step racecheck 150 compute-sanitizer --tool racecheck $B/gpu_bench decode 2048 1
tail -n 3 $OUT/racecheck.log

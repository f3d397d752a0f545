#!/usr/bin/env bash
# Call 4 of bench/results/mma_rank_2026-12-05.md (carry .devbuild/carry, built by scripts/device/build_bundles.sh at
# a1bc921): call 3 again after the merge entries were sized per launch (16 for M3: two CTAs a multiprocessor again),
# with 1M added to the A/B.
source scripts/device/head_bundle.sh
tar xJf .devbuild/carry/l2merge.tar.xz
export COMMIT=a1bc921 PYTHONUNBUFFERED=1 STEPS_BUDGET=570
source scripts/device/steps.sh
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
mkdir -p ab && cp $B/gpu_bench ab/gpu_bench && cp .devbuild/l2merge/bin/gpu_bench ab/gpu_bench_base
step ab 220 env BIN=ab LIBS=.devbuild/union/lib PLANS= DECODE_SHAPES=1x1x4096,2x1x4096,1x1x65536,1x1x262144,1x1x1048576 \
  ROUNDS=3 LIMIT=200 scripts/device/ab_bench.sh
sed -n '/== A \/ B/,$p' $OUT/ab.log
step twins 100 $B/gpu_twins_test --gtest_filter='*SplitK*:*LocalBlocks*'
grep -E "vs kv-outer|forced index-branch" $OUT/twins.log
step plans_split 100 env MSA_GPU_PLANS_MATCHING=attend=split-k $B/gpu_plans_test
step racecheck 120 compute-sanitizer --tool racecheck $B/gpu_bench decode 2048 1
tail -n 3 $OUT/racecheck.log

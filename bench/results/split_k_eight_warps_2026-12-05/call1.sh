#!/usr/bin/env bash
# Prepared for the next device session (not run yet): bench/results/split_k_eight_warps_2026-12-05.md. Carry
# .devbuild/carry after scripts/device/build_bundles.sh (its variant `eight`). Split-k's one-query tile on eight warps
# (A: eight/bin/gpu_bench) against four (B: eight/bin/gpu_bench_base, HEAD): the split-k twins and the local-blocks
# test, every runnable split-k plan under the oracle, racecheck of one eight-warp decode step at 2048 keys, then the
# decode step A/B, interleaved.
source scripts/device/head_bundle.sh
tar xJf .devbuild/carry/eight.tar.xz
E=.devbuild/eight/bin
export PYTHONUNBUFFERED=1 STEPS_BUDGET=570
source scripts/device/steps.sh
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
step twins 100 $E/gpu_twins_test --gtest_filter='*SplitK*:*LocalBlocks*'
grep -E "vs kv-outer|forced index-branch" $OUT/twins.log
step plans_split 120 env MSA_GPU_PLANS_MATCHING=attend=split-k $E/gpu_plans_test
step racecheck 120 compute-sanitizer --tool racecheck $E/gpu_bench decode 2048 1
tail -n 1 $OUT/racecheck.log
step ab 200 env BIN=$E LIBS=.devbuild/union/lib PLANS= DECODE_SHAPES=1x1x4096,2x1x4096,1x1x65536,1x1x262144,1x1x1048576 \
  ROUNDS=3 LIMIT=190 scripts/device/ab_bench.sh
sed -n '/== A \/ B/,$p' $OUT/ab.log

#!/usr/bin/env bash
# Call 2 of bench/results/mma_rank_2026-12-05.md (carry .devbuild/carry, built by scripts/device/build_bundles.sh at
# 2a44c9a): index=mma-rank (rebuilt) and split-k's merge over distributed shared memory on the device: twins, every
# runnable mma-rank and split-k plan under the oracle, racecheck and memcheck of one mma-rank decode step; then the
# decode step under index=wgmma (auto) and mma-rank, two rounds in opposite orders; then split-k's merge, shared
# memory (A: HEAD) against L2 (B: split_k_l2_merge.patch), interleaved.
source scripts/device/head_bundle.sh
tar xJf .devbuild/carry/l2merge.tar.xz
export COMMIT=2a44c9a PYTHONUNBUFFERED=1 STEPS_BUDGET=570
source scripts/device/steps.sh
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
step twins 150 $B/gpu_twins_test --gtest_filter='*MmaTwin*:*LocalBlocks*:*BatchedDecode*:*SplitK*'
grep -E "vs mma|vs kv-outer|runs compared|forced index-branch" $OUT/twins.log
step plans_rank 100 env MSA_GPU_PLANS_MATCHING=index=mma-rank $B/gpu_plans_test
step plans_split 100 env MSA_GPU_PLANS_MATCHING=attend=split-k $B/gpu_plans_test
step racecheck 60 compute-sanitizer --tool racecheck --error-exitcode 9 $B/gpu_bench decode 4096 2 index=mma-rank
step memcheck 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu_bench decode 4096 2 index=mma-rank
SHAPES=1x1x4096,1x1x8192,2x1x4096,1x1x12288,8x1x4096
step decode1 60 python3 bench/gpu_decode_bench.py --bin $B/gpu_bench --out $OUT --shapes $SHAPES --plans "index=wgmma;index=mma-rank" --tag r1
step decode2 60 python3 bench/gpu_decode_bench.py --bin $B/gpu_bench --out $OUT --shapes $SHAPES --plans "index=mma-rank;index=wgmma" --tag r2
for f in $OUT/gpu_decode_bench_*_r1.md $OUT/gpu_decode_bench_*_r2.md; do grep -E '^\| [0-9]' $f | cut -d'|' -f2-6,10,12,15; done
mkdir -p ab && cp $B/gpu_bench ab/gpu_bench && cp .devbuild/l2merge/bin/gpu_bench ab/gpu_bench_base
step ab 170 env BIN=ab LIBS=.devbuild/union/lib PLANS= DECODE_SHAPES=1x1x4096,1x1x65536,1x1x262144,2x1x4096 \
  ROUNDS=3 LIMIT=150 scripts/device/ab_bench.sh
sed -n '/== A \/ B/,$p' $OUT/ab.log

#!/usr/bin/env bash
# Call 1 of bench/results/mma_rank_2026-12-05.md (carry .devbuild/carry, built by scripts/device/build_bundles.sh at
# bb1fb76): index=mma-rank against index=mma on the device (twins, every runnable mma-rank plan under the oracle),
# then the decode step under index=wgmma (auto), mma and mma-rank, two rounds in opposite orders.
source scripts/device/head_bundle.sh
export COMMIT=bb1fb76 PYTHONUNBUFFERED=1 STEPS_BUDGET=560
source scripts/device/steps.sh
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
step twins 200 $B/gpu_twins_test --gtest_filter='*MmaTwin*:*LocalBlocks*:*BatchedDecode*:*WarpTwinTopK*'
grep -E "vs mma|runs compared|forced index-branch" $OUT/twins.log
step plans 150 env MSA_GPU_PLANS_MATCHING=index=mma-rank $B/gpu_plans_test
SHAPES=1x1x4096,1x1x8192,1x1x16384,1x1x65536,2x1x4096,8x1x4096,1x1x262144
step decode1 120 python3 bench/gpu_decode_bench.py --bin $B/gpu_bench --out $OUT --shapes $SHAPES --plans "index=wgmma;index=mma;index=mma-rank" --tag r1
step decode2 120 python3 bench/gpu_decode_bench.py --bin $B/gpu_bench --out $OUT --shapes $SHAPES --plans "index=mma-rank;index=mma;index=wgmma" --tag r2
for f in $OUT/gpu_decode_bench_*_r1.md $OUT/gpu_decode_bench_*_r2.md; do grep -E '^\| [0-9]' $f | cut -d'|' -f2-6,10,12,15; done

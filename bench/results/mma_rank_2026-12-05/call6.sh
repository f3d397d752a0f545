#!/usr/bin/env bash
# Call 6 of bench/results/mma_rank_2026-12-05.md (carry .devbuild/carry, built by scripts/device/build_bundles.sh at
# f34fa99, whose device code is 949a6e5's): the decode step of decode batches under index=wgmma (auto's) and index=mma,
# two rounds in opposite orders: call 5 again, on whichever card came (call 5 ran on an H100).
source scripts/device/head_bundle.sh
export COMMIT=f34fa99 PYTHONUNBUFFERED=1 STEPS_BUDGET=300
source scripts/device/steps.sh
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
SHAPES=8x1x4096,32x1x4096,128x1x4096,8x1x32768,128x1x32768,8x16x65536
step decode1 120 python3 bench/gpu_decode_bench.py --bin $B/gpu_bench --out $OUT --shapes $SHAPES --plans "index=wgmma;index=mma" --tag r1
step decode2 120 python3 bench/gpu_decode_bench.py --bin $B/gpu_bench --out $OUT --shapes $SHAPES --plans "index=mma;index=wgmma" --tag r2
for f in $OUT/gpu_decode_bench_*_r1.md $OUT/gpu_decode_bench_*_r2.md; do grep -E '^\| [0-9]' $f | cut -d'|' -f2-6,10,12,14,15; done

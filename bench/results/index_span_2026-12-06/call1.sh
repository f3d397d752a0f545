#!/usr/bin/env bash
# Call 1 of bench/results/index_span_2026-12-06.md (carry .devbuild/carry after scripts/device/build_bundles.sh,
# variants `span` and `half`): span = HEAD with key_spans.patch (the block-max grid splits a long chunk's key blocks
# into spans whose keys take a quarter of the L2, gpu/common/block_max_grid.h), half = the same with half of the L2,
# head = HEAD. In order of need, for a call that may be cut short: the index branch alone at 128K, 256K and 512K
# prefill (the three builds interleaved; "outputs" compares each build's out and lse digests with span's), then at
# 1M (one round), then the index twins on span (wgmma against mma.sync, batched against per-sequence) and its e4m3
# test.
source scripts/device/head_bundle.sh
tar xJf .devbuild/carry/span.tar.xz
A=.devbuild/span/bin
export PYTHONUNBUFFERED=1 STEPS_BUDGET=${STEPS_BUDGET:-560}
source scripts/device/steps.sh
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
BINS=span=$A/gpu_bench,half=$A/gpu_bench_half,head=$A/gpu_bench_base
step index 170 python3 bench/gpu_index_bench.py --bins $BINS --out $OUT --prefill 131072,262144,524288 --decode '' \
  --rounds 2 --tag curve
grep -E '^\| prefill' $OUT/gpu_index_bench_*_curve.md
step index_1m 120 python3 bench/gpu_index_bench.py --bins $BINS --out $OUT --prefill 1048576 --decode '' --rounds 1 \
  --reps 2 --tag 1m
grep -E '^\| prefill' $OUT/gpu_index_bench_*_1m.md
step twins 60 $A/gpu_twins_test --gtest_filter='*WgmmaIndex*:*BatchedDecodeIndex*'
grep -E "bit-identical|refused|Failure" $OUT/twins.log | head -n 6
step e4m3 40 $A/gpu_e4m3_test

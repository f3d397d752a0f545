#!/usr/bin/env bash
# Second call on the same warm card: a longer interleaved A/B (7 rounds) of eight warps (A) against four (B, HEAD),
# with the batch shapes that must not regress, then each build's decode table (step and % of the copy ceiling).
source scripts/device/head_bundle.sh
[ -d .devbuild/eight/bin ] || tar xJf .devbuild/carry/eight.tar.xz
E=.devbuild/eight/bin
export PYTHONUNBUFFERED=1 STEPS_BUDGET=570
source scripts/device/steps.sh
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
step ab 330 env BIN=$E LIBS=.devbuild/union/lib PLANS= \
  DECODE_SHAPES=1x1x4096,2x1x4096,1x1x65536,1x1x262144,1x1x1048576,8x16x65536,128x1x32768 \
  ROUNDS=7 LIMIT=320 scripts/device/ab_bench.sh
sed -n '/== A \/ B/,$p' $OUT/ab.log
SHAPES=1x1x4096,1x1x262144,1x1x1048576
step table_eight 100 python3 bench/gpu_decode_bench.py --bin $E/gpu_bench --out $OUT --shapes $SHAPES --plans auto --tag eight
step table_head 100 python3 bench/gpu_decode_bench.py --bin $E/gpu_bench_base --out $OUT --shapes $SHAPES --plans auto --tag head
for f in $OUT/gpu_decode_bench_*_eight.md $OUT/gpu_decode_bench_*_head.md; do echo "$f"; grep -E '^\| [0-9]' $f | cut -d'|' -f2-6,10,12,14,15; done

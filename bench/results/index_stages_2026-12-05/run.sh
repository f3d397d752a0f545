#!/usr/bin/env bash
# bench/results/index_stages_2026-12-05.md: decode_index_stages.patch (the wgmma index kernel's one-warpgroup CTA, the
# one of decode chunks, with 3 key stages in shared memory instead of 4) against HEAD, with carry .devbuild/carry
# (build_bundles.sh's stages bundle: A = the patch, B = HEAD). First the wgmma index kernel's twins on the patched
# build (mma.sync index bits, batched = per-sequence), then scripts/device/ab_bench.sh's interleaved A/B of the decode
# step (back to back, one CUDA graph) at the decode targets' shapes, three rounds, each checking A's bits against B's.
set -uo pipefail
tar xJf .devbuild/carry/stages.tar.xz
tar xJf .devbuild/carry/bundle.tar.xz .devbuild/union/lib
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader
source scripts/device/steps.sh
step twins_index 90 .devbuild/stages/bin/gpu_twins_test --gtest_filter='*WgmmaIndexKernel*:*BatchedDecodeIndex*'
grep -E 'bit-identical' $OUT/twins_index.log
BIN=.devbuild/stages/bin LIBS=.devbuild/union/lib PLANS= ROUNDS=3 LIMIT=400 \
  DECODE_SHAPES=1x1x4096,1x1x16384,1x1x65536,1x1x262144,1x1x1048576,2x1x4096,8x16x65536,128x1x32768 \
  step ab_decode 420 scripts/device/ab_bench.sh
sed -n '/== A \/ B/,$p' $OUT/ab_decode.log

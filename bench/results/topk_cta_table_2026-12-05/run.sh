#!/usr/bin/env bash
# Prepared, not yet run (no device was lent in the session that wrote it). One device call (carry .devbuild/carry; at
# most 280 s): RankTopKCta with the warp table and the batched loads (threshold_table.patch) against main, on
# batch-1 decode steps at 64K, 256K and 1M, where a row has 512 to 8192 candidate blocks; it must keep the bits.
# Then gpu_twins_test's top-k twins (topk=cta and threshold against warp, every max-pooling case, the split and tied
# ones among them) on the patched build.
tar xJf .devbuild/carry/topk.tar.xz
[ -d .devbuild/union/lib ] || { tar xJf .devbuild/carry/bundle.tar.xz; }
export LIBS=.devbuild/union/lib LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
BIN=.devbuild/topk/bin PLANS= DECODE_SHAPES=1x1x65536,1x1x262144,1x1x1048576 LIMIT=150 timeout 160 \
  scripts/device/ab_bench.sh 2>&1 | tee $OUT/ab_topk.log | grep -v "^decode"
source scripts/device/steps.sh
GTEST_FILTER='*WarpTwinTopK*' step topk_twins 110 .devbuild/topk/bin/gpu_twins_test

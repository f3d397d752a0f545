#!/usr/bin/env bash
# Run on 2026-12-05 (bench/results/prepared_patches_2026-12-05.md); build_bundles.sh no longer builds pathk/bin_exp2,
# since exp2_approx is on main. Four interleaved A/Bs in one device call
# (carry .devbuild/carry; at most 580 s: give the call its 600 s), each printing per case "same bits" or "BITS
# DIFFER" (gpu_bench's outputs_digest) and the ratio of medians A / B (bench/results/path_k_softmax_2026-12-04.md
# says what lands when):
#   1. path U: skip_unseen_blocks.patch + commit_only_issued.patch (bench/results/union_tile_skip_2026-12-04) against
#      main at f387fa4 (their base), at 90% overlap and on the page pattern; must keep the bits;
#   2. path K: exp2_approx.patch against main at 8d93b9b, on random selections and two decode steps (split-k at batch
#      1, the p16 tiles at batch 128); must keep the bits;
#   3. path K: order_b_prescaled.patch (on exp2) against exp2; changes the values (SPEC section 5's order (b)), so its
#      bits differ by design and run2.sh's oracle tests judge it;
#   4. split-k: bench/results/split_k_dsmem_2026-12-04/dsmem_merge.patch against main, batch-1 decode steps at 4K and
#      64K; must keep the bits.
tar xJf .devbuild/carry/bundle.tar.xz
tar xJf .devbuild/carry/pathk.tar.xz
export LIBS=.devbuild/union/lib
mkdir -p .devbuild/ab_u
cp .devbuild/union/bin_commit/gpu_bench .devbuild/ab_u/gpu_bench
cp .devbuild/union/bin/gpu_bench_base .devbuild/ab_u/gpu_bench_base
BIN=.devbuild/ab_u PLANS='attend=union-tile-ws;attend=routed' SELECTIONS=overlap90,pages LIMIT=290 timeout 300 \
  scripts/device/ab_bench.sh 2>&1 | tee $OUT/ab_u.log | grep -v "^prefill\|^decode"
BIN=.devbuild/pathk/bin_exp2 PLANS='attend=kv-outer-wgmma-p16' SELECTIONS=random \
  DECODE_SHAPES=1x1x4096,128x1x4096 LIMIT=110 timeout 120 scripts/device/ab_bench.sh 2>&1 | tee $OUT/ab_exp2.log |
  grep -v "^prefill\|^decode"
BIN=.devbuild/pathk/bin_prescaled PLANS='attend=kv-outer-wgmma-p16' SELECTIONS=random DECODE_SHAPES=128x1x4096 \
  LIMIT=90 timeout 100 scripts/device/ab_bench.sh 2>&1 | tee $OUT/ab_prescaled.log | grep -v "^prefill\|^decode"
BIN=.devbuild/pathk/bin_dsmem PLANS= DECODE_SHAPES=1x1x4096,1x1x65536 LIMIT=50 timeout 60 \
  scripts/device/ab_bench.sh 2>&1 | tee $OUT/ab_dsmem.log | grep -v "^prefill\|^decode"

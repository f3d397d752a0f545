#!/usr/bin/env bash
# Prepared, not yet run (no device time was left in the session that wrote it). Two changes to path U, each meant to
# keep every bit (bench/results/union_tile_skip_2026-12-04.md): skip_unseen_blocks.patch (a warp none of whose rows
# sees a key of the union block skips the softmax and only zeroes P), then commit_only_issued.patch on top (a wgmma
# group is committed only where something was issued: no placeholder HGMMA per turn). Two interleaved A/Bs at 128K,
# each of which must say "same bits" for every case (gpu_bench's outputs_digest): bin/ = skip against main at
# f387fa4, bin_commit/ = skip + commit against skip. run2.sh has the tests.
tar xJf .devbuild/carry/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
PLANS='attend=union-tile-ws;attend=routed' SELECTIONS=overlap90,pages timeout 280 \
  scripts/device/ab_bench.sh 2>&1 | tee $OUT/ab_skip.log | grep -v "^prefill"
BIN=.devbuild/union/bin_commit PLANS='attend=union-tile-ws;attend=routed' SELECTIONS=overlap90,pages timeout 280 \
  scripts/device/ab_bench.sh 2>&1 | tee $OUT/ab_commit.log | grep -v "^prefill"

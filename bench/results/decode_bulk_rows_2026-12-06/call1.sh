#!/usr/bin/env bash
# Call 1 of bench/results/decode_bulk_rows_2026-12-06.md (carry .devbuild/carry after scripts/device/build_bundles.sh at
# 5ebf760, which builds the variant):
# split-k's one-query tile (so fused-decode's too) with its K and V rows loaded by bulk copies, a thread per row
# completing on an mbarrier (variant bulk: bulk_rows.patch), against HEAD's cp.async. Its twin tests (split-k against
# kv-outer, fused-decode against the separate stages: the same bits), then the decode steps, interleaved rounds.
set -uo pipefail
source scripts/device/head_bundle.sh
tar xJf .devbuild/carry/bulk.tar.xz
V=.devbuild/bulk/bin
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 90 $V/gpu_twins_test --gtest_filter='*SplitK*' >$OUT/twins.log 2>&1
echo "split-k twins (bulk): exit $?: $(grep -E '^\[  (PASSED|FAILED) ' $OUT/twins.log | paste -sd' ')"
timeout 60 $V/gpu_fused_decode_test >$OUT/fused.log 2>&1
echo "fused twins (bulk): exit $?: $(grep -E '^\[  (PASSED|FAILED) ' $OUT/fused.log | paste -sd' ')"
source scripts/device/decode_rounds.sh
decode_rounds 3 1x1x4096,2x1x4096,1x1x65536,1x1x262144 \
  "index=wgmma,topk=cta,attend=split-k;index=wgmma,topk=cta,attend=fused-decode" head=$B/gpu_bench bulk=$V/gpu_bench

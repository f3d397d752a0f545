#!/usr/bin/env bash
# Call 1 of bench/results/decode_profile_2026-12-06.md (carry .devbuild/carry after scripts/device/build_bundles.sh):
# Nsight Compute on the batch-1 decode step at 4K (M3 shapes, bf16), one launch of each kernel after warm-up: the
# fused-decode kernel, and split-k's three (index wgmma, top-k cta, split-k). Each kernel's duration alone (against the
# 13.1-13.4 us step graph), its throughputs, occupancy and warp stall reasons. Clocks left alone (--clock-control none).
set -uo pipefail
source scripts/device/head_bundle.sh
profile() {  # name, kernel regex, plan
  timeout 150 ncu --clock-control none --kernel-name "regex:$2" --launch-skip 6 --launch-count "$4" --set full \
    $B/gpu_bench decode 4096 12 "$3" >$OUT/$1.txt 2>&1
  echo "== $1: exit $?"
  grep -E '^  [A-Za-z].*\(|Duration|Elapsed Cycles|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Waves Per SM|Block Limit|One or More Eligible|Issued Warp Per|Warp Cycles Per Issued|Stall|L2 Hit Rate' \
    $OUT/$1.txt | grep -v '^\s*$' | head -n 60
}
profile fused 'FusedDecodeKernel' 'index=wgmma,topk=cta,attend=fused-decode' 1
profile separate 'BlockMax|RankTopK|SplitKAttendKernel' 'index=wgmma,topk=cta,attend=split-k' 3

#!/usr/bin/env bash
# Call 5 of bench/results/device_check_2026-12-08.md (carry as call4.sh): Nsight Compute on the batch-1 decode step at
# 256K (split-k's three kernels: index wgmma, top-k cta, split-k), each kernel alone after warm-up, clocks left alone;
# then the top-k's and the index kernel's warp states and per-instruction stall samples (SASS, csv).
set -uo pipefail
source scripts/device/head_bundle.sh
plan='index=wgmma,topk=cta,attend=split-k'
timeout 200 ncu --clock-control none --kernel-name "regex:BlockMax|RankTopK|SplitKAttendKernel" --launch-skip 6 \
  --launch-count 3 --set full $B/gpu_bench decode 262144 12 "$plan" >$OUT/ncu_256k.txt 2>&1
xz $OUT/ncu_256k.txt
for kernel in topk:RankTopKCta index:BlockMaxWgmma; do
  name=${kernel%%:*}
  A="--clock-control none --kernel-name regex:${kernel#*:} --launch-skip 2 --launch-count 1"
  timeout 120 ncu $A --section WarpStateStats --section SourceCounters --section InstructionStats \
    --section MemoryWorkloadAnalysis $B/gpu_bench decode 262144 12 "$plan" >$OUT/${name}_sections.txt 2>&1
  timeout 150 ncu $A --set full --import-source no --page source --print-source sass --csv \
    $B/gpu_bench decode 262144 12 "$plan" >$OUT/${name}_sass.csv 2>&1
  xz $OUT/${name}_sass.csv
done

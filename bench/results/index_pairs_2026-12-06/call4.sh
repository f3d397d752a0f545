#!/usr/bin/env bash
# Call 4 of bench/results/index_pairs_2026-12-06.md (carry .devbuild/carry after scripts/device/build_bundles.sh):
# call 3 found the pairs equally slow with the stage reloaded one tile later and with five stages, so the per-tile
# rendezvous is not what costs. Where do the pairs' warps stall? ncu on the 128K prefill's first index launch: the
# warp-state breakdown per issued instruction and the sampled stall locations (SASS), pairs (A) then HEAD (B).
source scripts/device/head_bundle.sh
tar xJf .devbuild/carry/pairs.tar.xz
A=.devbuild/pairs/bin
export STEPS_BUDGET=${STEPS_BUDGET:-150}
source scripts/device/steps.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
stalls='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
for build in pairs:$A/gpu_bench head:$A/gpu_bench_base; do
  step stalls_${build%%:*} 60 ncu --clock-control none -k regex:BlockMax --launch-count 1 --section SourceCounters \
    --metrics "$stalls" ${build#*:} prefill 131072 1
  grep -E "stalled_.*ratio +[0-9.]+" $OUT/stalls_${build%%:*}.log | awk '$NF+0 >= 0.2' | head -n 14
  sed -n '/Warp Stall Sampling/,/^ *$/p' $OUT/stalls_${build%%:*}.log | head -n 14
done

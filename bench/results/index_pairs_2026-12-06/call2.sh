#!/usr/bin/env bash
# Call 2 of bench/results/index_pairs_2026-12-06.md (carry .devbuild/carry after scripts/device/build_bundles.sh,
# variant `pairs`): why the pairs ran at about half the speed of HEAD's unpaired bulk copies in call 1. ncu on the
# first index launch (BlockMax kernels) of a 131072-token prefill under A (pairs) and B (HEAD): speed of light,
# occupancy, launch statistics, warp states, memory workload and the L2 hit rate; then HEAD's L2 hit rate and DRAM
# bytes at 524288 tokens, where the keys outgrow L2 (is the index DRAM-bound there?).
source scripts/device/head_bundle.sh
tar xJf .devbuild/carry/pairs.tar.xz
A=.devbuild/pairs/bin
export STEPS_BUDGET=${STEPS_BUDGET:-400}
source scripts/device/steps.sh
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
sections="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis"
metrics=lts__t_sector_hit_rate.pct,dram__bytes_read.sum,lts__t_bytes.sum,sm__cycles_active.avg,gpu__time_duration.sum
for build in pairs:$A/gpu_bench head:$A/gpu_bench_base; do
  step ncu_${build%%:*} 120 ncu --clock-control none -k regex:BlockMax --launch-count 1 $sections --metrics $metrics \
    ${build#*:} prefill 131072 1
  grep -E "BlockMax|Duration|Registers|Cluster|Grid Size|Block Size|Achieved Occupancy|Theoretical Occupancy|Stall|L2 Hit|DRAM Throughput|Memory Throughput|Compute \(SM\)|dram__bytes|lts__t|sm__cycles" \
    $OUT/ncu_${build%%:*}.log | head -n 40
done
step ncu_head_512k 150 ncu --clock-control none -k regex:BlockMax --launch-count 1 --metrics $metrics \
  $A/gpu_bench_base prefill 524288 1
grep -E "BlockMax|dram__bytes|lts__t|sm__cycles|gpu__time" $OUT/ncu_head_512k.log | head -n 12

#!/usr/bin/env bash
# Call 1 of bench/results/main_profile_2026-12-07.md (carry .devbuild/carry after scripts/device/build_bundles.sh; an
# H100): where the 128K main branch's time goes on random selections, for the missed 30%-of-GEMM target. Nsight
# Compute on the first chunk's path-K tile launch (KvOuterWsKernel) and its merge (MergeKernel), routed plan, bf16 out:
# duration, DRAM bytes read and written, L2 hit rate, the speed-of-light percentages.
set -uo pipefail
source scripts/device/head_bundle.sh
export STEPS_BUDGET=${STEPS_BUDGET:-200}
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader
source scripts/device/steps.sh
step ncu_main 150 ncu --clock-control none -k regex:'KvOuterWsKernel|MergeKernel' --launch-count 2 \
  --section SpeedOfLight --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct \
  $B/gpu_bench prefill 131072 1 selection=random attend=routed
grep -E 'Kernel|Duration|DRAM Throughput|dram__bytes|lts__t_sector_hit|Memory Throughput|Compute \(SM\)' \
  $OUT/ncu_main.log

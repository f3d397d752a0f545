#!/usr/bin/env bash
# Call 2 of bench/results/kv_outer_ws_2026-12-06.md (carry .devbuild/carry after scripts/device/build_bundles.sh):
# call 1's twin test and main-branch comparison at the commit under test, then Nsight Compute on the first tile
# launch of a 32K prefill on random selections under each plan (the tile kernel's duration, the tensor pipe's and
# the issue slots' activity, the warps' stall reasons).
set -uo pipefail
source scripts/device/head_bundle.sh
export COMMIT=${COMMIT:-unknown} PYTHONUNBUFFERED=1 STEPS_BUDGET=${STEPS_BUDGET:-560}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
source scripts/device/steps.sh
step twins 90 $B/gpu_twins_test --gtest_filter='*WarpSpecialized*'
grep -E "bit-identical|Failure" $OUT/twins.log | head -n 4
step selection 200 python3 bench/gpu_selection_bench.py --bin $B/gpu_bench --out $OUT --prefill 131072 \
  --plans "attend=kv-outer-wgmma-p16;attend=kv-outer-ws" --selections random,overlap90 --reps 3 --tag ws
grep -E '^\| 131072' $OUT/selection.log
M=gpu__time_duration.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active
M=$M,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__warps_active.avg.per_cycle_active
M=$M,regex:smsp__average_warp_latency_issue_stalled_[a-z_]+\.ratio
for plan in kv-outer-wgmma-p16:WgmmaTile kv-outer-ws:KvOuterWs; do
  step ncu_${plan%%:*} 100 ncu --clock-control none -k regex:${plan##*:} --launch-count 1 --metrics "$M" \
    $B/gpu_bench prefill 32768 1 selection=random attend=${plan%%:*}
  awk 'NF >= 3 && $NF ~ /^[0-9.,]+$/ {v = $NF; gsub(",", "", v); if (v + 0 > 0.05) printf "    %-70s %s %s\n", $1, $(NF-1), $NF}' \
    $OUT/ncu_${plan%%:*}.log | head -n 30
done

#!/usr/bin/env bash
# bench/results/kv_outer_overlap_2026-12-04/run2/profile_ab.sh (the script of run 2, kept with its results): why path
# K got slower with S of the next tile issued early. Three gpu_bench builds in BIN: gpu_bench (S(i+1) issued before
# softmax(i)), gpu_bench_v3 (the same code with the early issue switched off), gpu_bench_base (the commit before).
# For each and for both partials formats: the first wgmma tile launch of a 32K random prefill under Nsight Compute
# (occupancy, registers, issue and tensor shares, stall reasons), then the 128K main branch timed. Usage: OUT_DIR.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
OUT_DIR=$1
BIN=$(cd "${BIN:-.devbuild/union/bin}" && pwd)
export LD_LIBRARY_PATH=$(cd "${LIBS:-.devbuild/union/lib}" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p "$OUT_DIR"
METRICS=gpu__time_duration.sum,launch__registers_per_thread,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,launch__shared_mem_per_block_dynamic,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum
STALLS='regex:smsp__average_warps_issue_stalled_(wait|short_scoreboard|long_scoreboard|barrier|mio_throttle|math_pipe_throttle|dispatch_stall|no_instruction|branch_resolving|lg_throttle|membar|sleeping|selected|not_selected|drain|misc|tex_throttle|imc_miss)_per_issue_active\.ratio'
for build in gpu_bench gpu_bench_v3 gpu_bench_base; do
  for plan in attend=kv-outer-wgmma-p16 attend=kv-outer-wgmma; do
    name=${build}_${plan//[^a-z0-9-]/_}
    timeout 120 ncu --clock-control none -k regex:WgmmaTile --launch-count 1 --metrics "$METRICS,$STALLS" \
      "$BIN/$build" prefill 32768 1 selection=random "$plan" >"$OUT_DIR/ncu_$name.txt" 2>&1
    echo "== $build $plan (32K random, first tile launch)"
    grep -E '^\s+(gpu__time|launch__|sm__|smsp__issue|smsp__inst|dram__|lts__|smsp__average_warps_issue_stalled)' "$OUT_DIR/ncu_$name.txt" |
      awk '{v=$NF; if ($1 ~ /stalled/ && v+0 < 0.1) next; sub("smsp__average_warps_issue_stalled_", "stall ", $1); sub("_per_issue_active.ratio", "", $1); printf "  %-60s %s\n", $1, v}'
  done
done
fields() { grep -o '"main_ms": [0-9.]*' | tr '\n' ' '; echo; }
for build in gpu_bench_v3 gpu_bench_base; do
  echo "$build 128K random p16: $(timeout 40 "$BIN/$build" prefill 131072 5 selection=random attend=kv-outer-wgmma-p16 2>&1 | fields)"
done

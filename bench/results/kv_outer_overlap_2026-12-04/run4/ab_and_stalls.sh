#!/usr/bin/env bash
# bench/results/kv_outer_overlap_2026-12-04/run4/ab_and_stalls.sh (the script of runs 4 and 5, kept with their results): the
# early S(i+1) issue with Q(i+2)'s copies moved ahead of it: an interleaved A/B of gpu_bench (this build) and
# gpu_bench_base (the commit before) on the 128K random prefill's main branch, both partials formats, then the
# per-instruction stall samples of this build's first tile launch at 32K (as run 3). Usage: OUT_DIR.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
OUT_DIR=$1
BIN=$(cd "${BIN:-.devbuild/union/bin}" && pwd)
export LD_LIBRARY_PATH=$(cd "${LIBS:-.devbuild/union/lib}" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p "$OUT_DIR"
fields() { grep -o '"main_ms": [0-9.]*\|"nonfinite_outputs": [0-9]*' | tr '\n' ' '; echo; }
for round in 1 2; do
  for build in gpu_bench gpu_bench_base; do
    for plan in attend=kv-outer-wgmma-p16 attend=kv-outer-wgmma; do
      echo "$build round $round $plan: $(timeout 40 "$BIN/$build" prefill 131072 5 selection=random $plan 2>&1 | fields)"
    done
  done
done
timeout 150 ncu --clock-control none -k regex:WgmmaTile --launch-count 1 --section SourceCounters \
  --section WarpStateStats -o "$OUT_DIR/gpu_bench" -f "$BIN/gpu_bench" prefill 32768 1 selection=random \
  attend=kv-outer-wgmma-p16 >"$OUT_DIR/gpu_bench_ncu.log" 2>&1
echo "profile exit $?"
ncu --import "$OUT_DIR/gpu_bench.ncu-rep" --page source --csv --print-source sass >"$OUT_DIR/gpu_bench_sass.csv" 2>&1
ncu --import "$OUT_DIR/gpu_bench.ncu-rep" --page details --csv >"$OUT_DIR/gpu_bench_details.csv" 2>&1
grep -E '"Duration"|"Issue Slots Busy"|"Registers Per Thread"' "$OUT_DIR/gpu_bench_details.csv" | head -5

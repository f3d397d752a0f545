#!/usr/bin/env bash
# bench/results/kv_outer_overlap_2026-12-04/run3/sass_stalls.sh (the script of run 3, kept with its results): the
# per-instruction warp-stall samples (Nsight Compute source counters, SASS) of the first wgmma tile launch of a 32K
# random p16 prefill, for gpu_bench (S(i+1) issued early) and gpu_bench_base (the commit before), to see which
# instructions the new loop stalls on. Usage: OUT_DIR.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
OUT_DIR=$1
BIN=$(cd "${BIN:-.devbuild/union/bin}" && pwd)
export LD_LIBRARY_PATH=$(cd "${LIBS:-.devbuild/union/lib}" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p "$OUT_DIR"
for build in gpu_bench gpu_bench_base; do
  timeout 150 ncu --clock-control none -k regex:WgmmaTile --launch-count 1 --section SourceCounters \
    --section WarpStateStats -o "$OUT_DIR/$build" -f "$BIN/$build" prefill 32768 1 selection=random \
    attend=kv-outer-wgmma-p16 >"$OUT_DIR/${build}_ncu.log" 2>&1
  echo "$build profile exit $?"
  ncu --import "$OUT_DIR/$build.ncu-rep" --page source --csv --print-source sass >"$OUT_DIR/${build}_sass.csv" 2>&1
  echo "$build sass export exit $?: $(wc -l <"$OUT_DIR/${build}_sass.csv") lines"
  head -c 600 "$OUT_DIR/${build}_sass.csv"; echo
done

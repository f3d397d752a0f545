#!/usr/bin/env bash
# Run 1's command (kept with its results): path U (UnionTileWsKernel) inside routed at 128K overlap90 after the paired
# score rounding, on the H200: its stall reasons and per-instruction samples (Nsight Compute, clocks left alone), and
# racecheck on a routed prefill of the code measured last (main at e9d4333), whose earlier racecheck was cut.
# Binaries as scripts/device/kernel_check.sh. Run from the repository root with OUT set.
tar xJf .devbuild/carry/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
B=.devbuild/union/bin
timeout 60 $B/gpu_union_tile_test >$OUT/union.log 2>&1
echo "union exit $?: $(grep -E '^\[  (PASSED|FAILED) ' $OUT/union.log | tr '\n' ' ')"
NCU_KERNELS=3 STALL_KERNELS=UnionTileWs SASS=1 SASS_KERNEL=UnionTileWs SASS_UNIT='LDC R1, c\[0x0\]\[0x28\]' \
  timeout 300 scripts/device/profile_main_branch.sh "$OUT" 131072 overlap90 attend=routed
gzip -9 "$OUT"/durations_*.csv
timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 $B/gpu_bench prefill 4096 1 selection=overlap90 \
  attend=routed >$OUT/sanitize_racecheck.log 2>&1
echo "racecheck exit $?: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $OUT/sanitize_racecheck.log | tr '\n' ' ')"

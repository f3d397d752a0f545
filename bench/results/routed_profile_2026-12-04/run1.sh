#!/usr/bin/env bash
# Run 1's command (kept with its results): where routed's main branch spends its time at 128K overlap90, on the H200.
# Kernel times one by one (Nsight Compute, clocks left alone) of routed, the stall profile
# and per-instruction samples of UnionTileWsKernel, and each plan's main_ms without the profiler.
# Binaries as scripts/device/kernel_check.sh. Run from the repository root with OUT set.
tar xJf .devbuild/carry/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
B=.devbuild/union/bin
for plan in attend=routed attend=union-tile-ws; do
  echo "$plan: $(timeout 40 $B/gpu_bench prefill 131072 5 selection=overlap90 $plan | grep -o '"main_ms": [0-9.]*\|"index_ms": [0-9.]*' | tr '\n' ' ')"
done
NCU_KERNELS=700 STALL_KERNELS=UnionTileWs SASS=1 SASS_KERNEL=UnionTileWs \
  timeout 520 scripts/device/profile_main_branch.sh "$OUT" 131072 overlap90 attend=routed
gzip -9 "$OUT"/durations_*.csv

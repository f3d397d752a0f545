#!/usr/bin/env bash
# Run 6's command (kept with its results): run 5 left 0.7 ms of routed's loss on random selections on the device and
# 0.9 ms in waiting for the counts. Nsight Compute times every kernel of the first 400 launches one by one (a routed
# main branch at 128K on random selections takes about 350) under run 4's build and under main at e9d4333, and the
# device planner kernel's stall profile under each.
# Binaries as scripts/device/kernel_check.sh. Run from the repository root with OUT set.
tar xJf .devbuild/carry/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
B=.devbuild/union/bin
mkdir -p /tmp/base && ln -sf $PWD/$B/gpu_bench_base /tmp/base/gpu_bench
NCU_KERNELS=400 STALL_KERNELS=RouteUnionTiles timeout 200 scripts/device/profile_main_branch.sh "$OUT/now" 131072 \
  random attend=routed
BIN=/tmp/base NCU_KERNELS=400 STALL_KERNELS=RouteUnionTiles timeout 200 scripts/device/profile_main_branch.sh \
  "$OUT/base" 131072 random attend=routed
gzip -9 "$OUT"/*/durations_*.csv

#!/usr/bin/env bash
# Run 5's command (kept with its results): the committed code (e13bc79). The prefill against torch SDPA at 128K
# (bench/gpu_selection_bench.py, routed, on the indexer's selections of random index inputs, random, overlap90 and
# pages), then Nsight Compute on union-tile-ws at 90% overlap: its warp stalls, pipes and memory. Binaries as
# scripts/device/kernel_check.sh.
tar xJf .devbuild/carry/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
B=.devbuild/union/bin
COMMIT=e13bc79 PYTHONUNBUFFERED=1 timeout 240 python3 bench/gpu_selection_bench.py --bin $B/gpu_bench --out $OUT \
  --prefill 131072 --selections indexer:random,random,overlap90,pages --sdpa --tag sdpa >$OUT/selection_bench.log 2>&1
echo "selection bench exit $?"; tail -9 $OUT/selection_bench.log
NCU_KERNELS=3 STALL_KERNELS=UnionTileWs timeout 230 scripts/device/profile_main_branch.sh "$OUT" 131072 overlap90 \
  attend=union-tile-ws 2>&1 | tail -40
gzip -9 "$OUT"/durations_*.csv

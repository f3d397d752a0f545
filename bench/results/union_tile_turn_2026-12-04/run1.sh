#!/usr/bin/env bash
# Run 1's command (kept with its results): main at faad38b. gpu_union_tile_test with its 702-tile case; then Nsight
# Compute on union-tile-ws at 128K, 90% adjacent overlap: the issue share of each pipe, and the per-instruction stall
# samples (SASS). Binaries as scripts/device/kernel_check.sh.
tar xJf .devbuild/carry/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
B=.devbuild/union/bin
start=$SECONDS
timeout 120 $B/gpu_union_tile_test >$OUT/union_tile_test.log 2>&1
echo "gpu_union_tile_test: exit $? in $((SECONDS - start)) s: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) |tiles|rows' $OUT/union_tile_test.log | tail -8 | tr '\n' ' ')"
PIPES='regex:sm__inst_executed_pipe_[a-z0-9_]+\.avg\.pct_of_peak_sustained_active|sm__pipe_[a-z0-9_]+_cycles_active\.avg\.pct_of_peak_sustained_active'
timeout 150 ncu --clock-control none -k regex:UnionTileWs --launch-count 1 --metrics "$PIPES" $B/gpu_bench prefill 131072 1 \
  selection=overlap90 attend=union-tile-ws >$OUT/pipes.txt 2>&1
echo "pipes exit $?"
awk 'NF == 3 && $3 ~ /^[0-9.,]+$/ {v = $3; gsub(",", "", v); if (v + 0 > 0.5) printf "    %-75s %s\n", $1, $3}' $OUT/pipes.txt
NCU_KERNELS=3 STALL_KERNELS=UnionTileWs SASS=1 SASS_KERNEL=UnionTileWs SASS_UNIT='HGMMA' timeout 300 \
  scripts/device/profile_main_branch.sh "$OUT" 131072 overlap90 attend=union-tile-ws 2>&1 | tail -40
gzip -9 "$OUT"/durations_*.csv

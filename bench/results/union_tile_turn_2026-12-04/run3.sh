#!/usr/bin/env bash
# Run 3's command (kept with its results): 8704ed9 (path U in order (b)). The prefill against torch SDPA at 128K
# (bench/gpu_selection_bench.py, the default plan: routed, on the indexer's selections of random index inputs,
# random, overlap90 and pages), then Nsight Compute on union-tile-ws at 90% overlap: pipes, stalls and the
# per-instruction stall samples. Binaries as scripts/device/kernel_check.sh.
tar xJf .devbuild/carry/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
B=.devbuild/union/bin
COMMIT=8704ed9 PYTHONUNBUFFERED=1 timeout 240 python3 bench/gpu_selection_bench.py --bin $B/gpu_bench --out $OUT \
  --prefill 131072 --selections indexer:random,random,overlap90,pages --sdpa --tag sdpa >$OUT/selection_bench.log 2>&1
echo "selection bench exit $?"; tail -9 $OUT/selection_bench.log
PIPES='regex:sm__inst_executed_pipe_(alu|fma|xu|tensor_op_gmma)\.avg\.pct_of_peak_sustained_active'
timeout 100 ncu --clock-control none -k regex:UnionTileWs --launch-count 1 --metrics "$PIPES" $B/gpu_bench prefill 131072 1 \
  selection=overlap90 attend=union-tile-ws >$OUT/pipes.txt 2>&1
awk 'NF == 3 && $3 ~ /^[0-9.,]+$/ {printf "    %-75s %s\n", $1, $3}' $OUT/pipes.txt
NCU_KERNELS=3 STALL_KERNELS=UnionTileWs SASS=1 SASS_KERNEL=UnionTileWs SASS_UNIT='HGMMA' timeout 220 \
  scripts/device/profile_main_branch.sh "$OUT" 131072 overlap90 attend=union-tile-ws 2>&1 | tail -30
gzip -9 "$OUT"/durations_*.csv

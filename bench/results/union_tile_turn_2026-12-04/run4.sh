#!/usr/bin/env bash
# Run 4's command (kept with its results): the key limits of a union block computed while the warpgroup's matrix
# work runs instead of after it (the same bits). An interleaved A/B against main at 8704ed9 (gpu_bench_base) at
# 128K; then gpu_union_tile_test and gpu_plans_test over the routed and union-tile plans (bf16 and fp16) under the
# oracle, as time allows (570 s in all). Binaries as scripts/device/kernel_check.sh.
tar xJf .devbuild/carry/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
B=.devbuild/union/bin
step() {  # NAME LIMIT COMMAND...: skipped where less than LIMIT / 2 seconds are left
  local name=$1 limit=$2 left=$((570 - SECONDS))
  shift 2
  if [ $left -lt $((limit / 2)) ]; then echo "$name: skipped, $left s left"; return; fi
  [ $limit -gt $left ] && limit=$left
  local start=$SECONDS
  timeout $limit "$@" >$OUT/$name.log 2>&1
  echo "$name: exit $? in $((SECONDS - start)) s: $(grep -E '^\[  (PASSED|FAILED) |runnable plans|rows unchanged|rows on path|ERROR SUMMARY' $OUT/$name.log | tr '\n' ' ')"
}
PLANS='attend=union-tile-ws;attend=routed' SELECTIONS=overlap90,pages timeout 260 \
  scripts/device/ab_bench.sh 2>&1 | tee $OUT/ab.log | grep -v "^prefill"
step union_tile_test 90 $B/gpu_union_tile_test
MSA_GPU_PLANS_MATCHING='attend=routed' step plans_routed 120 $B/gpu_plans_test
MSA_GPU_PLANS_MATCHING='attend=union-tile' step plans_union_tile 200 $B/gpu_plans_test

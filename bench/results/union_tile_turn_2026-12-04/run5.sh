#!/usr/bin/env bash
# Run 5's command (kept with its results): run 4's code, the checks that run 4's time limits cut: gpu_plans_test at
# fp16 over the routed and union-tile plans under the oracle, then gpu_twins_test, as time allows (540 s in all).
# Binaries as scripts/device/kernel_check.sh.
tar xJf .devbuild/carry/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
B=.devbuild/union/bin
step() {  # NAME LIMIT COMMAND...: skipped where less than LIMIT / 2 seconds are left
  local name=$1 limit=$2 left=$((540 - SECONDS))
  shift 2
  if [ $left -lt $((limit / 2)) ]; then echo "$name: skipped, $left s left"; return; fi
  [ $limit -gt $left ] && limit=$left
  local start=$SECONDS
  timeout $limit "$@" >$OUT/$name.log 2>&1
  echo "$name: exit $? in $((SECONDS - start)) s: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) |runnable plans' $OUT/$name.log | tr '\n' ' ')"
}
MSA_GPU_PLANS_MATCHING='attend=routed' step plans_routed_fp16 150 $B/gpu_plans_test --gtest_filter='*/fp16'
MSA_GPU_PLANS_MATCHING='attend=union-tile' step plans_union_tile_fp16 200 $B/gpu_plans_test --gtest_filter='*/fp16'
step twins 200 $B/gpu_twins_test

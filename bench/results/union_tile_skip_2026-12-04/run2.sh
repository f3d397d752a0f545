#!/usr/bin/env bash
# Prepared, not yet run. The tests of path U built with skip_unseen_blocks.patch and commit_only_issued.patch applied
# (README.md of this folder): gpu_union_tile_test, gpu_twins_test and gpu_plans_test over the routed and union-tile
# plans (bf16 and fp16) under the oracle, as time allows (570 s in all). Binaries as scripts/device/kernel_check.sh.
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
step union_tile_test 90 $B/gpu_union_tile_test
step twins 60 $B/gpu_twins_test
MSA_GPU_PLANS_MATCHING='attend=routed' step plans_routed 150 $B/gpu_plans_test
MSA_GPU_PLANS_MATCHING='attend=union-tile' step plans_union_tile 250 $B/gpu_plans_test

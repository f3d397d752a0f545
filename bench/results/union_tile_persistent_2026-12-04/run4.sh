#!/usr/bin/env bash
# Run 4's command (kept with its results): run 3's code, checked. gpu_plans_test over every runnable plan with
# attend=routed, then attend=union-tile (union-tile and union-tile-ws), at bf16 and fp16, against the reference under
# the oracle; then compute-sanitizer (memcheck, racecheck, synccheck) on a routed 4096 prefill at 90% overlap, as
# time allows (570 s in all). Binaries as scripts/device/kernel_check.sh.
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
  echo "$name: exit $? in $((SECONDS - start)) s: $(grep -E '^\[  (PASSED|FAILED) |runnable plans|ERROR SUMMARY|RACECHECK SUMMARY' $OUT/$name.log | tr '\n' ' ')"
}
MSA_GPU_PLANS_MATCHING='attend=routed' step plans_routed 200 $B/gpu_plans_test
MSA_GPU_PLANS_MATCHING='attend=union-tile' step plans_union_tile 200 $B/gpu_plans_test
for tool in memcheck racecheck synccheck; do
  step routed_$tool 150 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu_bench prefill 4096 1 \
    selection=overlap90 attend=routed
done

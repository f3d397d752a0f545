#!/usr/bin/env bash
# Run 2's command (kept with its results): routed's path K over its own queries only (listed after the route, count
# to the host), on the H200. gpu_union_tile_test (routed rows = their path's bits); gpu_bench single runs (routed
# on the stream = routed replayed as a graph, which walks the whole list, by output digest); gpu_plans_test over
# the KV-outer plans (wgmma tiles against their mma twins) and routed; memcheck on a routed prefill with both paths;
# then an interleaved A/B against main at e9d4333 (gpu_bench_base).
# Binaries as scripts/device/kernel_check.sh. Run from the repository root with OUT set.
tar xJf .devbuild/carry/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
B=.devbuild/union/bin
timeout 60 $B/gpu_union_tile_test >$OUT/union.log 2>&1
echo "union exit $?: $(grep -E '^\[  (PASSED|FAILED) |^routed' $OUT/union.log | tr '\n' ' ')"
for sel in random overlap50 overlap90; do
  echo "routed 8192 $sel exit $?: $(timeout 40 $B/gpu_bench prefill 8192 3 selection=$sel attend=routed |
    grep -o '"main_ms": [0-9.]*\|"main_graph_ms": [0-9.]*\|"nonfinite_outputs": [0-9]*\|"graph_bits_differ": [0-9]*' |
    tr '\n' ' ')"
done
for filter in 'batch=per-sequence,topk=cta,lists=general,attend=kv-outer' 'batch=per-sequence,topk=cta,attend=routed'; do
  MSA_GPU_PLANS_MATCHING=$filter timeout 90 $B/gpu_plans_test --gtest_filter='Precisions/GpuPlans.*/bf16' \
    >>$OUT/plans_bf16.log 2>&1
  echo "plans bf16 $filter exit $?: $(grep -E '^\[  (PASSED|FAILED) |runnable plans' $OUT/plans_bf16.log | tail -3 |
    tr '\n' ' ')"
done
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu_bench prefill 4096 1 selection=overlap50 \
  attend=routed >$OUT/sanitize_memcheck.log 2>&1
echo "memcheck exit $?: $(grep -E 'ERROR SUMMARY' $OUT/sanitize_memcheck.log | tr '\n' ' ')"
PLANS='attend=routed' SELECTIONS=overlap90,overlap50,random timeout 200 scripts/device/ab_bench.sh 2>&1 |
  tee $OUT/ab_routed.log | grep -v '^prefill'
PLANS='attend=kv-outer-wgmma-p16' SELECTIONS=random timeout 60 scripts/device/ab_bench.sh 2>&1 | tee $OUT/ab_k.log |
  grep -v '^prefill'

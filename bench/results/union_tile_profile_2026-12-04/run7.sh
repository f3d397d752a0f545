#!/usr/bin/env bash
# Run 7's command (kept with its results): path U over a list of its tiles too (no CTA per tile of path K), and path
# K's query lookups a stage before the loads that use them, on the H200: gpu_union_tile_test; routed's graph digest
# at 8K; gpu_plans_test over the KV-outer plans (wgmma tiles against their mma twins); memcheck on a routed prefill
# with both paths; an interleaved A/B against main at e9d4333 (gpu_bench_base); then bench/gpu_selection_bench.py at
# 128K under the default plan with torch SDPA in the same run.
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
MSA_GPU_PLANS_MATCHING='batch=per-sequence,topk=cta,lists=general,attend=kv-outer' timeout 90 $B/gpu_plans_test \
  --gtest_filter='Precisions/GpuPlans.*/bf16' >$OUT/plans_bf16.log 2>&1
echo "plans bf16 exit $?: $(grep -E '^\[  (PASSED|FAILED) |runnable plans' $OUT/plans_bf16.log | tr '\n' ' ')"
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu_bench prefill 4096 1 selection=overlap50 \
  attend=routed >$OUT/sanitize_memcheck.log 2>&1
echo "memcheck exit $?: $(grep -E 'ERROR SUMMARY' $OUT/sanitize_memcheck.log | tr '\n' ' ')"
PLANS='attend=routed' SELECTIONS=random,overlap50,overlap90 timeout 150 scripts/device/ab_bench.sh 2>&1 |
  tee $OUT/ab_routed.log | grep -v '^prefill'
PLANS='attend=union-tile-ws' SELECTIONS=overlap90 timeout 60 scripts/device/ab_bench.sh 2>&1 | tee $OUT/ab_u.log |
  grep -v '^prefill'
PLANS='attend=kv-outer-wgmma-p16' SELECTIONS=random timeout 60 scripts/device/ab_bench.sh 2>&1 | tee $OUT/ab_k.log |
  grep -v '^prefill'
PYTHONUNBUFFERED=1 timeout 200 python3 bench/gpu_selection_bench.py --bin $B/gpu_bench --out $OUT --prefill 131072 \
  --selections indexer:random,random,overlap90 --sdpa --tag sdpa >$OUT/selection_bench.log 2>&1
echo "selection bench exit $?"; tail -8 $OUT/selection_bench.log

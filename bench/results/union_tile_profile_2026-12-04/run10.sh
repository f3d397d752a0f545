#!/usr/bin/env bash
# Run 10's command (kept with its results): the final code. Path K's tiles look a query up where the chunk walks a
# list (run 2's placement, which cost kv-outer-wgmma-p16 0.3%; runs 7-9 placed the lookup three other ways and lost
# 1.9-4.5%), and routed lists path K's queries only where that leaves out at least half of them. On the H200:
# gpu_union_tile_test; gpu_plans_test over the KV-outer plans; routed's graph digests at 8K; an interleaved A/B
# against main at e9d4333 (gpu_bench_base).
# Binaries as scripts/device/kernel_check.sh. Run from the repository root with OUT set.
tar xJf .devbuild/carry/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
B=.devbuild/union/bin
timeout 60 $B/gpu_union_tile_test >$OUT/union.log 2>&1
echo "union exit $?: $(grep -E '^\[  (PASSED|FAILED) |^routed' $OUT/union.log | tr '\n' ' ')"
MSA_GPU_PLANS_MATCHING='batch=per-sequence,topk=cta,lists=general,attend=kv-outer' timeout 70 $B/gpu_plans_test \
  --gtest_filter='Precisions/GpuPlans.*/bf16' >$OUT/plans_bf16.log 2>&1
echo "plans bf16 exit $?: $(grep -E '^\[  (PASSED|FAILED) |runnable plans' $OUT/plans_bf16.log | tr '\n' ' ')"
for sel in random overlap90; do
  echo "routed 8192 $sel: $(timeout 40 $B/gpu_bench prefill 8192 3 selection=$sel attend=routed |
    grep -o '"nonfinite_outputs": [0-9]*\|"graph_bits_differ": [0-9]*' | tr '\n' ' ')"
done
PLANS='attend=routed;attend=kv-outer-wgmma-p16' SELECTIONS=random timeout 80 scripts/device/ab_bench.sh 2>&1 |
  tee $OUT/ab_random.log | grep -v '^prefill'
PLANS='attend=routed;attend=union-tile-ws' SELECTIONS=overlap90 timeout 60 scripts/device/ab_bench.sh 2>&1 |
  tee $OUT/ab_overlap90.log | grep -v '^prefill'

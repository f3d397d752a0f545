#!/usr/bin/env bash
# Run 9's command (kept with its results): the wgmma tiles read each list entry's query from a second array written
# beside the entries (no lookup through the chunk's query list; runs 7 and 8 placed that lookup's loads two ways and
# lost 1.9% and 4.5% on kv-outer-wgmma-p16), on the H200: gpu_union_tile_test; gpu_plans_test over the KV-outer
# plans with general and with direct lists; an interleaved A/B against main at e9d4333 (gpu_bench_base).
# Binaries as scripts/device/kernel_check.sh. Run from the repository root with OUT set.
tar xJf .devbuild/carry/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
B=.devbuild/union/bin
timeout 60 $B/gpu_union_tile_test >$OUT/union.log 2>&1
echo "union exit $?: $(grep -E '^\[  (PASSED|FAILED) |^routed' $OUT/union.log | tr '\n' ' ')"
for filter in 'batch=per-sequence,topk=cta,lists=general,attend=kv-outer' 'batch=per-sequence,topk=cta,lists=direct'; do
  MSA_GPU_PLANS_MATCHING=$filter timeout 80 $B/gpu_plans_test --gtest_filter='Precisions/GpuPlans.*/bf16' \
    >>$OUT/plans_bf16.log 2>&1
  echo "plans bf16 $filter exit $?: $(grep -E '^\[  (PASSED|FAILED) |runnable plans' $OUT/plans_bf16.log | tail -2 |
    tr '\n' ' ')"
done
echo "routed 8192 random: $(timeout 40 $B/gpu_bench prefill 8192 3 selection=random attend=routed |
  grep -o '"nonfinite_outputs": [0-9]*\|"graph_bits_differ": [0-9]*' | tr '\n' ' ')"
PLANS='attend=routed;attend=kv-outer-wgmma-p16' SELECTIONS=random timeout 100 scripts/device/ab_bench.sh 2>&1 |
  tee $OUT/ab_random.log | grep -v '^prefill'
PLANS='attend=routed' SELECTIONS=overlap90 timeout 60 scripts/device/ab_bench.sh 2>&1 | tee $OUT/ab_overlap90.log |
  grep -v '^prefill'

#!/usr/bin/env bash
# Run 5's command (kept with its results): the score rounding of the wgmma tiles (path U and path K) in paired
# conversions, on top of run 4's side stream, on the H200. gpu_union_tile_test; gpu_plans_test over the kv-outer plans
# (kv-outer-wgmma against its twin kv-outer, whose mma tiles round one score at a time), bf16 and fp16; memcheck,
# racecheck and synccheck on a routed prefill; then an interleaved A/B against run 4's build (gpu_bench_base).
# Binaries as scripts/device/kernel_check.sh. Run from the repository root with OUT set.
tar xJf .devbuild/carry/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
B=.devbuild/union/bin
timeout 90 $B/gpu_union_tile_test >$OUT/union.log 2>&1
echo "union exit $?: $(grep -E '^\[  (PASSED|FAILED) |^routed|device route' $OUT/union.log | tr '\n' ' ')"
for p in bf16 fp16; do
  MSA_GPU_PLANS_MATCHING=attend=kv-outer timeout 100 $B/gpu_plans_test --gtest_filter="Precisions/GpuPlans.*/$p" \
    >$OUT/plans_$p.log 2>&1
  echo "plans $p exit $?: $(grep -E '^\[  (PASSED|FAILED) |runnable plans' $OUT/plans_$p.log | tr '\n' ' ')"
done
for tool in memcheck racecheck synccheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu_bench prefill 4096 1 selection=overlap90 \
    attend=routed >$OUT/sanitize_$tool.log 2>&1
  echo "$tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/sanitize_$tool.log | tr '\n' ' ')"
done
PLANS='attend=union-tile-ws;attend=routed' SELECTIONS=overlap90 timeout 100 scripts/device/ab_bench.sh 2>&1 |
  tee $OUT/ab_u.log | grep -v '^prefill'
PLANS='attend=kv-outer-wgmma-p16' SELECTIONS=random timeout 60 scripts/device/ab_bench.sh 2>&1 | tee $OUT/ab_k.log |
  grep -v '^prefill'
# Then, as two more calls (the plans above matched too many plans for their time limit):
#   MSA_GPU_PLANS_MATCHING='batch=per-sequence,topk=cta,lists=general,attend=kv-outer' \
#     timeout 85 $B/gpu_plans_test --gtest_filter='Precisions/GpuPlans.*/bf16' > $OUT/plans_bf16_cta.log
#   (and the same for fp16, timeout 55), into plans_bf16_cta.log and plans_fp16_cta.log.

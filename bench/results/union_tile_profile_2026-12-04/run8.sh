#!/usr/bin/env bash
# Run 8's command (kept with its results): run 7's code with path K's position loads issued after the score
# rounding (run 7 issued them with P V, and kv-outer-wgmma-p16 lost 1.9% to main), on the H200: gpu_union_tile_test;
# gpu_plans_test over the KV-outer plans; an interleaved A/B against main at e9d4333 (gpu_bench_base); then
# bench/gpu_bench.py's 1M prefill under the default plan with torch SDPA in the same run.
# Binaries as scripts/device/kernel_check.sh. Run from the repository root with OUT set.
tar xJf .devbuild/carry/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
B=.devbuild/union/bin
timeout 60 $B/gpu_union_tile_test >$OUT/union.log 2>&1
echo "union exit $?: $(grep -E '^\[  (PASSED|FAILED) |^routed' $OUT/union.log | tr '\n' ' ')"
MSA_GPU_PLANS_MATCHING='batch=per-sequence,topk=cta,lists=general,attend=kv-outer' timeout 90 $B/gpu_plans_test \
  --gtest_filter='Precisions/GpuPlans.*/bf16' >$OUT/plans_bf16.log 2>&1
echo "plans bf16 exit $?: $(grep -E '^\[  (PASSED|FAILED) |runnable plans' $OUT/plans_bf16.log | tr '\n' ' ')"
PLANS='attend=routed;attend=kv-outer-wgmma-p16' SELECTIONS=random timeout 100 scripts/device/ab_bench.sh 2>&1 |
  tee $OUT/ab_random.log | grep -v '^prefill'
PLANS='attend=routed' SELECTIONS=overlap90 timeout 60 scripts/device/ab_bench.sh 2>&1 | tee $OUT/ab_overlap90.log |
  grep -v '^prefill'
PYTHONUNBUFFERED=1 timeout 280 python3 bench/gpu_bench.py --bin $B/gpu_bench --out $OUT --prefill 1048576 \
  --sdpa 1048576 --flex '' --decode '' --decode-batched '' --qouter '' --fp8 '' --fp8-decode '' --deadline 270 \
  >$OUT/gpu_bench_1m.log 2>&1
echo "gpu_bench 1M exit $?"; grep -A4 "^| N\|prefill" $OUT/gpu_bench_1m.log | tail -12

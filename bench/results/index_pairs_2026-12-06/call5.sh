#!/usr/bin/env bash
# Call 5 of bench/results/index_pairs_2026-12-06.md (carry .devbuild/carry after scripts/device/build_bundles.sh):
# call 4's stall breakdown put the pairs' lost time behind thread 0's cluster-scope release (membar), which the other
# warps wait for at the CTA barrier and at the wgmma. fence = the pairs with CTA-scope arrive and wait
# (pair_fence.patch). The index branch alone at 128K and 512K, fence and HEAD interleaved; fence's twins and its 128K
# prefill digests against HEAD; then its bf16 index=wgmma plans as far as the call's time goes.
source scripts/device/head_bundle.sh
tar xJf .devbuild/carry/pairs.tar.xz
A=.devbuild/pairs/bin
export PYTHONUNBUFFERED=1 STEPS_BUDGET=${STEPS_BUDGET:-570}
source scripts/device/steps.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
step index 90 python3 bench/gpu_index_bench.py --bins fence=$A/gpu_bench_fence,head=$A/gpu_bench_base --out $OUT \
  --prefill ${PREFILLS:-131072,524288} --decode '' --rounds 2 --tag pair_fence
tail -n 6 $OUT/index.log
step twins 30 $A/gpu_twins_fence --gtest_filter='*WgmmaIndex*:*BatchedDecodeIndex*'
grep -E "bit-identical|refused|Failure" $OUT/twins.log | head -n 4
mkdir -p .devbuild/fence_ab && cp $A/gpu_bench_fence .devbuild/fence_ab/gpu_bench && cp $A/gpu_bench_base .devbuild/fence_ab/gpu_bench_base
step prefill_bits 20 env BIN=.devbuild/fence_ab LIBS=.devbuild/union/lib ROUNDS=1 LIMIT=18 scripts/device/ab_bench.sh
sed -n '/== A \/ B/,$p' $OUT/prefill_bits.log
step plans 150 env MSA_GPU_PLANS_MATCHING=index=wgmma $A/gpu_plans_fence --gtest_filter='*/bf16'

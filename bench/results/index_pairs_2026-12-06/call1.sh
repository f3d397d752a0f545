#!/usr/bin/env bash
# Call 1 of bench/results/index_pairs_2026-12-06.md (carry .devbuild/carry after scripts/device/build_bundles.sh,
# variant `pairs`): A = HEAD with key_pairs.patch (two-warpgroup index CTAs in clusters of two sharing each key tile
# by multicast bulk copies), B = HEAD. In order of need, for a call that may be cut short: the index branch alone at
# PREFILLS (default 128K, 256K and 512K prefill; A and B interleaved: where the keys outgrow L2), the index twins on A
# (wgmma against mma.sync on every max-pooling case, batched against per-sequence), the 128K prefill's outputs
# under A and B (ab_bench: "same bits" compares the digests of out and lse, which the index branch decides through
# the selection), the decode step at 256K, 1M and 128 x 1 x 32K (the patch rewrote the key range of the one-warpgroup
# kernels too, cp.async ones included), synccheck of a 4096-token prefill on A, then A's bf16 index=wgmma plans and
# e4m3 test.
source scripts/device/head_bundle.sh
tar xJf .devbuild/carry/pairs.tar.xz
A=.devbuild/pairs/bin
export PYTHONUNBUFFERED=1 STEPS_BUDGET=${STEPS_BUDGET:-570}
source scripts/device/steps.sh
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
step index 120 python3 bench/gpu_index_bench.py --bins pairs=$A/gpu_bench,head=$A/gpu_bench_base --out $OUT \
  --prefill ${PREFILLS:-131072,262144,524288} --decode '' --rounds 2 --tag pairs
tail -n 8 $OUT/index.log
step twins 60 $A/gpu_twins_test --gtest_filter='*WgmmaIndex*:*BatchedDecodeIndex*'
grep -E "bit-identical|refused|Failure" $OUT/twins.log | head -n 6
step prefill_bits 60 env BIN=$A LIBS=.devbuild/union/lib ROUNDS=1 LIMIT=55 scripts/device/ab_bench.sh
sed -n '/== A \/ B/,$p' $OUT/prefill_bits.log
step decode_ab 40 env BIN=$A LIBS=.devbuild/union/lib PLANS= ROUNDS=2 LIMIT=35 \
  DECODE_SHAPES=1x1x262144,1x1x1048576,128x1x32768 scripts/device/ab_bench.sh
sed -n '/== A \/ B/,$p' $OUT/decode_ab.log
step synccheck 40 compute-sanitizer --tool synccheck $A/gpu_bench prefill 4096 1
tail -n 1 $OUT/synccheck.log
step plans 150 env MSA_GPU_PLANS_MATCHING=index=wgmma $A/gpu_plans_test --gtest_filter='*/bf16'
step e4m3 40 $A/gpu_e4m3_test

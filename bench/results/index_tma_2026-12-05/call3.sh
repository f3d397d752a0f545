#!/usr/bin/env bash
# For an H200 (bench/results/index_tma_2026-12-05.md, "Still to do"), carry .devbuild/carry after
# scripts/device/build_bundles.sh. In order of need: the index branch A/B at 128K (A = HEAD's bulk-copy key tiles,
# B = HEAD with cp_async_keys.patch), the checks that call 2 did not reach (fp16 index=wgmma plans, the decode-shape
# low-precision test, synccheck and racecheck of a prefill), then split-k's eight warps (HEAD) against four
# (four_warps.patch) on the batch-1 steps that moved on the H100.
source scripts/device/head_bundle.sh
tar xJf .devbuild/carry/tma.tar.xz
tar xJf .devbuild/carry/four.tar.xz
T=.devbuild/tma/bin
export PYTHONUNBUFFERED=1 STEPS_BUDGET=${STEPS_BUDGET:-570}
source scripts/device/steps.sh
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
step index 80 python3 bench/gpu_index_bench.py --bins tma=$T/gpu_bench,cpasync=$T/gpu_bench_base --out $OUT \
  --prefill 131072 --decode '' --rounds 3 --tag tma128_h200
tail -n 4 $OUT/index.log
step plans_fp16 150 env MSA_GPU_PLANS_MATCHING=index=wgmma $T/gpu_plans_test --gtest_filter='*/fp16'
step lowp_decode 60 $T/gpu_lowp_test --gtest_filter='*DecodeShapes*'
step synccheck 60 compute-sanitizer --tool synccheck $T/gpu_bench prefill 4096 1
tail -n 1 $OUT/synccheck.log
step racecheck 150 compute-sanitizer --tool racecheck $T/gpu_bench prefill 1024 1
tail -n 1 $OUT/racecheck.log
step eight_warps 90 env BIN=.devbuild/four/bin LIBS=.devbuild/union/lib PLANS= DECODE_SHAPES=1x1x4096,1x1x262144 \
  ROUNDS=3 LIMIT=80 scripts/device/ab_bench.sh
sed -n '/== A \/ B/,$p' $OUT/eight_warps.log

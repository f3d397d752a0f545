#!/usr/bin/env bash
# Call 1 of the targets run (bench/results/targets_2026-12-05.md): HEAD's binaries (build_bundles.sh's head bundle)
# on issue 19's 128K and decode targets, each script measuring its own ceilings in the same call (after the test of a
# block whose scores all overflow to -inf, new with this commit):
#   the 128K prefill against torch SDPA on four selections (the default plan: routed; bf16 GEMM ceiling);
#   the index branch at 128K against the bf16 GEMM ceiling;
#   the decode step at batch 1 (4K, 256K, 1M) and at batch >= 8 against the copy ceiling;
#   the batch-1 step at 4K, 16K and 256K with the mma.sync index kernel, the warp top-k or kv-outer-wgmma in place of
#   auto's choice.
set -uo pipefail
tar xJf .devbuild/carry/head.tar.xz
tar xJf .devbuild/carry/bundle.tar.xz .devbuild/union/lib
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
B=.devbuild/head/bin
export COMMIT=${COMMIT:-unknown} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader
source scripts/device/steps.sh
step lowp_overflow 40 $B/gpu_lowp_test --gtest_filter='*Overflow*:*Weighs*'
step selection_128k 260 python3 bench/gpu_selection_bench.py --bin $B/gpu_bench --out $OUT --prefill 131072 \
  --selections indexer:random,random,overlap90,pages --sdpa --tag targets
tail -n 12 $OUT/selection_128k.log
step index_128k 90 python3 bench/gpu_index_bench.py --bins head=$B/gpu_bench --out $OUT --prefill 131072 --decode '' \
  --rounds 2 --tag targets
tail -n 6 $OUT/index_128k.log
step decode 200 python3 bench/gpu_decode_bench.py --bin $B/gpu_bench --out $OUT \
  --shapes 1x1x4096,1x1x262144,1x1x1048576,8x16x65536,128x1x32768 --tag targets
tail -n 12 $OUT/decode.log
step decode_plans 100 python3 bench/gpu_decode_bench.py --bin $B/gpu_bench --out $OUT \
  --shapes 1x1x4096,1x1x16384,1x1x262144 --plans 'attend=auto;index=mma;topk=warp;attend=kv-outer-wgmma' --tag plans
tail -n 14 $OUT/decode_plans.log

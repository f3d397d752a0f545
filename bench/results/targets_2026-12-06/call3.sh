#!/usr/bin/env bash
# Call 3 of bench/results/targets_2026-12-06.md, HEAD's binaries (build_bundles.sh's head bundle; carry
# .devbuild/carry), after the decode index's bulk copies landed: the decode targets again against the copy ceiling
# measured in the same call, then the index branch alone at 128K, 256K and 512K prefill, to see where its share of
# the GEMM ceiling falls between 128K (84%) and 1M (72%): 128K's index keys (32 MB) fit the H200's L2, 256K's do not.
set -uo pipefail
source scripts/device/head_bundle.sh
export COMMIT=${COMMIT:-unknown} PYTHONUNBUFFERED=1 STEPS_BUDGET=${STEPS_BUDGET:-250}
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader
source scripts/device/steps.sh
step decode 100 python3 bench/gpu_decode_bench.py --bin $B/gpu_bench --out $OUT \
  --shapes 1x1x4096,1x1x262144,1x1x1048576,8x16x65536,128x1x32768 --tag targets_rule
tail -n 8 $OUT/decode.log
step index 120 python3 bench/gpu_index_bench.py --bins head=$B/gpu_bench --out $OUT --prefill 131072,262144,524288 \
  --decode '' --rounds 2 --tag curve
tail -n 5 $OUT/index.log

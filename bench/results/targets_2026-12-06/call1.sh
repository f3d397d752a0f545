#!/usr/bin/env bash
# The decode targets of issue 19 at HEAD (build_bundles.sh's head bundle; carry .devbuild/carry): the step of every
# decode shape of the table against the copy ceiling measured in the same call, one run of
# gpu_decode_bench (bench/results/targets_2026-12-06.md).
set -uo pipefail
source scripts/device/head_bundle.sh
export COMMIT=${COMMIT:-unknown} PYTHONUNBUFFERED=1 STEPS_BUDGET=${STEPS_BUDGET:-250}
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader
source scripts/device/steps.sh
step decode 240 python3 bench/gpu_decode_bench.py --bin $B/gpu_bench --out $OUT \
  --shapes 1x1x4096,1x1x262144,1x1x1048576,8x16x65536,128x1x32768 --tag targets
tail -n 12 $OUT/decode.log

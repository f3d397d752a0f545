#!/usr/bin/env bash
# Call 4 of bench/results/targets_2026-12-06.md (carry .devbuild/carry after scripts/device/build_bundles.sh): call 3's
# first step alone, the decode targets at HEAD against the copy ceiling measured in the same call (call 3's index
# curve and ncu step moved to index_span_2026-12-06, which measured 128K to 512K on an H100 and prepared 1M).
set -uo pipefail
source scripts/device/head_bundle.sh
export COMMIT=${COMMIT:-unknown} PYTHONUNBUFFERED=1 STEPS_BUDGET=${STEPS_BUDGET:-120}
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader
source scripts/device/steps.sh
step decode 110 python3 bench/gpu_decode_bench.py --bin $B/gpu_bench --out $OUT \
  --shapes 1x1x4096,1x1x262144,1x1x1048576,8x16x65536,128x1x32768 --tag targets_rule
tail -n 8 $OUT/decode.log

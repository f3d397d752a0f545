#!/usr/bin/env bash
# Call 2 of bench/results/out_format_2026-12-07.md (carry .devbuild/carry after scripts/device/build_bundles.sh): the 1M
# prefill against torch SDPA, its main branch writing bf16 out and fp32 lse (16 GiB, where FP64 out alone is 64 GiB:
# it now fits an 80 GB H100), then the decode targets against the copy ceiling measured in the same run.
set -uo pipefail
source scripts/device/head_bundle.sh
export COMMIT=${COMMIT:-unknown} PYTHONUNBUFFERED=1 STEPS_BUDGET=${STEPS_BUDGET:-370}
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader
source scripts/device/steps.sh
step prefill_1m 260 python3 bench/gpu_bench.py --bin $B/gpu_bench --out $OUT --prefill 1048576 --sdpa 1048576 \
  --flex '' --decode '' --decode-batched '' --qouter '' --fp8 '' --fp8-decode '' --deadline 250
grep -E '^\|' $OUT/prefill_1m.log | tail -n 8
step decode 100 python3 bench/gpu_decode_bench.py --bin $B/gpu_bench --out $OUT \
  --shapes 1x1x4096,1x1x262144,1x1x1048576,8x16x65536,128x1x32768 --tag targets
tail -n 8 $OUT/decode.log

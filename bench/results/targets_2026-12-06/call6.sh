#!/usr/bin/env bash
# Call 6 of bench/results/targets_2026-12-06.md (carry .devbuild/carry after scripts/device/build_bundles.sh; an H200:
# a 1M prefill's fp64 out alone is 64 GiB): call 5 without its 128K selection step (measured on an H100 at d81baf1),
# to fit a short device budget: the 1M prefill against torch SDPA, then (where STEPS_BUDGET leaves time) the decode
# targets against the copy ceiling.
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

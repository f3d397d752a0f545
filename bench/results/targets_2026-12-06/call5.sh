#!/usr/bin/env bash
# Call 5 of bench/results/targets_2026-12-06.md (carry .devbuild/carry after scripts/device/build_bundles.sh; an H200:
# a 1M prefill's fp64 out alone is 64 GiB): the targets after kv-outer-ws (path K warp-specialized, taken by routed and
# by decode batches), HEAD's binaries, each script measuring its ceilings and peers in the same call: the 128K prefill
# against torch SDPA on four selections (default plan), the decode targets against the copy ceiling, the 1M prefill
# against torch SDPA.
set -uo pipefail
source scripts/device/head_bundle.sh
export COMMIT=${COMMIT:-unknown} PYTHONUNBUFFERED=1 STEPS_BUDGET=${STEPS_BUDGET:-560}
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader
source scripts/device/steps.sh
step selection_128k 150 python3 bench/gpu_selection_bench.py --bin $B/gpu_bench --out $OUT --prefill 131072 \
  --selections indexer:random,random,overlap90,pages --sdpa --tag targets
grep -E '^\| 131072|SDPA|ceiling' $OUT/selection_128k.log | head -n 8
step decode 100 python3 bench/gpu_decode_bench.py --bin $B/gpu_bench --out $OUT \
  --shapes 1x1x4096,1x1x262144,1x1x1048576,8x16x65536,128x1x32768 --tag targets
tail -n 8 $OUT/decode.log
step prefill_1m 260 python3 bench/gpu_bench.py --bin $B/gpu_bench --out $OUT --prefill 1048576 --sdpa 1048576 \
  --flex '' --decode '' --decode-batched '' --qouter '' --fp8 '' --fp8-decode '' --deadline 250
grep -E '^\|' $OUT/prefill_1m.log | tail -n 8

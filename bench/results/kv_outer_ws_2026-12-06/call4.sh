#!/usr/bin/env bash
# Call 4 of bench/results/kv_outer_ws_2026-12-06.md (carry .devbuild/carry after scripts/device/build_bundles.sh at
# the planner commit; an H100, the H200 would not start): compute-sanitizer's synccheck and racecheck on the twin test
# (kv-outer-ws's barriers and its staged shared-memory stores), then targets_2026-12-06/call5.sh's first two steps
# (the 128K prefill against torch SDPA on four selections, the decode targets against the copy ceiling; no 1M prefill:
# its fp64 out does not fit 80 GB).
set -uo pipefail
source scripts/device/head_bundle.sh
export COMMIT=${COMMIT:-unknown} PYTHONUNBUFFERED=1 STEPS_BUDGET=${STEPS_BUDGET:-560}
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader
source scripts/device/steps.sh
for tool in synccheck racecheck; do
  step $tool 110 compute-sanitizer --tool $tool $B/gpu_twins_test --gtest_filter='*WarpSpecialized*'
done
step selection_128k 150 python3 bench/gpu_selection_bench.py --bin $B/gpu_bench --out $OUT --prefill 131072 \
  --selections indexer:random,random,overlap90,pages --sdpa --tag targets
grep -E '^\| 131072|SDPA|ceiling' $OUT/selection_128k.log | head -n 8
step decode 100 python3 bench/gpu_decode_bench.py --bin $B/gpu_bench --out $OUT \
  --shapes 1x1x4096,1x1x262144,8x16x65536,128x1x32768 --tag targets
tail -n 7 $OUT/decode.log

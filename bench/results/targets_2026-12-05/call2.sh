#!/usr/bin/env bash
# Call 2 of the targets run (bench/results/targets_2026-12-05.md), HEAD's binaries: the prefill targets, each script
# measuring its own ceilings in the same call: the 128K prefill against torch SDPA on four selections (the default
# plan: routed), the index branch at 128K against the bf16 GEMM ceiling, and the 1M prefill against torch SDPA.
set -uo pipefail
source scripts/device/head_bundle.sh
export COMMIT=${COMMIT:-unknown} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader
source scripts/device/steps.sh
step selection_128k 240 python3 bench/gpu_selection_bench.py --bin $B/gpu_bench --out $OUT --prefill 131072 \
  --selections indexer:random,random,overlap90,pages --sdpa --tag targets
tail -n 12 $OUT/selection_128k.log
step index_128k 60 python3 bench/gpu_index_bench.py --bins head=$B/gpu_bench --out $OUT --prefill 131072 --decode '' \
  --rounds 1 --tag targets
tail -n 6 $OUT/index_128k.log
step prefill_1m 240 python3 bench/gpu_bench.py --bin $B/gpu_bench --out $OUT --prefill 1048576 --sdpa 1048576 \
  --flex '' --decode '' --decode-batched '' --qouter '' --fp8 '' --fp8-decode '' --deadline 230
grep -E '^\|' $OUT/prefill_1m.log | tail -n 8

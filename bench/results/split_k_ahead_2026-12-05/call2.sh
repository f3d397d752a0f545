#!/usr/bin/env bash
# Call 2 of bench/results/split_k_ahead_2026-12-05.md, HEAD's binaries: attend=split-k-ahead's plans under the oracle
# against FP64 (and bit for bit with their kv-outer twins), then the A/B of the mma.sync
# index kernel against auto's on batch-1 decode steps that targets_2026-12-05.md left as a one-round lead.
set -uo pipefail
source scripts/device/head_bundle.sh
export COMMIT=${COMMIT:-unknown} PYTHONUNBUFFERED=1
source scripts/device/steps.sh
MSA_GPU_PLANS_MATCHING='attend=split-k-ahead' step plans_ahead 150 $B/gpu_plans_test
for round in 1 2 3; do
  step decode_index_r$round 130 python3 bench/gpu_decode_bench.py --bin $B/gpu_bench --out $OUT \
    --shapes 1x1x4096,1x1x16384,1x1x65536,1x1x262144,1x1x1048576,2x1x4096 --plans 'attend=auto;index=mma' \
    --tag index_r$round
  grep -E '^\| [0-9]' $OUT/decode_index_r$round.log | cut -d'|' -f2,3,8,12,15
done

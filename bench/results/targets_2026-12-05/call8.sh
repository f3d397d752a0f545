#!/usr/bin/env bash
# Prepared, not yet run. The lead of call 1's plan sweep (index=mma shortened the batch-1 decode step at 16K and 256K
# in one round) in three rounds, each running both plans at every shape back to back, so that clocks and heat treat
# them alike: whether the planner should take the mma.sync index kernel for short decode batches.
set -uo pipefail
source scripts/device/head_bundle.sh
export COMMIT=${COMMIT:-unknown} PYTHONUNBUFFERED=1
source scripts/device/steps.sh
for round in 1 2 3; do
  step decode_index_r$round 150 python3 bench/gpu_decode_bench.py --bin $B/gpu_bench --out $OUT \
    --shapes 1x1x4096,1x1x16384,1x1x65536,1x1x262144,1x1x1048576,2x1x4096 --plans 'attend=auto;index=mma' \
    --tag index_r$round
  grep -E '^1x1|^2x1' $OUT/decode_index_r$round.log
done

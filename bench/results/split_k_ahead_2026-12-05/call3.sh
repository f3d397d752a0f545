#!/usr/bin/env bash
# Call 3 of bench/results/split_k_ahead_2026-12-05.md, HEAD's binaries (3592d56: split-k-ahead's side stream at the
# lowest priority, its partials enqueued after the index branch): call 1's decode A/B again, three rounds.
set -uo pipefail
source scripts/device/head_bundle.sh
export COMMIT=${COMMIT:-unknown} PYTHONUNBUFFERED=1
source scripts/device/steps.sh
for round in 1 2 3; do
  step decode_ahead_r$round 130 python3 bench/gpu_decode_bench.py --bin $B/gpu_bench --out $OUT \
    --shapes 1x1x4096,2x1x4096,1x1x8192,1x1x16384 --plans 'attend=auto;attend=split-k-ahead' --tag ahead_r$round
  grep -E '^\| [0-9]' $OUT/decode_ahead_r$round.log | cut -d'|' -f2,3,8,12,15
done

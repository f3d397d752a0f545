#!/usr/bin/env bash
# Call 7 of bench/results/split_k_ahead_2026-12-05.md, the same H200, warm (one command line, kept as it ran): the
# decode targets, auto's plan, against the copy ceiling measured in the same call.
source scripts/device/head_bundle.sh; export COMMIT=e1248fa PYTHONUNBUFFERED=1 STEPS_BUDGET=200; source scripts/device/steps.sh; step decode 150 python3 bench/gpu_decode_bench.py --bin $B/gpu_bench --out $OUT --shapes 1x1x4096,1x1x262144,1x1x1048576,8x16x65536,128x1x32768 --tag targets; grep -E '^\| [0-9]' $OUT/decode.log | cut -d'|' -f2,3,8,10,12,14,15

#!/usr/bin/env bash
# Call 6 of bench/results/split_k_ahead_2026-12-05.md, the same H200, warm (one command line, kept as it ran):
# compute-sanitizer racecheck on a split-k decode step at 2048 keys, which targets_2026-12-05's 60 s cut short.
source scripts/device/head_bundle.sh; export STEPS_BUDGET=420; source scripts/device/steps.sh; step racecheck_decode_2048 400 compute-sanitizer --tool racecheck $B/gpu_bench decode 2048 1; tail -n 3 $OUT/racecheck_decode_2048.log

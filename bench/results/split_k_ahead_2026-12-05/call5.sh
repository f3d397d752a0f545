#!/usr/bin/env bash
# Call 5 of bench/results/split_k_ahead_2026-12-05.md, on the H200 of call 4, warm (run as one command line; kept
# here as it ran): call 4's 128K selections again with the indexer's row, whose index branch and top-k give the
# prefill column, and the index branch at 128K against the GEMM ceiling, two rounds.
source scripts/device/head_bundle.sh; export COMMIT=e1248fa PYTHONUNBUFFERED=1 STEPS_BUDGET=300; source scripts/device/steps.sh; step selection_128k 150 python3 bench/gpu_selection_bench.py --bin $B/gpu_bench --out $OUT --prefill 131072 --selections indexer:random,random,overlap90,pages --sdpa --tag targets; tail -n 9 $OUT/selection_128k.log; step index_128k 90 python3 bench/gpu_index_bench.py --bins head=$B/gpu_bench --out $OUT --prefill 131072 --decode '' --rounds 2 --tag targets; tail -n 6 $OUT/index_128k.log

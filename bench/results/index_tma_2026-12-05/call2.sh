#!/usr/bin/env bash
# The index branch A/B (bench/results/index_tma_2026-12-05.md): tma (the patch) against head, interleaved, 3 rounds,
# prefill at 32K and 128K against the bf16 GEMM ceiling of the same run; racecheck of a short prefill.
source scripts/device/head_bundle.sh
[ -d .devbuild/tma/bin ] || tar xJf .devbuild/carry/tma.tar.xz
T=.devbuild/tma/bin
export PYTHONUNBUFFERED=1 STEPS_BUDGET=580
source scripts/device/steps.sh
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
step index 400 python3 bench/gpu_index_bench.py --bins tma=$T/gpu_bench,head=$T/gpu_bench_base --out $OUT \
  --prefill 32768,131072 --decode '' --rounds 3 --tag tma
tail -n 8 $OUT/index.log
step racecheck 150 compute-sanitizer --tool racecheck $T/gpu_bench prefill 1024 1
tail -n 1 $OUT/racecheck.log

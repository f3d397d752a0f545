#!/usr/bin/env bash
# The rest of the patch's checks (bench/results/index_tma_2026-12-05.md): the index=wgmma plans under the oracle,
# the low-precision suite, synccheck and racecheck of a short prefill.
source scripts/device/head_bundle.sh
[ -d .devbuild/tma/bin ] || tar xJf .devbuild/carry/tma.tar.xz
T=.devbuild/tma/bin
export PYTHONUNBUFFERED=1 STEPS_BUDGET=${STEPS_BUDGET:-560}
source scripts/device/steps.sh
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
step plans 200 env MSA_GPU_PLANS_MATCHING=index=wgmma $T/gpu_plans_test
step lowp 120 $T/gpu_lowp_test
step synccheck 60 compute-sanitizer --tool synccheck $T/gpu_bench prefill 4096 1
tail -n 1 $OUT/synccheck.log
step racecheck 150 compute-sanitizer --tool racecheck $T/gpu_bench prefill 1024 1
tail -n 1 $OUT/racecheck.log

#!/usr/bin/env bash
# The index kernel's key tiles by bulk tensor copy (bench/results/index_tma_2026-12-05.md). Carry .devbuild/carry
# after scripts/device/build_bundles.sh (variant `tma`). A = tma/bin/gpu_bench (the patch), B = gpu_bench_base (HEAD).
# Correctness first (A's tests: twins, e4m3, low precision, path U's tile with the moved encoder, the index=wgmma
# plans; sanitizers on a prefill whose chunks take the bulk copies), then the index branch A/B at 32K and 128K.
source scripts/device/head_bundle.sh
tar xJf .devbuild/carry/tma.tar.xz
T=.devbuild/tma/bin
export PYTHONUNBUFFERED=1 STEPS_BUDGET=580
source scripts/device/steps.sh
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
step twins 150 $T/gpu_twins_test
grep -E "bit-identical|refused" $OUT/twins.log | head -n 12
step e4m3 60 $T/gpu_e4m3_test
step lowp 90 $T/gpu_lowp_test
step union 60 $T/gpu_union_tile_test
step plans 150 env MSA_GPU_PLANS_MATCHING=index=wgmma $T/gpu_plans_test
step memcheck 60 compute-sanitizer --tool memcheck $T/gpu_bench prefill 4096 1
tail -n 1 $OUT/memcheck.log
step synccheck 60 compute-sanitizer --tool synccheck $T/gpu_bench prefill 4096 1
tail -n 1 $OUT/synccheck.log

#!/usr/bin/env bash
# The index kernel's key tiles by bulk tensor copy (bench/results/index_tma_2026-12-05.md). Carry .devbuild/carry
# after scripts/device/build_bundles.sh. A = tma/bin/gpu_bench, B = gpu_bench_base: in the calls of 2026-12-05 A was
# the patch and B its base (47a1f03); since it landed, A is HEAD and B HEAD with cp_async_keys.patch.
# In order of need, for a call that may be cut short: the index twins on A (wgmma against mma.sync bit for bit on
# prefill chunks, which take the bulk copies, and batched decode), the index branch A/B at 32K and 128K (interleaved), then
# e4m3, path U's tile (the moved encoder) and memcheck of a prefill.
source scripts/device/head_bundle.sh
tar xJf .devbuild/carry/tma.tar.xz
T=.devbuild/tma/bin
export PYTHONUNBUFFERED=1 STEPS_BUDGET=${STEPS_BUDGET:-560}
source scripts/device/steps.sh
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
step twins 50 $T/gpu_twins_test --gtest_filter='*WgmmaIndex*:*BatchedDecodeIndex*'
grep -E "bit-identical|refused" $OUT/twins.log | head -n 6
step index32 60 python3 bench/gpu_index_bench.py --bins tma=$T/gpu_bench,head=$T/gpu_bench_base --out $OUT \
  --prefill 32768 --decode '' --rounds 2 --tag tma32
tail -n 4 $OUT/index32.log
step index128 120 python3 bench/gpu_index_bench.py --bins tma=$T/gpu_bench,head=$T/gpu_bench_base --out $OUT \
  --prefill 131072 --decode '' --rounds ${ROUNDS_128K:-2} --tag tma128
tail -n 4 $OUT/index128.log
step e4m3 40 $T/gpu_e4m3_test
step union 40 $T/gpu_union_tile_test
step memcheck 60 compute-sanitizer --tool memcheck $T/gpu_bench prefill 4096 1
tail -n 1 $OUT/memcheck.log

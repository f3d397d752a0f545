#!/usr/bin/env bash
# Call 3 of bench/results/kv_outer_ws_2026-12-06.md (carry .devbuild/carry after scripts/device/build_bundles.sh at
# the commit whose routed takes kv-outer-ws's tiles for path K): the twin test, path U's test (routed's rows) and
# routed's plans under the oracle; the 128K prefill under kv-outer-wgmma-p16, kv-outer-ws and routed on four
# selections against torch SDPA (bench/gpu_selection_bench.py, ceilings measured in the same run); then the decode
# batches under kv-outer-wgmma-p16 and kv-outer-ws (bench/gpu_decode_bench.py, its copy ceiling measured there).
set -uo pipefail
source scripts/device/head_bundle.sh
export COMMIT=${COMMIT:-unknown} PYTHONUNBUFFERED=1 STEPS_BUDGET=${STEPS_BUDGET:-560}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
source scripts/device/steps.sh
step twins 60 $B/gpu_twins_test --gtest_filter='*WarpSpecialized*'
grep -E "bit-identical|Failure" $OUT/twins.log | head -n 4
step union_tile 90 $B/gpu_union_tile_test
step plans 90 env MSA_GPU_PLANS_MATCHING="topk=warp,lists=general,attend=routed" $B/gpu_plans_test
grep -E "Failure" $OUT/plans.log | head -n 4
step selection 200 python3 bench/gpu_selection_bench.py --bin $B/gpu_bench --out $OUT --prefill 131072 \
  --plans "attend=kv-outer-wgmma-p16;attend=kv-outer-ws;attend=routed" \
  --selections indexer:random,random,overlap90,pages --reps 3 --sdpa --tag ws
grep -E '^\| 131072|SDPA|ceiling' $OUT/selection.log | head -n 16
step decode 100 python3 bench/gpu_decode_bench.py --bin $B/gpu_bench --out $OUT \
  --plans "attend=kv-outer-wgmma-p16;attend=kv-outer-ws" --shapes 8x16x65536,128x1x32768,4x1x4096 --tag ws
tail -n 10 $OUT/decode.log

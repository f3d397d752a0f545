#!/usr/bin/env bash
# Call 3 of bench/results/fused_decode_2026-12-06.md (carry .devbuild/carry after scripts/device/build_bundles.sh at
# the commit that lands fused-decode merging from global memory at 2 CTAs an SM): its twin test, synccheck, and the
# decode steps under split-k and fused-decode.
set -uo pipefail
source scripts/device/head_bundle.sh
export COMMIT=${COMMIT:-unknown} PYTHONUNBUFFERED=1 STEPS_BUDGET=${STEPS_BUDGET:-120}
source scripts/device/steps.sh
step twins 30 $B/gpu_fused_decode_test
grep -E "fused-decode =|Failure|SKIPPED" $OUT/twins.log | head -n 6
step synccheck 30 compute-sanitizer --tool synccheck $B/gpu_fused_decode_test --gtest_filter='*Bits*'
step decode 40 python3 bench/gpu_decode_bench.py --bin $B/gpu_bench --out $OUT \
  --plans "index=wgmma,topk=cta,attend=split-k;index=wgmma,topk=cta,attend=fused-decode" \
  --shapes 1x1x4096,2x1x4096,1x1x8192 --tag final
tail -n 6 $OUT/decode.log

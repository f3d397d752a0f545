#!/usr/bin/env bash
# Call 2 of bench/results/fused_decode_2026-12-06.md (carry .devbuild/carry after scripts/device/build_bundles.sh at
# the commit whose fused-decode merges over distributed shared memory, at 2 CTAs an SM): call 1's twin test and
# sanitizers, split-k's twin test (its tile's partials now written through GlobalPartials), then the decode steps of
# call 1 under split-k and fused-decode (index wgmma), and fused-decode merging from global memory as in call 1 (the
# fglobal bundle: global_merge.patch), two interleaved rounds; gpu_bench fails a row whose step graph's selection, out
# or lse differ from the separate stages' run.
set -uo pipefail
source scripts/device/head_bundle.sh
tar xJf .devbuild/carry/fglobal.tar.xz
export COMMIT=${COMMIT:-unknown} PYTHONUNBUFFERED=1 STEPS_BUDGET=${STEPS_BUDGET:-540}
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader
source scripts/device/steps.sh
step twins 60 $B/gpu_fused_decode_test
grep -E "fused-decode =|Failure|SKIPPED" $OUT/twins.log | head -n 6
step split_k_twins 60 $B/gpu_twins_test --gtest_filter='*SplitK*'
for tool in synccheck racecheck; do
  step $tool 120 compute-sanitizer --tool $tool $B/gpu_fused_decode_test --gtest_filter='*Bits*'
done
PLANS="index=wgmma,topk=cta,attend=split-k;index=wgmma,topk=cta,attend=fused-decode"
for round in 1 2; do
  step decode_$round 90 python3 bench/gpu_decode_bench.py --bin $B/gpu_bench --out $OUT --plans "$PLANS" \
    --shapes 1x1x4096,2x1x4096,1x1x8192,4x1x4096 --tag round$round
  tail -n 9 $OUT/decode_$round.log
  step global_$round 60 python3 bench/gpu_decode_bench.py --bin .devbuild/fglobal/bin/gpu_bench --out $OUT \
    --plans "index=wgmma,topk=cta,attend=fused-decode" --shapes 1x1x4096,2x1x4096,1x1x8192,4x1x4096 \
    --tag global_round$round
  tail -n 5 $OUT/global_$round.log
done

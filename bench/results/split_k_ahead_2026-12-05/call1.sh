#!/usr/bin/env bash
# Call 1 of bench/results/split_k_ahead_2026-12-05.md, HEAD's binaries (build_bundles.sh's head bundle): the checks of
# attend=split-k-ahead (kv-outer's bits, its runs with a block of -inf scores), the -inf block test on the build
# without that fix (the nofix bundle: it must fail), then the decode step with split-k-ahead against auto's split-k,
# two rounds, each running both plans at every shape back to back; gpu_bench fails a row whose step graph (the
# partials forked beside the index branch) gives other bits than the stream run.
set -uo pipefail
source scripts/device/head_bundle.sh
tar xJf .devbuild/carry/nofix.tar.xz
export COMMIT=${COMMIT:-unknown} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader
source scripts/device/steps.sh
step twins 120 $B/gpu_twins_test --gtest_filter='*SplitKKernels*'
grep -E 'bit-identical' $OUT/twins.log
step lowp_overflow 60 $B/gpu_lowp_test --gtest_filter='*Weighs*'
grep -E 'main-branch runs|Failure' $OUT/lowp_overflow.log | head -n 6
step nofix_overflow 60 .devbuild/nofix/bin/gpu_lowp_test --gtest_filter='*Weighs*'
grep -E 'sequences, attend=' $OUT/nofix_overflow.log | sed 's/: .*//' | sort | uniq -c | head -n 24
for round in 1 2; do
  step decode_ahead_r$round 130 python3 bench/gpu_decode_bench.py --bin $B/gpu_bench --out $OUT \
    --shapes 1x1x4096,2x1x4096,1x1x8192,1x1x16384 --plans 'attend=auto;attend=split-k-ahead' --tag ahead_r$round
  grep -E '^\| [0-9]' $OUT/decode_ahead_r$round.log | cut -d'|' -f2,3,7,11,12,14,15
done

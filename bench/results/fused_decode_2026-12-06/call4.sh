#!/usr/bin/env bash
# Call 4 of bench/results/fused_decode_2026-12-06.md (carry .devbuild/carry after scripts/device/build_bundles.sh at
# d0238ec, which builds the variant):
# fused-decode with the K and V rows of each CTA's scored blocks prefetched into L2 while it scores (variant
# prefetch: prefetch_l2.patch) against HEAD. Its twin test (the separate stages' bits), then the decode steps, two
# interleaved rounds.
set -uo pipefail
source scripts/device/head_bundle.sh
tar xJf .devbuild/carry/sync.tar.xz
V=.devbuild/sync/bin
timeout 60 $V/gpu_fused_decode_test_prefetch >$OUT/twins.log 2>&1
echo "twins (prefetch): exit $?: $(grep -E 'fused-decode =|FAILED  \]' $OUT/twins.log | head -n 3 | paste -sd' ')"
P="index=wgmma,topk=cta,attend=split-k;index=wgmma,topk=cta,attend=fused-decode"
for round in 1 2; do
  for build in head prefetch; do
    bin=$B/gpu_bench
    [ $build = prefetch ] && bin=$V/gpu_bench_prefetch
    timeout 60 python3 bench/gpu_decode_bench.py --bin $bin --out $OUT --plans "$P" \
      --shapes 1x1x4096,2x1x4096,1x1x8192 --tag ${build}_$round >$OUT/now.log 2>&1
    echo "== $build round $round: exit $?"
    grep -E '^\| [0-9]' $OUT/now.log | awk -F'|' '{print $2, $3, $12, $15}'
    { echo "== $build round $round"; cat $OUT/now.log; } >>$OUT/decode.log
  done
done
rm -f $OUT/*.json $OUT/*.md $OUT/now.log

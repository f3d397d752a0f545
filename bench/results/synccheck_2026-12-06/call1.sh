#!/usr/bin/env bash
# Call 1 of bench/results/synccheck_2026-12-06.md (carry .devbuild/carry after scripts/device/build_bundles.sh at
# d0238ec, which builds the variants, and repro.cu built into .devbuild/carry/synccheck_repro with the command below):
# which build and which barrier compute-sanitizer's synccheck flags. HEAD's fused-decode and split-k twin tests, and the
# variants hoist (OneQueryTile's S loop with the warp's skip outside the dim steps: hoist.patch) and nocap
# (fused-decode without the 2-CTAs-an-SM register cap: nocap.patch). Each log is summarized: errors by PC, by block,
# by warp (the first 100000 printed). Then the decode steps of HEAD and hoist, split-k and fused-decode, two interleaved
# rounds. First repro.cu, a minimal kernel of the same shape, under synccheck.
set -uo pipefail
source scripts/device/head_bundle.sh
tar xJf .devbuild/carry/sync.tar.xz
V=.devbuild/sync/bin
summary() {
  grep -oE '\+0x[0-9a-f]+|in block \([0-9]+|by thread \([0-9]+|Divergent thread\(s\) in [a-z]+|ERROR SUMMARY: [0-9]+' "$1" |
    awk '/^by thread/{sub(/by thread \(/, ""); print "warp " int($0 / 32); next} {print}' | sort | uniq -c | sort -rn | head -n 12
  grep -E 'bit-identical|separate stages on|PASSED|FAILED  \]' "$1" | head -n 4
}
check() {  # name, binary, gtest filter
  timeout 80 compute-sanitizer --tool synccheck --print-limit 100000 "$2" --gtest_filter="$3" >"$OUT/$1.log" 2>&1
  echo "== $1: exit $?"
  summary "$OUT/$1.log"
  xz -9 "$OUT/$1.log"
}
timeout 60 compute-sanitizer --tool synccheck .devbuild/carry/synccheck_repro >$OUT/repro.log 2>&1
echo "== repro (repro.cu, built here: nvcc -I. -Iinclude -O3 -gencode=arch=compute_90a,code=sm_90a): exit $?"
summary $OUT/repro.log
grep -E '^nkeys' $OUT/repro.log
check fused_head $B/gpu_fused_decode_test '*Bits*'
check splitk_head $B/gpu_twins_test '*SplitK*'
check fused_hoist $V/gpu_fused_decode_test_hoist '*Bits*'
check splitk_hoist $V/gpu_twins_test_hoist '*SplitK*'
check fused_nocap $V/gpu_fused_decode_test_nocap '*Bits*'
P="index=wgmma,topk=cta,attend=split-k;index=wgmma,topk=cta,attend=fused-decode"
for round in 1 2; do
  for build in head hoist; do
    bin=$B/gpu_bench
    [ $build = hoist ] && bin=$V/gpu_bench_hoist
    timeout 60 python3 bench/gpu_decode_bench.py --bin $bin --out $OUT --plans "$P" \
      --shapes 1x1x4096,2x1x4096,1x1x8192,8x16x65536 --tag ${build}_$round >$OUT/decode_now.log 2>&1
    echo "== decode $build round $round: exit $?"
    grep -E '^\| [0-9]' $OUT/decode_now.log | awk -F'|' '{print $2, $3, $12, $14, $15}'
    { echo "== $build round $round"; cat $OUT/decode_now.log; } >>$OUT/decode.log
  done
done
rm -f $OUT/*.json $OUT/*.md $OUT/decode_now.log

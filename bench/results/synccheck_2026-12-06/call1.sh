#!/usr/bin/env bash
# Call 1 of bench/results/synccheck_2026-12-06.md (carry .devbuild/carry after scripts/device/build_bundles.sh): which
# build and which barrier compute-sanitizer's synccheck flags. HEAD's fused-decode and split-k twin tests, and the
# variants hoist (OneQueryTile's S loop with the warp's skip outside the dim steps: hoist.patch) and nocap
# (fused-decode without the 2-CTAs-an-SM register cap: nocap.patch). Each log is summarized: errors by PC, by block,
# by warp (the first 100000 printed).
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
  timeout 150 compute-sanitizer --tool synccheck --print-limit 100000 "$2" --gtest_filter="$3" >"$OUT/$1.log" 2>&1
  echo "== $1: exit $?"
  summary "$OUT/$1.log"
  xz -9 "$OUT/$1.log"
}
check fused_head $B/gpu_fused_decode_test '*Bits*'
check splitk_head $B/gpu_twins_test '*SplitK*'
check fused_hoist $V/gpu_fused_decode_test_hoist '*Bits*'
check splitk_hoist $V/gpu_twins_test_hoist '*SplitK*'
check fused_nocap $V/gpu_fused_decode_test_nocap '*Bits*'

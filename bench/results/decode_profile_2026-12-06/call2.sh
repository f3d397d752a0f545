#!/usr/bin/env bash
# Call 2 of bench/results/decode_profile_2026-12-06.md (carry .devbuild/carry after scripts/device/build_bundles.sh):
# call 1's fused-decode kernel at 1 x 4K again, with the warp stall reasons that call 1's printed sections left out
# (each reason's warps per issued instruction).
set -uo pipefail
source scripts/device/head_bundle.sh
timeout 120 ncu --clock-control none --kernel-name regex:FusedDecodeKernel --launch-skip 6 --launch-count 1 \
  --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
  $B/gpu_bench decode 4096 12 'index=wgmma,topk=cta,attend=fused-decode' >$OUT/stalls.txt 2>&1
echo "== stalls: exit $?"
grep -E 'stalled' $OUT/stalls.txt | awk '$NF + 0 >= 0.05' | sort -k3 -gr | head -n 14

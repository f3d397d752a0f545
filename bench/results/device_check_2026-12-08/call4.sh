#!/usr/bin/env bash
# Call 4 of bench/results/device_check_2026-12-08.md (carry .devbuild/carry/head.tar.xz and bundle.tar.xz after
# scripts/device/build_bundles.sh): the batch-1 decode step at 4K and 256K under auto (index=wgmma) and index=mma, in
# one run against the copy ceiling measured in it.
set -uo pipefail
source scripts/device/head_bundle.sh
export COMMIT=${COMMIT:-unknown}
python3 bench/gpu_decode_bench.py --bin $B/gpu_bench --out $OUT --plans "auto;index=mma" \
  --shapes 1x1x4096,1x1x262144 --tag mma256k 2>&1 | tail -n 30

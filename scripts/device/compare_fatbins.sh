#!/usr/bin/env bash
# scripts/device/compare_fatbins.sh OLD NEW: the gpu backend's device code in two builds (or a saved baseline, see
# compare_fatbins.py save) compared kernel by kernel, the sources mapped from their pre-stage-folder names. The
# benchmark driver's own helper kernels (gpu_bench*.cu) are left out. Exit status 0 when every kernel is identical.
set -euo pipefail
here=$(dirname "$0")
exec python3 "$here/compare_fatbins.py" compare "$1" "$2" \
  --map common_kernels.cu=common/common_kernels.cu --map exact_kernels.cu=exact/exact_kernels.cu \
  --map index_kernels.cu=index/index_kernels.cu --map lowp_kernels.cu=index/lowp_kernels.cu \
  --map block_max_wgmma.cu=index/block_max_wgmma.cu --map block_max_fp8.cu=index/block_max_fp8.cu \
  --map attend_kernels.cu=attend/q_outer_attend.cu --map kv_outer_attend.cu=attend/kv_outer_attend.cu \
  --map kv_outer_wgmma.cu=attend/kv_outer_wgmma.cu \
  --exclude gpu_bench.cu --exclude gpu_bench_checks.cu

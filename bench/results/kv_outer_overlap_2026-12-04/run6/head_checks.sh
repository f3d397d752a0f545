#!/usr/bin/env bash
# bench/results/kv_outer_overlap_2026-12-04/run6/head_checks.sh (the script of run 6, kept with its results): the
# device checks the previous stop left undone, on the committed kernels (the early-S experiment reverted): twins,
# low-precision and union-tile tests, gpu_plans_test over the wgmma KV-outer plans at bf16 and fp16, the gpu
# conformance suite, the smoke golden suite generated on the reference and verified on the gpu at exact, bf16 and fp16,
# and auto's decode steps (bench/gpu_decode_bench.py, copy ceiling measured in the run). Binaries as scripts/device/kernel_check.sh (BIN, LIBS; msa there
# too). Usage: OUT_DIR.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
OUT_DIR=$1
BIN=$(cd "${BIN:-.devbuild/union/bin}" && pwd)
export LD_LIBRARY_PATH=$(cd "${LIBS:-.devbuild/union/lib}" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OMP_NUM_THREADS=$(nproc)
mkdir -p "$OUT_DIR"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
verdict() { grep -E '^\[  (PASSED|FAILED) |^\[  SKIPPED |runnable plans run|^(routed|device route)' "$1" | tr '\n' ' '; }
check() {  # NAME LIMIT COMMAND...
  local name=$1 limit=$2 start=$SECONDS
  shift 2
  timeout "$limit" "$@" >"$OUT_DIR/$name.log" 2>&1
  echo "$name exit $? in $((SECONDS - start)) s: $(verdict "$OUT_DIR/$name.log")"
}
check twins 90 "$BIN/gpu_twins_test"
check lowp 60 "$BIN/gpu_lowp_test"
check union 60 "$BIN/gpu_union_tile_test"
check conformance 60 "$BIN/conformance_test" --gtest_filter='*/gpu_*'
MSA_GPU_PLANS_MATCHING=attend=kv-outer-wgmma check plans_wgmma 200 "$BIN/gpu_plans_test" \
  --gtest_filter='Precisions/GpuPlans.*/bf16:Precisions/GpuPlans.*/fp16'
tail -n 3 "$OUT_DIR/plans_wgmma.log"
check golden_generate 120 "$BIN/msa" golden generate --suite smoke --dir "$OUT_DIR/golden"
for p in exact bf16 fp16; do
  check "golden_verify_$p" 60 "$BIN/msa" golden verify --dir "$OUT_DIR/golden" --backend gpu --precision $p
  tail -n 1 "$OUT_DIR/golden_verify_$p.log"
done
rm -rf "$OUT_DIR/golden"
timeout 150 python3 bench/gpu_decode_bench.py --bin "$BIN/gpu_bench" --out "$OUT_DIR" --plans "" \
  --shapes 1x1x4096,1x1x262144,128x1x4096,128x1x32768,8x16x65536,64x4x16384 --tag auto_head 2>&1 | tail -n 12

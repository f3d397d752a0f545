#!/usr/bin/env bash
# scripts/device/training_check.sh: the training functions (SPEC section 8) on a CUDA machine, in one call: the gpu
# backend's training test (exact mode bit for bit against the reference, bf16 / fp16 within their bound, device views,
# determinism) and the split gpu tests its host adaptor touches, python/tests with CUDA tensors, then the training
# benchmark (bench/gpu_training_bench.py: the bf16 backward against torch SDPA's dense backward, in the same run).
# Binaries are built elsewhere with nvcc and carried:
#   BIN=dir   gpu_training_test, gpu_support_test, gpu_exact_test, gpu_lowp_test, gpu_bench, gpu_training_bench
#             (default .devbuild/train/bin); LIBS=dir: libhwy.so.1, libgomp.so.1 (default .devbuild/train/lib);
#   the Python package as scripts/device/python_cuda_check.sh takes it (.devbuild/py).
# Usage: scripts/device/training_check.sh [OUT_DIR] (default: $OUT); LENGTHS (default 32768,131072) for the benchmark.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT_DIR=${1:-${OUT:-$PWD/training_check_out}}
BIN=$(cd "${BIN:-.devbuild/train/bin}" && pwd)
mkdir -p "$OUT_DIR"
export LD_LIBRARY_PATH=$(cd "${LIBS:-.devbuild/train/lib}" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
rc=0
summary=()
for test in gpu_training_test gpu_support_test gpu_exact_test gpu_lowp_test; do
  start=$SECONDS
  timeout 300 "$BIN/$test" --gtest_output="json:$OUT_DIR/$test.json" >"$OUT_DIR/$test.log" 2>&1
  status=$?
  [ $status -ne 0 ] && rc=1
  summary+=("$test: exit $status in $((SECONDS - start)) s, $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT_DIR/$test.log" | tr '\n' ' ')")
done
scripts/device/python_cuda_check.sh "$OUT_DIR/python" >"$OUT_DIR/python.log" 2>&1 || rc=1
summary+=("python/tests: $(tail -1 "$OUT_DIR/python.log")")
PYTHONUNBUFFERED=1 python3 bench/gpu_training_bench.py --bin "$BIN" --out "$OUT_DIR" \
  --lengths "${LENGTHS:-32768,131072}" 2>"$OUT_DIR/bench.log" || rc=1
printf '%s\n' "${summary[@]}"
exit $rc

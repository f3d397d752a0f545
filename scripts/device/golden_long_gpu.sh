#!/usr/bin/env bash
# scripts/device/golden_long_gpu.sh: the golden suite "long" (an M3 layer decoding 16 queries over 2^20 keys) generated
# as one shard on the GPU (--backend gpu, exact mode), timed; its MANIFEST.json and the case's outputs.safetensors
# (small: the 2.4 GB of inputs stay on the device) are copied to the output folder, to be compared with a CPU run's.
#   BIN=dir   the folder holding the msa tool (default .devbuild/py/bin)
#   LIBS=dir  libhwy.so.1, libgomp.so.1 (default .devbuild/py/lib)
# Usage: scripts/device/golden_long_gpu.sh [OUT_DIR]   (default: $OUT, else ./golden_long_out)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT_DIR=${1:-${OUT:-$PWD/golden_long_out}}
mkdir -p "$OUT_DIR"
MSA=$(cd "${BIN:-.devbuild/py/bin}" && pwd)/msa
export LD_LIBRARY_PATH=$(cd "${LIBS:-.devbuild/py/lib}" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
WORK=$(mktemp -d)
nvidia-smi -L | tee "$OUT_DIR/environment.txt"
start=$EPOCHREALTIME
"$MSA" golden generate --suite long --dir "$WORK/long" --shard 0/1 --backend gpu 2>&1 | tee "$OUT_DIR/log.txt"
status=${PIPESTATUS[0]}
awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "wall seconds: %.2f\n", b - a }' | tee -a "$OUT_DIR/log.txt"
du -sh "$WORK/long"/* | tee -a "$OUT_DIR/log.txt"
cp "$WORK/long/MANIFEST.json" "$OUT_DIR/" 2>/dev/null
cp "$WORK"/long/*/outputs.safetensors "$OUT_DIR/" 2>/dev/null
rm -rf "$WORK"
exit $status

#!/usr/bin/env bash
# scripts/device/golden_shards_gpu.sh: golden suites generated on the GPU in 2 shards (--backend gpu), merged, and
# compared byte for byte with the MANIFEST.json of the same suites generated on a CPU with the reference backend
# (carried in EXPECTED). The files and manifests must not depend on the backend that computed the exact outputs.
#   BIN=dir       the folder holding the msa tool (default .devbuild/py/bin)
#   LIBS=dir      libhwy.so.1, libgomp.so.1 (default .devbuild/py/lib)
#   EXPECTED=dir  <suite>_MANIFEST.json from the CPU (default .devbuild/py/expected)
# Usage: scripts/device/golden_shards_gpu.sh [OUT_DIR]   (default: $OUT, else ./golden_shards_out): a log and a
# table per suite; exit 0 when every merged manifest is identical.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT_DIR=${1:-${OUT:-$PWD/golden_shards_out}}
mkdir -p "$OUT_DIR"
MSA=$(cd "${BIN:-.devbuild/py/bin}" && pwd)/msa
EXPECTED=$(cd "${EXPECTED:-.devbuild/py/expected}" && pwd)
export LD_LIBRARY_PATH=$(cd "${LIBS:-.devbuild/py/lib}" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
WORK=$(mktemp -d)
status=0
nvidia-smi -L | tee "$OUT_DIR/environment.txt"
printf '| suite | shard 0/2 (s) | shard 1/2 (s) | merge | MANIFEST.json vs the CPU reference run |\n|---|---|---|---|---|\n' \
  > "$OUT_DIR/table.md"
for suite in smoke full training; do
  times=()
  for shard in 0 1; do
    start=$EPOCHREALTIME
    "$MSA" golden generate --suite $suite --dir "$WORK/$suite" --shard $shard/2 --backend gpu \
      >> "$OUT_DIR/log.txt" 2>&1 || status=1
    times+=("$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')")
  done
  merge=ok
  "$MSA" golden merge --dir "$WORK/$suite" "$WORK/$suite" >> "$OUT_DIR/log.txt" 2>&1 || { merge=FAILED; status=1; }
  same=identical
  cmp -s "$WORK/$suite/MANIFEST.json" "$EXPECTED/${suite}_MANIFEST.json" || { same=DIFFERENT; status=1; }
  printf '| %s | %.2f | %.2f | %s | %s |\n' $suite "${times[0]}" "${times[1]}" $merge $same >> "$OUT_DIR/table.md"
done
grep -h '"computed_by"' "$WORK"/*/SHARD-*.json | sort | uniq -c | tee -a "$OUT_DIR/log.txt"
cat "$OUT_DIR/table.md"
rm -rf "$WORK"
exit $status

#!/usr/bin/env bash
# bench/gpu_bench.sh: the gpu benchmark's device call: the correctness run first (scripts/device/device_check.sh
# with the steps in SKIP left out, plus compute-sanitizer memcheck and racecheck on the benchmark driver at
# shapes that take the new kernels), then bench/gpu_bench.py (ceilings, torch SDPA, FlexAttention and our
# kernels side by side). Results: OUT_DIR/check/ (device check summary) and OUT_DIR/gpu_bench_<date>.{json,md}.
#
# Usage: BUILD=.devbuild/build-gpu LIBS=.devbuild/lib bench/gpu_bench.sh [OUT_DIR] [gpu_bench.py options]
#   CHECK=0   skip the correctness run      SKIP="..."  device_check steps to leave out
# A tree built on another machine is used as it is (see scripts/device/device_check.sh's header); COMMIT names the source.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=${1:-${OUT:-$PWD/gpu_bench_out}}
shift || true
BUILD=${BUILD:-build-gpu}
[ -n "${LIBS:-}" ] && export LD_LIBRARY_PATH="$(cd "$LIBS" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
mkdir -p "$OUT_DIR"
rc=0
if [ "${CHECK:-1}" = 1 ]; then
  QUICK=1 SKIP=${SKIP:-} DEADLINE=${CHECK_DEADLINE:-300} BUILD="$BUILD" scripts/device/device_check.sh "$OUT_DIR/check" >/dev/null || rc=1
  cat "$OUT_DIR/check/summary.md" | sed -n '1,30p'
  B="$BUILD/bench/gpu_bench"
  for args in "prefill 512 1" "decode 8192 1"; do
    for tool in memcheck racecheck; do
      if timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 "$B" $args >"$OUT_DIR/check/sanitizer.txt" 2>&1; then
        echo "compute-sanitizer $tool gpu_bench $args: clean"
      else
        echo "compute-sanitizer $tool gpu_bench $args: FAILED"; tail -20 "$OUT_DIR/check/sanitizer.txt"; rc=1
      fi
    done
  done
  rm -f "$OUT_DIR/check/sanitizer.txt"
fi
PYTHONUNBUFFERED=1 python3 bench/gpu_bench.py --bin "$BUILD/bench/gpu_bench" --out "$OUT_DIR" "$@" || rc=1
exit $rc

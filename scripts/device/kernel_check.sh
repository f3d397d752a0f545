#!/usr/bin/env bash
# scripts/device/kernel_check.sh: the gpu kernels on a CUDA machine, in one call: gpu tests (each with an optional
# gtest filter and its own time limit), compute-sanitizer on chosen tests and gpu_bench runs, then the benchmarks asked
# for: bench/gpu_selection_bench.py (prefill main branch by selection and plan), bench/gpu_decode_bench.py (decode step
# by plan).
# Binaries are built elsewhere with nvcc and carried:
#   BIN=dir   the tests named in TESTS and SANITIZE, and gpu_bench (default .devbuild/union/bin);
#   LIBS=dir  libhwy.so.1, libgomp.so.1 (default .devbuild/union/lib).
# Variables: TESTS="test[:gtest_filter] ..." (default none), SANITIZE="test:filter ..." (memcheck and racecheck;
#   default none), SANITIZE_BENCH="gpu_bench args;..." (memcheck, racecheck and synccheck on each gpu_bench run),
#   BENCH=1 to run the selection benchmark with PLANS (';'-separated), SELECTIONS, PREFILL, SDPA=1, TAG, REPS;
#   DECODE=1 to run the decode benchmark with DECODE_PLANS (';'-separated), DECODE_SHAPES, TAG; DEADLINE seconds for
#   the whole call (default 570): a step that would start past it is skipped. PROFILE="gpu_bench args;...": each run's
#   first PROFILE_KERNELS (default 20) kernels timed one by one by Nsight Compute (gpu__time_duration,
#   clocks left alone), as CSV.
# Usage: scripts/device/kernel_check.sh [OUT_DIR] (default: $OUT). Prints one line per step.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT_DIR=${1:-${OUT:-$PWD/kernel_check_out}}
BIN=$(cd "${BIN:-.devbuild/union/bin}" && pwd)
mkdir -p "$OUT_DIR"
export LD_LIBRARY_PATH=$(cd "${LIBS:-.devbuild/union/lib}" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
DEADLINE=${DEADLINE:-570}
rc=0
summary=()

# step NAME LIMIT COMMAND...: runs COMMAND under `timeout LIMIT` (cut to the time left), logs to OUT_DIR/NAME.log.
step() {
  local name=$1 limit=$2
  shift 2
  local left=$((DEADLINE - SECONDS))
  if [ "$left" -lt 20 ]; then
    summary+=("$name: SKIPPED (no time left)")
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local start=$SECONDS
  timeout "$limit" "$@" >"$OUT_DIR/$name.log" 2>&1
  local status=$?
  [ $status -ne 0 ] && rc=1
  summary+=("$name: exit $status in $((SECONDS - start)) s, $(grep -E '^\[  (PASSED|FAILED|SKIPPED) |^(union-tile|routed|device route)' "$OUT_DIR/$name.log" | tr '\n' ' ')")
}

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for entry in ${TESTS:-}; do
  test=${entry%%:*}
  filter=${entry#*:}
  [ "$filter" = "$entry" ] && filter='*'
  step "$test" 400 "$BIN/$test" --gtest_filter="$filter" --gtest_output="json:$OUT_DIR/$test.json"
done
for entry in ${SANITIZE:-}; do
  test=${entry%%:*}
  filter=${entry#*:}
  for tool in memcheck racecheck; do
    step "${test}_$tool" 240 compute-sanitizer --tool $tool --error-exitcode 9 "$BIN/$test" --gtest_filter="$filter"
  done
done
IFS=';' read -ra bench_runs <<<"${SANITIZE_BENCH:-}"
for i in "${!bench_runs[@]}"; do
  for tool in memcheck racecheck synccheck; do
    # shellcheck disable=SC2086  # the run's arguments split on spaces
    step "gpu_bench_${i}_$tool" 200 compute-sanitizer --tool $tool --error-exitcode 9 "$BIN/gpu_bench" ${bench_runs[$i]}
  done
done
IFS=';' read -ra profile_runs <<<"${PROFILE:-}"
for i in "${!profile_runs[@]}"; do
  # shellcheck disable=SC2086  # the run's arguments split on spaces
  step "profile_$i" 200 ncu --clock-control none --launch-count "${PROFILE_KERNELS:-20}" \
    --metrics gpu__time_duration.sum --csv "$BIN/gpu_bench" \
    ${profile_runs[$i]}
done
if [ "${BENCH:-0}" = 1 ]; then
  step bench 400 env PYTHONUNBUFFERED=1 python3 bench/gpu_selection_bench.py --bin "$BIN/gpu_bench" --out "$OUT_DIR" \
    --prefill "${PREFILL:-131072}" --reps "${REPS:-5}" --plans "${PLANS:-attend=kv-outer-wgmma}" \
    --selections "${SELECTIONS:-}" ${SDPA:+--sdpa} ${TAG:+--tag "$TAG"}
  tail -30 "$OUT_DIR/bench.log"
fi
if [ "${DECODE:-0}" = 1 ]; then
  step decode 400 env PYTHONUNBUFFERED=1 python3 bench/gpu_decode_bench.py --bin "$BIN/gpu_bench" --out "$OUT_DIR" \
    --plans "${DECODE_PLANS:-}" ${DECODE_SHAPES:+--shapes "$DECODE_SHAPES"} ${TAG:+--tag "$TAG"}
  tail -20 "$OUT_DIR/decode.log"
fi
printf '%s\n' "${summary[@]}"
exit $rc

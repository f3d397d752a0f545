#!/usr/bin/env bash
# scripts/device/ab_bench.sh: an interleaved A/B of two gpu_bench builds on the same inputs, for a change that must
# not alter the values (a kernel's schedule, its registers): A = BIN/gpu_bench, B = BIN/gpu_bench_base (the commit
# before). Each round runs every case under A, then under B, so that clocks and heat drift alike for both.
# Cases: the prefill main branch at N (default 131072) for each plan of PLANS (';'-separated, default
# attend=kv-outer-wgmma-p16; set and empty: no prefill case) and each selection of SELECTIONS (','-separated
# generators of bench/selections.h, default random); then the decode step for each shape of DECODE_SHAPES
# (','-separated BATCHxQ_LENxKV, default none) under DECODE_PLAN (default: auto). ROUNDS (default 2), REPS (default 5).
# LIMIT (seconds, default none): no run starts that could end past it (by the longest run so far); the summary then
# covers the runs done, so that a device call's time limit never loses it.
# Prints one line per run (main_ms, or the decode step back to back: step_stream_ms) and, per case, the ratio of
# the medians over rounds, A / B, and whether A's outputs have B's bits (gpu_bench's outputs_digest of out and lse,
# every round: "same bits", else "BITS DIFFER"; a change of values is then the change's to explain). Binaries as
# scripts/device/kernel_check.sh (BIN, LIBS).
# Usage: scripts/device/ab_bench.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=$(cd "${BIN:-.devbuild/union/bin}" && pwd)
export LD_LIBRARY_PATH=$(cd "${LIBS:-.devbuild/union/lib}" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
N=${N:-131072} ROUNDS=${ROUNDS:-2} REPS=${REPS:-5}
IFS=';' read -ra plans <<<"${PLANS-attend=kv-outer-wgmma-p16}"
IFS=',' read -ra selections <<<"${SELECTIONS:-random}"
IFS=',' read -ra shapes <<<"${DECODE_SHAPES:-}"
results=$(mktemp)
longest=0 stopped=0
field() { grep -o "\"$1\": [0-9.]*" | head -n 1 | awk '{print $2}'; }
run() {  # CASE BUILD ARGS...: one gpu_bench run, its time and checks appended to $results (none past LIMIT)
  local name=$1 build=$2 key=main_ms start=$SECONDS
  shift 2
  if [ "$stopped" = 1 ] || { [ -n "${LIMIT:-}" ] && [ $((SECONDS + longest)) -gt "$LIMIT" ]; }; then
    [ "$stopped" = 1 ] || echo "== stopped at ${SECONDS} s: the next run could pass LIMIT=${LIMIT} s"
    stopped=1
    return
  fi
  [ "$1" = decode ] && key=step_stream_ms
  local out
  out=$(timeout 60 "$BIN/$build" "$@" 2>&1)
  local ms bad digest
  ms=$(echo "$out" | field "$key")
  digest=$(echo "$out" | grep -o '"outputs_digest": "[0-9a-f]*"' | head -n 1 | awk -F'"' '{print $4}')
  local checks='"nonfinite_outputs": [0-9]*\|"bad_selection_rows": [0-9]*\|"graph_bits_differ": [0-9]*'
  bad=$(echo "$out" | grep -o "$checks" | awk '{s += $2} END {print s + 0}')
  echo "$name $build: ${key} ${ms:-none}, nonfinite + bad rows + graph bits differ ${bad}"
  echo "$name $build ${ms:-nan} ${digest:-none}" >>"$results"
  [ $((SECONDS - start)) -gt "$longest" ] && longest=$((SECONDS - start))
}
for round in $(seq "$ROUNDS"); do
  [ "$stopped" = 1 ] && break
  echo "== round $round"
  for plan in "${plans[@]}"; do
    for selection in "${selections[@]}"; do
      for build in gpu_bench gpu_bench_base; do
        run "prefill:$N:$selection:$plan" "$build" prefill "$N" "$REPS" "selection=$selection" $plan
      done
    done
  done
  for shape in "${shapes[@]}"; do
    IFS=x read -r batch q_len kv <<<"$shape"
    for build in gpu_bench gpu_bench_base; do
      run "decode:$shape:${DECODE_PLAN:-auto}" "$build" decode "$kv" 20 "batch=$batch" "q_len=$q_len" ${DECODE_PLAN:-}
    done
  done
done
echo "== A / B, medians over the rounds run (of $ROUNDS)"
python3 - "$results" <<'PY'
import collections, statistics, sys
times, digests = collections.defaultdict(list), collections.defaultdict(set)
for line in open(sys.argv[1]):
    case, build, ms, digest = line.split()
    times[(case, build)].append(float(ms))
    digests[case].add(digest)
for case in dict.fromkeys(c for c, _ in times):
    if (case, "gpu_bench_base") not in times:
        print(f"  {case}: A ran, B did not (stopped at LIMIT)")
        continue
    a, b = statistics.median(times[(case, "gpu_bench")]), statistics.median(times[(case, "gpu_bench_base")])
    if "none" in digests[case]:
        bits = "bits not compared (a build without outputs_digest)"
    else:
        bits = "same bits" if len(digests[case]) == 1 else "BITS DIFFER"
    print(f"  {case}: A {a:.4f}, B {b:.4f}, A / B {a / b:.3f}, {bits}")
PY
rm -f "$results"

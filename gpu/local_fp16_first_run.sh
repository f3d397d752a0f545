#!/usr/bin/env bash
# gpu/local_fp16_first_run.sh [OUT_DIR]: first device check of SPEC v2's local_blocks > 1 and score_format fp16 on the
# gpu backend (gpu/rank_row.cuh: the forced-blocks rule in every ranking kernel; RoundScoresToBinary16 and the fp16
# index_lse in gpu/common_kernels.cu, exact_kernels.cu, lowp_kernels.cu), one call of about 4-5 min. In order:
#   new_tests    gpu_backend_test's local-blocks and fp16-score tests: exact bit for bit against the reference (slots,
#                block_scores, index_lse, out, lse) and the binary16 overflow refused with its message; bf16/fp16 ranked
#                by their own block scores and equal to the reference on exact maxima, under every MSA_GPU_* choice
#                (index mma|wgmma|fp8 x top-k warp|fast x batched|per-sequence; attend kv-outer-wgmma|kv-outer x
#                direct|general lists, q-outer, part1)
#   conformance  conformance_test on the gpu backend only (every canonical case, local_* and *fp16_scores* included,
#                at exact, bf16 and fp16: own selection, reference selection, poison never read, outputs written)
#   memcheck     compute-sanitizer memcheck on conformance_test's gpu runs of the canonical local_* and *fp16_scores*
#                cases (small: 4 cases x 3 precisions)
#   other_tests  the rest of gpu_backend_test but GpuProperty (its earlier tests over every canonical and large
#                case, the new canonical ones included: exact bits, the oracle rules, wgmma vs mma, fast vs warp top-k,
#                batched vs per-sequence, ...), with whatever time is left (gpu/device_check.sh runs GpuProperty)
# then a table (step, rc, seconds, tests passed / failed / skipped, a note). Each step runs under `timeout`; DEADLINE
# (default 270 s) bounds the script: a step gets at most the seconds left, none starts with under 15 s left.
#
# Binaries: BUILD (default .devbuild/build-gpu) must hold tests/gpu_backend_test and tests/conformance_test, LIBS
# (default .devbuild/lib when it exists) the shared libraries they need that the device image lacks (libhwy.so.1,
# libgomp.so.1). The lent H200 image has CUDA but not the project's test dependencies (GoogleTest, rapidcheck, Highway,
# nlohmann-json, CLI11: gpu/device_check.sh), so build on the CPU machine (cmake -DMSA_ENABLE_CUDA=ON: sm_90a machine
# code) and lay the two binaries out with
#   gpu/local_fp16_first_run.sh pack [BUILD_DIR [DEST]]      (default: build -> .devbuild, about 18 MB)
# then carry DEST (or leave it untracked: what git does not ignore travels too). Without the binaries the script tries
# to build them on the device (cmake -DMSA_ENABLE_CUDA=ON, the two targets, -j$(nproc)); on the lent image that stops
# at the missing dependencies, and the table says so.
if [ "${1:-}" = pack ]; then  # on the CPU machine: the binaries of BUILD_DIR and their missing libraries into DEST
  set -euo pipefail
  cd "$(dirname "$0")/.."
  src=${2:-build} dest=${3:-.devbuild}
  [ -f "$src/gpu/libmsa_gpu.a" ] || { echo "pack: $src has no CUDA backend (configure with nvcc on the PATH)"; exit 1; }
  mkdir -p "$dest/build-gpu/tests" "$dest/lib"
  cp "$src/tests/gpu_backend_test" "$src/tests/conformance_test" "$dest/build-gpu/tests/"
  for lib in libhwy.so.1 libgomp.so.1; do
    cp -L "$(ldd "$src/tests/gpu_backend_test" | awk -v lib=$lib '$1 == lib {print $3}')" "$dest/lib/"
  done
  du -sh "$dest"
  exit 0
fi
cd "$(dirname "$0")/.." || exit 1
[ -z "${LIBS:-}" ] && [ -d .devbuild/lib ] && LIBS=.devbuild/lib
source gpu/first_run_lib.sh local_fp16_first_run_out 270 15 "${1:-}"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
unset MSA_GPU_INDEX_KERNEL MSA_GPU_TOPK_KERNEL MSA_GPU_INDEX_BATCH MSA_GPU_ATTEND_KERNEL MSA_GPU_KV_LISTS
declare -a STEPS SECS NOTES_
# step NAME SECONDS NOTE CMD...: first_run_lib's run, with its seconds and a note kept for the table.
step() {
  local n=$1 t=$2 note=$3 s=$SECONDS
  shift 3
  run "$n" "$t" "$@"
  STEPS+=("$n"); SECS+=($((SECONDS - s))); NOTES_+=("$note")
}
# The names of the tests that gtest output FILE marks MARK (FAILED, SKIPPED), each once (gtest lists them twice).
tests_marked() { grep "^\[ *$1 *\] [^0-9]" "$2" 2>/dev/null | sed -E 's/^\[[^]]*\] ([^ ,]+).*/\1/' | sort -u; }
summary() {
  echo
  printf '%-12s %-8s %7s %6s %6s %7s  %s\n' step rc seconds passed failed skipped note
  local i n f r passed failed skipped note
  for i in "${!STEPS[@]}"; do
    n=${STEPS[$i]} f="$O/${STEPS[$i]}.txt" note=${NOTES_[$i]}
    r=$(awk -v n="$n" '$1 == n {print $2}' "$O/rc.list" 2>/dev/null | tail -1)
    passed=$(grep -c '^\[       OK \]' "$f" 2>/dev/null)
    failed=$(tests_marked FAILED "$f" | wc -l) skipped=$(tests_marked SKIPPED "$f" | wc -l)
    [ "$r" = 124 ] && note="TIMEOUT (deadline): $note"
    [ "$r" = skipped ] && note="not run (deadline): $note"
    printf '%-12s %-8s %7s %6s %6s %7s  %s\n' "$n" "${r:-?}" "${SECS[$i]}" "${passed:-0}" "$failed" "$skipped" "$note"
    { grep -h 'ERROR SUMMARY' "$f" | tail -1; grep -h 'forced index-branch runs\|near-tie selection rows' "$f"
      tests_marked FAILED "$f" | head -8 | sed 's/^/FAILED /'; } 2>/dev/null | cut -c1-200 | sed 's/^/    /'
  done
  echo "local_fp16_first_run: rc=$rc, $((SECONDS - T0)) s (outputs in $O)"
}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
if [ ! -x "$B/tests/gpu_backend_test" ] || [ ! -x "$B/tests/conformance_test" ]; then
  echo "no binaries in $B: building them here"; B=build-gpu
  step build 240 "cmake -DMSA_ENABLE_CUDA=ON, gpu_backend_test and conformance_test" bash -c \
    "cmake -G Ninja -S . -B $B -DCMAKE_BUILD_TYPE=Release -DMSA_ENABLE_CUDA=ON -DMSA_BUILD_BENCH=OFF &&
     cmake --build $B -j$(nproc) --target gpu_backend_test conformance_test"
  [ $rc -eq 0 ] || { NOTES_[-1]="build failed: $(grep -m1 -i 'could not find\|error' "$O/build.txt" | cut -c1-150)"
    summary; exit 1; }
fi
T="$B/tests/gpu_backend_test"; C="$B/tests/conformance_test"
NEW='GpuBackend.*LocalBlocks*:GpuBackend.*Fp16*'
NEW_CANONICAL='EveryBackend/Conformance.*/gpu_*local_*:EveryBackend/Conformance.*/gpu_*fp16_scores*'
step new_tests 150 "gpu_backend_test $NEW" "$T" --gtest_filter="$NEW"
step conformance 90 "conformance_test, gpu backend only" "$C" --gtest_filter='EveryBackend/Conformance.*/gpu_*'
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
step memcheck 90 "compute-sanitizer memcheck, conformance_test $NEW_CANONICAL" \
  "$CS" --tool memcheck --error-exitcode 9 "$C" --gtest_filter="$NEW_CANONICAL"
step other_tests 600 "the rest of gpu_backend_test but GpuProperty.*" "$T" --gtest_filter="-$NEW:GpuProperty.*"
summary
exit $rc

#!/usr/bin/env bash
# scripts/device/device_check.sh: the gpu backend's proof on a CUDA machine, in one call. It runs, in order: the
# canonical cases on the gpu (exact bits / bf16 oracle), the conformance suite and the property tests with the gpu
# backend present, the gpu's own tests (every runnable kernel plan against the reference: tests/gpu_plans_test.cc),
# the conformance suite again under forced plans (MSA_GPU_PLAN: the kernels the default plan skips on this device),
# `msa golden generate` + `msa golden verify --backend gpu` (exact, bf16, fp16) on the smoke suite, an exact case
# of >= 128K keys bit for bit against the CPU reference, two runs bitwise identical, compute-sanitizer memcheck and
# racecheck on the canonical cases, and exact-mode timings of an M3-shaped layer at 128K tokens and of a 4096-query
# chunk over 1M tokens. It prints a summary table last and writes it (summary.md, summary.json) with the full log
# and the gtest reports under OUT_DIR.
#
# Usage: scripts/device/device_check.sh [OUT_DIR]        (default: $OUT, else ./device_check_out)
#   BUILD=dir   the build tree (default build-gpu). Without its binaries the script configures and builds it
#               with CUDA for sm_90a only (-DMSA_ENABLE_CUDA=ON, -j16). A tree built elsewhere (same layout:
#               tests/, tools/msa/msa, gpu/gpu_check) is used as it is.
#   LIBS=dir    shared libraries the binaries need that the machine lacks (added to LD_LIBRARY_PATH)
#   QUICK=1     skip the 1M timing
#   SKIP="a b"  steps to leave out (reported as SKIPPED), e.g. SKIP="time_128k racecheck property"
#   ONLY="p q"  when set, only the steps whose names match one of these shell patterns, e.g. ONLY="conformance_*"
#   PLANS_FILTER  gtest filter of gpu_plans_test (default '*': every runnable plan at every precision)
#   FORCED_PLANS  the MSA_GPU_PLAN values the conformance suite runs under (default below; "" for none)
#   COMMIT, DIRTY  what the summary names as the source (default: git rev-parse, git status)
#   DEADLINE=s  seconds the whole script may take (default 570): a step gets at most what is left, and steps
#               that no longer fit are reported as skipped, so the summary is always written
# A machine with CUDA but without the project's test dependencies: build here with nvcc, copy
# tests/{conformance_test,property_test,gpu_*_test}, tools/msa/msa and gpu/gpu_check into
# DIR/build-gpu/ with the same layout and libhwy.so.1, libgomp.so.1 into DIR/lib, and run with BUILD=DIR/build-gpu
# LIBS=DIR/lib. The gpu tests are listed before they run (DISCOVERY_MODE PRE_TEST), so `ctest -L gpu` in a tree
# built without a device runs them too; the binaries are called directly here for their JSON reports.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT_DIR=${1:-${OUT:-$PWD/device_check_out}}
DEADLINE=${DEADLINE:-570}
BUILD=${BUILD:-build-gpu}
PLANS_FILTER=${PLANS_FILTER:-*}
# The plans the default one leaves out on an sm_90a device, each kernel of a stage at least once (gpu/common/
# kernel_plan.cc's names): every main-branch kernel, the mma.sync index every non-Hopper card runs, the other top-k
# kernels, the general KV-outer lists and the per-sequence index branch on decode batches.
FORCED_PLANS=${FORCED_PLANS-attend=q-outer attend=gathered index=mma,attend=kv-outer attend=kv-outer-wgmma \
attend=kv-outer-wgmma-p16 attend=kv-outer-ws attend=union-tile attend=union-tile-ws attend=routed attend=split-k \
attend=fused-decode topk=warp topk=threshold topk=cta topk=running lists=general batch=per-sequence}
mkdir -p "$OUT_DIR"
LOG="$OUT_DIR/log.txt"
: >"$LOG"
[ -n "${LIBS:-}" ] && export LD_LIBRARY_PATH="$(cd "$LIBS" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
WORK=$(mktemp -d)
# COMMIT: the commit the tree was made from (the device machine's copy may carry no .git); DIRTY: a note.
COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
DIRTY=${DIRTY-$([ -n "$(git status --porcelain 2>/dev/null | grep -v '^??')" ] && echo " + local changes")}
declare -a NAMES STATUS NOTES SECONDS_

log() { echo "$*" | tee -a "$LOG"; }

# step NAME TIMEOUT_S COMMAND...: runs the command with its output in the log; records PASS/FAIL and seconds.
step() {
  local name=$1 limit=$2
  shift 2
  local remaining=$((DEADLINE - SECONDS))
  local pattern patterns only=${ONLY:+no}
  read -ra patterns <<<"${ONLY:-}"  # not globbed against the folder's files
  for pattern in "${patterns[@]}"; do [[ $name == $pattern ]] && only=""; done
  if [[ " ${SKIP:-} " == *" $name "* ]] || [ -n "$only" ]; then
    NAMES+=("$name"); STATUS+=("SKIPPED(asked)"); SECONDS_+=(0); NOTES+=("${NOTE:-}"); NOTE=""
    log "=== $name: skipped (SKIP or ONLY)"
    return
  fi
  if [ $remaining -lt 25 ]; then
    NAMES+=("$name"); STATUS+=("SKIPPED(no time left)"); SECONDS_+=(0); NOTES+=("${NOTE:-}"); NOTE=""
    log "=== $name: skipped, no time left"
    return
  fi
  [ "$limit" -gt $((remaining - 15)) ] && limit=$((remaining - 15))
  log ""
  log "=== $name: $*"
  local start=$SECONDS
  timeout "$limit" "$@" >>"$LOG" 2>&1
  local rc=$?
  local took=$((SECONDS - start))
  local status=PASS
  [ $rc -ne 0 ] && status="FAIL(rc=$rc)"
  [ $rc -eq 124 ] && status="TIMEOUT(${limit}s)"
  NAMES+=("$name")
  STATUS+=("$status")
  SECONDS_+=("$took")
  NOTES+=("${NOTE:-}")
  NOTE=""
  log "=== $name: $status in ${took}s"
}

# gtest_note FILE: "N tests, M failed" from a gtest JSON report.
gtest_note() {
  python3 - "$1" <<'PY' 2>/dev/null || echo "no report"
import json, sys
r = json.load(open(sys.argv[1]))
gpu = sum(1 for s in r["testsuites"] for t in s["testsuite"] if "gpu" in t["name"] or "gpu" in t.get("value_param", "") or "Gpu" in s["name"])
failed = [t["name"] for s in r["testsuites"] for t in s["testsuite"] if t.get("failures")]
gpu_failed = sum(1 for n in failed if "gpu" in n.lower())
print(f'{r["tests"]} tests ({gpu} gpu), {len(failed)} failed ({gpu_failed} gpu)')
PY
}

log "device_check: commit $COMMIT$DIRTY, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 | tee -a "$LOG"
nvcc --version 2>/dev/null | tail -1 | tee -a "$LOG"

if [ ! -x "$BUILD/gpu/gpu_check" ]; then
  step build 900 bash -c "cmake -G Ninja -B '$BUILD' -DCMAKE_BUILD_TYPE=Release -DMSA_ENABLE_CUDA=ON -DMSA_GPU_GENCODE=-gencode=arch=compute_90a,code=sm_90a && cmake --build '$BUILD' -j16"
fi
G="$BUILD/gpu/gpu_check"
step device 60 "$G" info --json "$WORK/info.json"

NOTE="canonical cases: exact bits + bf16 oracle" step canonical 300 "$G" small --json "$WORK/small.json"

step long_128k_exact 600 "$G" long --q_len 256 --k_len 131072 --hq 8 --json "$WORK/long.json"
NOTES[-1]="256 queries x 131072 keys, Hq 8 Hkv 4 D 128 Bk 128 k 16: every output bit for bit"
step time_128k 600 "$G" time --k_len 131072 --q_len 131072 --hq 64 --json "$WORK/time_128k.json"
NOTES[-1]="M3 layer prefill, 131072 tokens, Hq 64"
step conformance 600 "$BUILD/tests/conformance_test" --gtest_output=json:"$OUT_DIR/gtest_conformance.json"
NOTES[-1]=$(gtest_note "$OUT_DIR/gtest_conformance.json")
# Every gpu test the build has (tests/CMakeLists.txt's list), the plans test last.
for exe in "$BUILD"/tests/gpu_*_test; do
  t=$(basename "$exe" _test)
  [ "$t" = gpu_plans ] && continue
  step "${t}_tests" 600 "$exe" --gtest_output=json:"$OUT_DIR/gtest_${t}.json"
  NOTES[-1]=$(gtest_note "$OUT_DIR/gtest_${t}.json")
done
step gpu_plans 600 "$BUILD/tests/gpu_plans_test" --gtest_filter="$PLANS_FILTER" \
  --gtest_output=json:"$OUT_DIR/gtest_gpu_plans.json"
NOTES[-1]="every runnable plan ($PLANS_FILTER): $(gtest_note "$OUT_DIR/gtest_gpu_plans.json")"
# The conformance suite under FORCED_PLANS, the gpu's bf16/fp16 cases only (exact mode has one kernel per stage). A
# case the forced plan cannot run is refused by name ("kernel plan: ... cannot run"), which the conformance test
# reports as a failure: plan_note counts those as refused, and the step passes when every failure is such a refusal.
# plan_note FILE: "N tests: P passed, R refused (the plan cannot run them), F failed"; exit 1 when F > 0 or N = 0.
plan_note() {
  python3 - "$1" <<'PY' 2>/dev/null || { echo "no report"; return 1; }
import json, sys
r = json.load(open(sys.argv[1]))
tests = [t for s in r["testsuites"] for t in s["testsuite"]]
def refused(t):
    return all("kernel plan: " in f["failure"] and "cannot run" in f["failure"] for f in t["failures"])
failed = [t for t in tests if t.get("failures")]
refusals = [t for t in failed if refused(t)]
real = len(failed) - len(refusals)
print(f"{len(tests)} tests: {len(tests) - len(failed)} passed, {len(refusals)} refused (the plan cannot run them), {real} failed")
sys.exit(1 if real or not tests else 0)  # no gpu case at all (no device) proves nothing
PY
}
for plan in $FORCED_PLANS; do
  report="$OUT_DIR/gtest_conformance_${plan//[=,]/_}.json"
  MSA_GPU_PLAN=$plan step "conformance_${plan//[=,]/_}" 600 \
    "$BUILD/tests/conformance_test" --gtest_filter='*/gpu_bf16_*:*/gpu_fp16_*' --gtest_output=json:"$report"
  if note=$(plan_note "$report"); then
    [[ "${STATUS[-1]}" == FAIL* ]] && STATUS[-1]="PASS"
  elif [[ "${STATUS[-1]}" == PASS ]]; then
    STATUS[-1]="FAIL"
  fi
  NOTES[-1]="MSA_GPU_PLAN=$plan: $note"
done

MSA="$BUILD/tools/msa/msa"
step golden_generate 300 "$MSA" golden generate --suite smoke --dir "$WORK/golden"
for p in exact bf16 fp16; do
  step "golden_verify_$p" 300 "$MSA" golden verify --dir "$WORK/golden" --backend gpu --precision $p
done

step replay 300 "$G" replay --json "$WORK/replay.json"
NOTES[-1]="exact, bf16, fp16 on 4 large cases, 2 runs each"

step property 600 "$BUILD/tests/property_test" --gtest_output=json:"$OUT_DIR/gtest_property.json"
NOTES[-1]=$(gtest_note "$OUT_DIR/gtest_property.json")
if command -v compute-sanitizer >/dev/null; then
  step memcheck 600 compute-sanitizer --tool memcheck --error-exitcode 9 --leak-check full "$G" small
  step racecheck 600 compute-sanitizer --tool racecheck --error-exitcode 9 "$G" small
else
  log "compute-sanitizer not found"
fi

if [ -z "${QUICK:-}" ]; then
  step time_1m_chunk 600 "$G" time --k_len 1048576 --q_len 4096 --hq 64 --json "$WORK/time_1m.json"
  NOTES[-1]="M3 layer, last 4096 queries of a 1048576-token prefill, Hq 64"
fi

# The device code against the saved baseline, where one was given (scripts/device/compare_fatbins.py).
if [ -n "${FATBIN_BASELINE:-}" ]; then
  step fatbins 120 python3 scripts/device/compare_fatbins.py compare "$FATBIN_BASELINE" "$BUILD"
fi

# Summary: markdown table + JSON (the steps, and every gpu_check JSON object).
{
  echo "# gpu backend device check"
  echo ""
  echo "commit $COMMIT$DIRTY, $(date -u +%Y-%m-%d), device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
  echo ""
  echo "| step | result | seconds | note |"
  echo "| --- | --- | --- | --- |"
  for i in "${!NAMES[@]}"; do echo "| ${NAMES[$i]} | ${STATUS[$i]} | ${SECONDS_[$i]} | ${NOTES[$i]} |"; done
  echo ""
  python3 - "$WORK" "$LOG" <<'PY'
import json, os, re, sys
w = sys.argv[1]
ties = [l.strip() for l in open(sys.argv[2]) if "near-tie selection rows" in l]
if ties: print("low-precision selection on every canonical and large case: " + ties[0] + "\n")
def load(name):
    try: return json.load(open(os.path.join(w, name)))
    except Exception: return None
rows = []
for name, label in [("time_128k.json", "128K prefill"), ("time_1m.json", "1M: 4096-query chunk")]:
    t = load(name)
    if t: rows.append(f'| {label} | {t["q_len"]} x {t["k_len"]} | {t["hq"]} | {t["select_kernel_s"]:.2f} | {t["attend_kernel_s"]:.2f} | {t["layer_kernel_s"]:.2f} | {t["select_wall_s"] + t["attend_wall_s"]:.2f} |')
if rows:
    print("exact-mode timings (FP64 canonical, kernels = device time; wall includes host packing and transfers):\n")
    print("| layer | queries x keys | Hq | select s | attend s | kernels s | wall s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))
l = load("long.json")
if l:
    print(f'\n>= 128K exact case: {l["case"]}: bit-identical = {l["bit_identical"]}; reference {l["reference_s"]:.1f} s on {l["threads"]} threads, gpu {l["gpu_wall_s"]:.2f} s wall {l["report"]}')
PY
} >"$OUT_DIR/summary.md"
python3 - "$WORK" "$OUT_DIR/summary.json" "$COMMIT$DIRTY" "${NAMES[*]}" "${STATUS[*]}" "${SECONDS_[*]}" <<'PY'
import json, os, sys
w, out, commit = sys.argv[1], sys.argv[2], sys.argv[3]
names, status, secs = sys.argv[4].split(), sys.argv[5].split(), sys.argv[6].split()
result = {"commit": commit, "steps": [{"name": n, "result": s, "seconds": int(t)} for n, s, t in zip(names, status, secs)]}
for f in sorted(os.listdir(w)):
    if f.endswith(".json"):
        try: result[f[:-5]] = json.load(open(os.path.join(w, f)))
        except Exception as e: result[f[:-5]] = str(e)
json.dump(result, open(out, "w"), indent=1)
PY
cat "$OUT_DIR/summary.md"
rm -rf "$WORK"
for s in "${STATUS[@]}"; do [ "$s" = PASS ] || [ "$s" = "SKIPPED(asked)" ] || exit 1; done
exit 0

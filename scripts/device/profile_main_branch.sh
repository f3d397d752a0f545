#!/usr/bin/env bash
# scripts/device/profile_main_branch.sh: where a prefill's main branch spends its time, by Nsight Compute (clocks left
# alone), for each attend plan named: (1) every kernel of the first NCU_KERNELS launches timed one by one
# (gpu__time_duration), summed per kernel name; (2) the warp stall reasons, pipe and memory shares of the first launch
# of each kernel matching STALL_KERNELS (a regex; default the wgmma tile and merge kernels); (3) with SASS=1, the
# per-instruction stall samples of the first launch matching SASS_KERNEL (default WgmmaTile), exported as
# OUT_DIR/sass_<plan>.csv.gz and summarized by scripts/device/sass_summary.py (instructions per unit of work, SASS_UNIT
# its --unit, by opcode; stalls by reason and opcode; the hottest instructions).
# Binaries as scripts/device/kernel_check.sh: BIN=dir (gpu_bench), LIBS=dir.
# Usage: scripts/device/profile_main_branch.sh OUT_DIR N SELECTION PLAN... (e.g. 32768 random attend=kv-outer-wgmma)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT_DIR=$1 N=$2 SELECTION=$3
shift 3
BIN=$(cd "${BIN:-.devbuild/union/bin}" && pwd)
export LD_LIBRARY_PATH=$(cd "${LIBS:-.devbuild/union/lib}" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p "$OUT_DIR"
STALLS='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
SHARES=sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,lts__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum
for plan in "$@"; do
  name=${plan//[^a-z0-9-]/_}
  timeout 240 ncu --clock-control none --launch-count "${NCU_KERNELS:-90}" --metrics gpu__time_duration.sum --csv \
    "$BIN/gpu_bench" prefill "$N" 1 "selection=$SELECTION" "$plan" >"$OUT_DIR/durations_$name.csv" 2>&1
  echo "== $plan: kernel time of the first ${NCU_KERNELS:-90} launches (us), by kernel"
  python3 - "$OUT_DIR/durations_$name.csv" <<'EOF'
import collections, csv, re, sys
rows = list(csv.reader(open(sys.argv[1])))
at = next(i for i, r in enumerate(rows) if r[:1] == ["ID"])  # gpu_bench's own output comes before the table
head, body = rows[at], [r for r in rows[at + 1:] if len(r) == len(rows[at])]
name, unit, value = head.index("Kernel Name"), head.index("Metric Unit"), head.index("Metric Value")
total, count = collections.Counter(), collections.Counter()
for r in body:
    scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}[r[unit]]
    bare = r[name].replace("(anonymous namespace)::", "").replace("<unnamed>::", "").replace("void ", "")
    key = re.split(r"[<(]", bare)[0].split("::")[-1]
    total[key] += float(r[value].replace(",", "")) * scale
    count[key] += 1
for key, us in total.most_common():
    print(f"  {key:40s} {count[key]:4d} launches {us:12.1f}")
EOF
  timeout 240 ncu --clock-control none -k "regex:${STALL_KERNELS:-WgmmaTile|MergeKernel}" --launch-count 2 \
    --metrics "$STALLS,$SHARES" "$BIN/gpu_bench" prefill "$N" 1 "selection=$SELECTION" "$plan" \
    >"$OUT_DIR/stalls_$name.txt" 2>&1
  echo "== $plan: stalls per issued instruction (> 0.05) and shares"
  awk '/Context/ {print substr($0, 1, 140); next}
       NF == 3 && $3 ~ /^[0-9.,]+$/ {v = $3; gsub(",", "", v); if (v + 0 > 0.05) printf "    %-75s %s\n", $1, $3}' \
    "$OUT_DIR/stalls_$name.txt"
  if [ "${SASS:-0}" = 1 ]; then
    timeout 240 ncu --clock-control none -k "regex:${SASS_KERNEL:-WgmmaTile}" --launch-count 1 --section SourceCounters \
      --section WarpStateStats -o "$OUT_DIR/sass_$name" -f "$BIN/gpu_bench" prefill "$N" 1 "selection=$SELECTION" \
      "$plan" >"$OUT_DIR/sass_$name.log" 2>&1
    ncu --import "$OUT_DIR/sass_$name.ncu-rep" --page source --csv --print-source sass | gzip -9 >"$OUT_DIR/sass_$name.csv.gz"
    rm -f "$OUT_DIR/sass_$name.ncu-rep"
    python3 scripts/device/sass_summary.py ${SASS_UNIT:+--unit "$SASS_UNIT"} "$OUT_DIR/sass_$name.csv.gz"
  fi
done

#!/usr/bin/env bash
# Call 1 of bench/results/kv_window_2026-12-07.md (carry .devbuild/carry after scripts/device/build_bundles.sh; an
# H100): path K's chunk cut to a window of queries whose Q fits the L2 (window1/2/4.patch: at most 1024, 2048, 4096
# queries at 128K) against HEAD's 16129-query chunks, on the 128K routed main branch (bf16 out), random and
# 90%-overlap selections, ROUNDS (default 2) interleaved rounds of 3 repetitions; the outputs' digests must agree. Then Nsight Compute
# on a middle chunk's tile and merge launches of the fastest-looking window (w2), for the DRAM bytes.
set -uo pipefail
source scripts/device/head_bundle.sh
tar xJf .devbuild/carry/window.tar.xz  # built by build_bundles.sh at 9b009e7 (variants since removed)
export STEPS_BUDGET=${STEPS_BUDGET:-200} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader
W=.devbuild/window/bin
for round in $(seq ${ROUNDS:-2}); do
  for selection in random overlap90; do
    for build in head w1 w2 w4; do
      bin=$B/gpu_bench
      [ $build = head ] || bin=$W/gpu_bench_$build
      line=$(timeout 60 $bin prefill 131072 3 selection=$selection attend=routed 2>&1 | grep '^{')
      echo "{\"round\": $round, \"build\": \"$build\", \"run\": ${line:-null}}" >>$OUT/runs.jsonl
    done
  done
done
python3 - $OUT/runs.jsonl <<'PY' | tee $OUT/summary.md
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| selection | build | main ms (rounds) | median | digest |")
print("|---|---|---|---|---|")
for sel in ("random", "overlap90"):
    for build in ("head", "w1", "w2", "w4"):
        runs = [r["run"] for r in rows if r["build"] == build and r["run"] and r["run"]["selection"] == sel]
        ms = [r["main_ms"] for r in runs]
        digests = sorted({r["outputs_digest"] for r in runs})
        print(f"| {sel} | {build} | {', '.join(f'{m:.3f}' for m in ms)} | "
              f"{statistics.median(ms) if ms else float('nan'):.3f} | {' '.join(digests)} |")
PY
source scripts/device/steps.sh
step ncu_w2 60 ncu --clock-control none -k regex:'KvOuterWsKernel|MergeKernel' --launch-skip 80 --launch-count 2 \
  --section SpeedOfLight --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct \
  $W/gpu_bench_w2 prefill 131072 1 selection=random attend=routed
grep -E 'Kernel<|Duration|dram__bytes|lts__t_sector_hit|DRAM Throughput' $OUT/ncu_w2.log

#!/usr/bin/env bash
# Call 3 of bench/results/kv_window_2026-12-07.md (carry .devbuild/carry after scripts/device/build_bundles.sh as of
# 2b26b50; an H100 or an H200): whether L2 hints keep Q in the L2 against the partial stores. Builds: HEAD (16,129-query
# chunks), w2 (window2.patch: 2048-query chunks at 128K), w2h (window2_hints.patch: w2 with Q's bulk copies under an
# evict-last policy and the partials stored as streaming stores), w2hs (w2h with the L2's persisting set-aside at its
# largest, set_aside.patch: an evict-last policy may keep lines only inside that set-aside, which is 0 by default), h
# (hints.patch: the hints with HEAD's chunks). The 128K routed main branch (bf16 out) on random and 90%-overlap
# selections, ROUNDS (default 2) interleaved rounds of 3 repetitions, the digests compared; then Nsight Compute on
# chunk 40 of 64 of each of NCU_BUILDS (default "w2h w2hs") for the DRAM bytes and the L2 hit rate; then, unless
# PLANS=0, gpu_plans_test at bf16 on the kv-outer-wgmma plans (HEAD's running top-k against its twin). BUILDS (default
# "head w2 w2h w2hs h") picks the builds. Call 2, prepared and never run, was BUILDS="head w2 w2h h" NCU_BUILDS=w2h
# PLANS=0.
set -uo pipefail
source scripts/device/head_bundle.sh
tar xJf .devbuild/carry/window.tar.xz
export STEPS_BUDGET=${STEPS_BUDGET:-460} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader
W=.devbuild/window/bin
builds=${BUILDS:-head w2 w2h w2hs h}
for round in $(seq ${ROUNDS:-2}); do
  for selection in random overlap90; do
    for build in $builds; do
      bin=$B/gpu_bench
      [ $build = head ] || bin=$W/gpu_bench_$build
      line=$(timeout 60 $bin prefill 131072 3 selection=$selection attend=routed 2>&1 | grep '^{')
      echo "{\"round\": $round, \"build\": \"$build\", \"run\": ${line:-null}}" >>$OUT/runs.jsonl
    done
  done
done
BUILDS="$builds" python3 - $OUT/runs.jsonl <<'PY' | tee $OUT/summary.md
import json, os, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| selection | build | main ms (rounds) | median | digest |")
print("|---|---|---|---|---|")
for sel in ("random", "overlap90"):
    for build in os.environ["BUILDS"].split():
        runs = [r["run"] for r in rows if r["build"] == build and r["run"] and r["run"]["selection"] == sel]
        ms = [r["main_ms"] for r in runs]
        digests = sorted({r["outputs_digest"] for r in runs})
        print(f"| {sel} | {build} | {', '.join(f'{m:.3f}' for m in ms)} | "
              f"{statistics.median(ms) if ms else float('nan'):.3f} | {' '.join(digests)} |")
PY
source scripts/device/steps.sh
for build in ${NCU_BUILDS:-w2h w2hs}; do
  step ncu_$build 60 ncu --clock-control none -k regex:'KvOuterWsKernel|MergeKernel' --launch-skip 80 --launch-count 2 \
    --section SpeedOfLight --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct \
    $W/gpu_bench_$build prefill 131072 1 selection=random attend=routed
  grep -E 'Kernel<|Duration|dram__bytes|lts__t_sector_hit|DRAM Throughput|set-aside' $OUT/ncu_$build.log
done
if [ "${PLANS:-1}" != 0 ]; then
  step plans 150 env MSA_GPU_PLANS_MATCHING=attend=kv-outer-wgmma $B/gpu_plans_test --gtest_filter='*bf16*'
  tail -n 4 $OUT/plans.log
fi

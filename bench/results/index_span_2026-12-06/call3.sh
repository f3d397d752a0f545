#!/usr/bin/env bash
# Call 3 of bench/results/index_span_2026-12-06.md (carry .devbuild/carry after scripts/device/build_bundles.sh, whose
# span archive holds span = HEAD with the key spans and head = HEAD without them; an H200: a 1M prefill's fp64 out
# alone is 64 GiB): the 1M index branch under span and head (one round, 2 repetitions; "outputs" compares their
# out and lse digests), ncu on the index launch of the 1M prefill's last chunk (16 chunks: --launch-skip 15) under
# head and span (L2 hit rate, DRAM bytes read, duration and SM clock), then the 1M prefill target under span
# against torch SDPA in the same run (bench/gpu_bench.py, as targets_2026-12-05/call2.sh's prefill_1m step).
source scripts/device/head_bundle.sh
tar xJf .devbuild/carry/span.tar.xz
A=.devbuild/span/bin
export PYTHONUNBUFFERED=1 STEPS_BUDGET=${STEPS_BUDGET:-560}
source scripts/device/steps.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total --format=csv,noheader
step index_1m 120 python3 bench/gpu_index_bench.py --bins span=$A/gpu_bench,head=$A/gpu_bench_base --out $OUT \
  --prefill 1048576 --decode '' --rounds 1 --reps 2 --tag 1m
grep -E '^\| prefill' $OUT/gpu_index_bench_*_1m.md
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,lts__t_bytes.sum
for build in gpu_bench_base gpu_bench; do
  step ncu_$build 100 ncu --clock-control none -k regex:BlockMax --launch-skip 15 --launch-count 1 --metrics $M \
    $A/$build prefill 1048576 1
  grep -E "BlockMax|gpu__time|sm__cycles|lts__t|dram__" $OUT/ncu_$build.log | head -n 7
done
step prefill_1m 200 python3 bench/gpu_bench.py --bin $A/gpu_bench --out $OUT --prefill 1048576 --sdpa 1048576 \
  --flex '' --decode '' --decode-batched '' --qouter '' --fp8 '' --fp8-decode '' --deadline 190
grep -E '^\| 1048576' $OUT/gpu_bench_*.md | head -n 2

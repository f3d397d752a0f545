#!/usr/bin/env bash
# Call 2 of bench/results/index_span_2026-12-06.md (the carry and bundles of call 1): why the index branch's share of
# the GEMM ceiling falls from 128K to 512K when key spans that fit the L2 take back only 1.7% at 512K. (1) The bf16
# GEMM ceiling as gpu_bench.py measures it (10 products timed alone) against 180 products back to back (about 250 ms,
# a 512K index branch's length). (2) The SM clock and power every 50 ms while head's 512K prefill runs. (3) ncu on the
# index launch of the 512K prefill's last chunk (4 chunks: --launch-skip 3) under head and span: L2 hit rate, DRAM
# bytes read, duration and SM clock.
source scripts/device/head_bundle.sh
tar xJf .devbuild/carry/span.tar.xz
A=.devbuild/span/bin
export PYTHONUNBUFFERED=1 STEPS_BUDGET=${STEPS_BUDGET:-400}
source scripts/device/steps.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
step gemm 60 python3 bench/results/index_span_2026-12-06/sustained_gemm.py 180
cat $OUT/gemm.log
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 50 >$OUT/clocks.log &
sampler=$!
step prefill_512k 40 $A/gpu_bench_base prefill 524288 2
kill $sampler
grep -o '"index_ms": [0-9.]*\|"total_ms": [0-9.]*' $OUT/prefill_512k.log | tr '\n' ' '; echo
awk -F', ' '{print $2, $3}' $OUT/clocks.log | sort | uniq -c | sort -rn | head -n 8
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,lts__t_bytes.sum
for build in gpu_bench_base gpu_bench; do
  step ncu_$build 90 ncu --clock-control none -k regex:BlockMax --launch-skip 3 --launch-count 1 --metrics $M \
    $A/$build prefill 524288 1
  grep -E "BlockMax|gpu__time|sm__cycles|lts__t|dram__" $OUT/ncu_$build.log | head -n 7
done

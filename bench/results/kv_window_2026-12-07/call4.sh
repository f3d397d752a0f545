#!/usr/bin/env bash
# Call 4 of bench/results/kv_window_2026-12-07.md (carry .devbuild/carry with sa.tar.xz: gpu_bench built from HEAD with
# window2_hints.patch and set_aside_sized.patch; an H100 or an H200): whether a smaller L2 set-aside than call 3's
# largest keeps Q without the 2.3x slowdown. The 128K routed main branch (bf16 out) on random selections, HEAD against
# w2h under set-asides of MB megabytes (MSA_BENCH_L2_SET_ASIDE_MB), ROUNDS (default 2) interleaved rounds of 3
# repetitions, the digests compared.
set -uo pipefail
source scripts/device/head_bundle.sh
tar xJf .devbuild/carry/sa.tar.xz
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader
for round in $(seq ${ROUNDS:-2}); do
  for build in head ${SIZES:-0 4 8 16 24}; do
    if [ $build = head ]; then bin="$B/gpu_bench"; else bin="env MSA_BENCH_L2_SET_ASIDE_MB=$build .devbuild/sa/bin/gpu_bench_w2hsized"; fi
    line=$(timeout 60 $bin prefill 131072 3 selection=random attend=routed 2>&1 | grep -E '^\{|set-aside' | tr '\n' ' ')
    echo "round $round, set-aside MB ${build}: $(echo "$line" | grep -o 'set-aside [0-9]*') main_ms $(echo "$line" | grep -o '"main_ms": [0-9.]*' | cut -d' ' -f2) digest $(echo "$line" | grep -o '"outputs_digest": "[0-9a-f]*"' | cut -d'"' -f4)"
  done
done | tee $OUT/runs.txt

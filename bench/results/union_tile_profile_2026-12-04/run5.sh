#!/usr/bin/env bash
# Run 5's command (kept with its results): where run 4's routed loses 3% to main's on random selections. An
# interleaved A/B of run 4's build against main at e9d4333 (gpu_bench_base), and of a variant of it that never
# waits for the counts (gpu_bench_v1: path K walks the whole list and path U is launched, as under graph capture)
# against main.
# Binaries as scripts/device/kernel_check.sh. Run from the repository root with OUT set.
tar xJf .devbuild/carry/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
B=.devbuild/union/bin
mkdir -p /tmp/v1 && ln -sf $PWD/$B/gpu_bench_v1 /tmp/v1/gpu_bench && ln -sf $PWD/$B/gpu_bench_base /tmp/v1/gpu_bench_base
PLANS='attend=routed' SELECTIONS=random,overlap90 timeout 150 scripts/device/ab_bench.sh 2>&1 | tee $OUT/ab.log |
  grep -v '^prefill'
BIN=/tmp/v1 PLANS='attend=routed' SELECTIONS=random,overlap90 timeout 150 scripts/device/ab_bench.sh 2>&1 |
  tee $OUT/ab_v1.log | grep -v '^prefill'

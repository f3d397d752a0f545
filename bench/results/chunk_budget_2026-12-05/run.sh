#!/usr/bin/env bash
# bench/results/chunk_budget_2026-12-05.md: chunk_budget_8gib.patch (kChunkBudgetBytes 8 GiB instead of 2: index-branch
# chunks of 4x the queries, KV-outer chunks of 4x the partials) against HEAD on an H200 (the 1M prefill's FP64 out
# alone is 64 GiB), with carry .devbuild/carry (build_bundles.sh's budget bundle: A = the patch, B = HEAD). Each round
# runs the prefill at 1M and at 128K under A, then under B (gpu_bench prefill N 2: two timed repetitions after a
# warm-up), and prints each run's plan, stage times and checks.
set -uo pipefail
tar xJf .devbuild/carry/budget.tar.xz
tar xJf .devbuild/carry/bundle.tar.xz .devbuild/union/lib
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,memory.total --format=csv,noheader
fields='"plan": "[^"]*"\|"index_ms": [0-9.]*\|"topk_ms": [0-9.]*\|"main_ms": [0-9.]*\|"total_ms": [0-9.]*'
fields+='\|"nonfinite_outputs": [0-9]*\|"bad_selection_rows": [0-9]*\|"outputs_digest": "[0-9a-f]*"'
for round in 1 2; do
  for n in 1048576 131072; do
    for build in gpu_bench gpu_bench_base; do
      start=$SECONDS
      timeout 150 .devbuild/budget/bin/$build prefill $n 2 >$OUT/r${round}_${n}_$build.json 2>$OUT/r${round}_${n}_$build.err
      status=$?
      echo "round $round, $n, $build: exit $status in $((SECONDS - start)) s:" \
        "$(grep -o "$fields" $OUT/r${round}_${n}_$build.json | tr '\n' ' ')"
    done
  done
done

#!/usr/bin/env bash
# Run 7's command (kept with its results): e13bc79, checked. The whole gpu_plans_test at bf16 (every runnable plan
# against the reference under the oracle, twins bit for bit), then gpu_twins_test. Binaries as
# scripts/device/kernel_check.sh.
tar xJf .devbuild/carry/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
B=.devbuild/union/bin
start=$SECONDS
timeout 400 $B/gpu_plans_test --gtest_filter='Precisions/GpuPlans.*/bf16' >$OUT/plans_bf16.log 2>&1
echo "gpu_plans_test bf16: exit $? in $((SECONDS - start)) s: $(grep -E '^\[  (PASSED|FAILED) |runnable plans' $OUT/plans_bf16.log | tr '\n' ' ')"
start=$SECONDS
timeout $((560 - SECONDS)) $B/gpu_twins_test >$OUT/twins.log 2>&1
echo "gpu_twins_test: exit $? in $((SECONDS - start)) s: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $OUT/twins.log | tr '\n' ' ')"

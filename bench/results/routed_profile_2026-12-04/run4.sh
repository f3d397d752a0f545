#!/usr/bin/env bash
# Run 4's command (kept with its results): path K of attend=routed on a side stream of the highest priority, the merge
# as on main, on the H200. gpu_union_tile_test; the conformance suite's gpu cases; a routed prefill's graph replay
# against its stream run; then interleaved A/Bs against main (gpu_bench_base): this build (bin/), and least/ (the side
# stream at the lowest priority). Binaries as scripts/device/kernel_check.sh. Run from the repository root with OUT set.
tar xJf .devbuild/carry/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
B=.devbuild/union/bin
timeout 90 $B/gpu_union_tile_test >$OUT/union.log 2>&1
echo "union exit $?: $(grep -E '^\[  (PASSED|FAILED) |^routed|device route' $OUT/union.log | tr '\n' ' ')"
timeout 60 $B/conformance_test --gtest_filter='*/gpu_bf16_*:*/gpu_fp16_*' >$OUT/conformance.log 2>&1
echo "conformance exit $?: $(grep -E '^\[  (PASSED|FAILED) ' $OUT/conformance.log | tr '\n' ' ')"
echo "graph: $(timeout 40 $B/gpu_bench prefill 8192 3 selection=overlap90 attend=routed | grep -o '"main_ms": [0-9.]*\|"main_graph_ms": [0-9.]*\|"nonfinite_outputs": [0-9]*' | tr '\n' ' ')"
BIN=.devbuild/union/bin PLANS='attend=routed;attend=kv-outer-wgmma-p16' SELECTIONS=overlap90,random \
  timeout 220 scripts/device/ab_bench.sh 2>&1 | tee $OUT/ab_bin.log | grep -v '^prefill'
BIN=.devbuild/union/least PLANS='attend=routed' SELECTIONS=overlap90 \
  timeout 90 scripts/device/ab_bench.sh 2>&1 | tee $OUT/ab_least.log | grep -v '^prefill'

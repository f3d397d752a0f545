#!/usr/bin/env bash
# Run 6's command (kept with its results): the l rescale of path U rounded on its own (__fmul_rn), on the H200:
# gpu_union_tile_test, the conformance suite's gpu cases, and one routed overlap90 128K prefill each of this build and
# of main (gpu_bench_base). Binaries as scripts/device/kernel_check.sh. Run from the repository root with OUT set.
tar xJf .devbuild/carry/bundle.tar.xz; export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib; B=.devbuild/union/bin; mkdir -p $OUT/run6
timeout 80 $B/gpu_union_tile_test > $OUT/run6/union.log 2>&1
echo "union exit $?: $(grep -E '^\[  (PASSED|FAILED) |bit for bit|^routed|device route' $OUT/run6/union.log | tr '\n' ' ')"
timeout 50 $B/conformance_test --gtest_filter='*/gpu_bf16_*:*/gpu_fp16_*' > $OUT/run6/conformance.log 2>&1
echo "conformance exit $?: $(grep -E '^\[  (PASSED|FAILED) ' $OUT/run6/conformance.log | tr '\n' ' ')"
for b in gpu_bench gpu_bench_base; do
  echo "$b: $(timeout 30 $B/$b prefill 131072 5 selection=overlap90 attend=routed | grep -o '"main_ms": [0-9.]*\|"nonfinite_outputs": [0-9]*' | tr '\n' ' ')"
done 2>&1 | tee $OUT/run6/routed_overlap90.log

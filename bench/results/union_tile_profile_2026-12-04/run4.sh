#!/usr/bin/env bash
# Run 4's command (kept with its results): run 3's code, with the path-U tiles counted beside the path-K queries and
# a path with nothing to do not launched, on the H200: gpu_union_tile_test, routed's graph digest at 8K, an
# interleaved A/B against main at e9d4333 (gpu_bench_base), then Nsight Systems' API and kernel summaries of one
# routed run on random selections (where run 3's routed was 3% slower than main's).
# Binaries as scripts/device/kernel_check.sh. Run from the repository root with OUT set.
tar xJf .devbuild/carry/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
B=.devbuild/union/bin
timeout 60 $B/gpu_union_tile_test >$OUT/union.log 2>&1
echo "union exit $?: $(grep -E '^\[  (PASSED|FAILED) |^routed' $OUT/union.log | tr '\n' ' ')"
for sel in random overlap90; do
  echo "routed 8192 $sel exit $?: $(timeout 40 $B/gpu_bench prefill 8192 3 selection=$sel attend=routed |
    grep -o '"main_ms": [0-9.]*\|"main_graph_ms": [0-9.]*\|"nonfinite_outputs": [0-9]*\|"graph_bits_differ": [0-9]*' |
    tr '\n' ' ')"
done
PLANS='attend=routed' SELECTIONS=random,overlap90 timeout 150 scripts/device/ab_bench.sh 2>&1 | tee $OUT/ab.log |
  grep -v '^prefill'
for build in gpu_bench gpu_bench_base; do
  timeout 90 nsys profile -o $OUT/nsys_$build --force-overwrite true --stats=false $B/$build prefill 131072 2 \
    selection=random attend=routed >$OUT/nsys_$build.log 2>&1
  timeout 60 nsys stats -r cuda_api_sum,cuda_gpu_kern_sum --format csv -o $OUT/nsys_$build $OUT/nsys_$build.nsys-rep \
    >>$OUT/nsys_$build.log 2>&1
  rm -f $OUT/nsys_$build.nsys-rep $OUT/nsys_$build.sqlite
  echo "nsys $build: $(ls $OUT | grep -c "nsys_$build.*csv") csv files"
done

#!/usr/bin/env bash
# Prepared, not yet run. What run2.sh leaves, as time allows: the union-tile plans and the index plans (the lowp
# index kernel's score tile, d8a8708, checked so far only on its SASS) under the oracle, then compute-sanitizer on a
# routed 4096 prefill at 90% overlap with the same build.
tar xJf .devbuild/carry/pathk.tar.xz
[ -d .devbuild/union/lib ] || { tar xJf .devbuild/carry/bundle.tar.xz; }
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
B=.devbuild/pathk/bin_all
source scripts/device/steps.sh
MSA_GPU_PLANS_MATCHING='attend=union-tile' step plans_union_tile 250 $B/gpu_plans_test
MSA_GPU_PLANS_MATCHING='index=token-scores,batch=per-sequence,topk=warp,lists=' \
  step plans_token_scores 120 $B/gpu_plans_test
for tool in memcheck racecheck synccheck; do
  step sanitize_$tool 60 compute-sanitizer --tool $tool $B/gpu_bench prefill 4096 1 \
    selection=overlap90 attend=routed
done

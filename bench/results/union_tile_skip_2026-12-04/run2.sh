#!/usr/bin/env bash
# Prepared, not yet run. The tests of path U built with skip_unseen_blocks.patch and commit_only_issued.patch
# applied (bench/results/union_tile_skip_2026-12-04.md): gpu_union_tile_test, gpu_twins_test and gpu_plans_test over
# the routed and union-tile plans (bf16 and fp16) under the oracle, as time allows (570 s in all).
tar xJf .devbuild/carry/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
B=.devbuild/union/bin
source scripts/device/steps.sh
step union_tile_test 90 $B/gpu_union_tile_test
step twins 60 $B/gpu_twins_test
MSA_GPU_PLANS_MATCHING='attend=routed' step plans_routed 150 $B/gpu_plans_test
MSA_GPU_PLANS_MATCHING='attend=union-tile' step plans_union_tile 250 $B/gpu_plans_test

#!/usr/bin/env bash
# Prepared, not yet run. The tests of the build with all five prepared changes (main at 8d93b9b + exp2_approx +
# order_b_prescaled + skip_unseen_blocks + commit_only_issued + split_k_dsmem's dsmem_merge): the kernel twins
# (kv-outer = kv-outer-wgmma = split-k, bit for bit), path U's properties and routed's rows, and every routed and
# kv-outer-wgmma-p16 plan against the FP64 reference under the oracle, bf16 and fp16 (570 s in all, the steps in
# order of what they decide).
tar xJf .devbuild/carry/pathk.tar.xz
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
[ -d .devbuild/union/lib ] || { tar xJf .devbuild/carry/bundle.tar.xz; }
B=${B:-.devbuild/pathk/bin_all}  # B=.devbuild/pathk/bin_keep: the same tests without order_b_prescaled
source scripts/device/steps.sh
step twins 140 $B/gpu_twins_test
step union_tile_test 90 $B/gpu_union_tile_test
MSA_GPU_PLANS_MATCHING='attend=routed' step plans_routed 160 $B/gpu_plans_test
MSA_GPU_PLANS_MATCHING='attend=kv-outer-wgmma-p16' step plans_p16 170 $B/gpu_plans_test

#!/usr/bin/env bash
# Call 3 of the targets run (bench/results/targets_2026-12-05.md), HEAD's binaries: what earlier runs left unchecked:
# the token-scores index plans and the union-tile plans against FP64 under the oracle, and compute-sanitizer racecheck
# on small cases of path K (prefill) and split-k (decode) with room to finish.
set -uo pipefail
source scripts/device/head_bundle.sh
source scripts/device/steps.sh
MSA_GPU_PLANS_MATCHING='index=token-scores,batch=per-sequence,topk=warp,lists=' \
  step plans_token_scores 100 $B/gpu_plans_test
step racecheck_prefill 80 compute-sanitizer --tool racecheck $B/gpu_bench prefill 512 1 attend=kv-outer-wgmma-p16
step racecheck_decode 60 compute-sanitizer --tool racecheck $B/gpu_bench decode 2048 1
MSA_GPU_PLANS_MATCHING='attend=union-tile' step plans_union_tile 250 $B/gpu_plans_test

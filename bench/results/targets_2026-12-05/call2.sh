#!/usr/bin/env bash
# Call 2 of the targets run (bench/results/targets_2026-12-05.md): HEAD's binaries on the 1M prefill against torch
# SDPA (bench/gpu_bench.py, ceilings measured in the same call), then what earlier runs left unchecked on HEAD's
# kernels: the kernel twins (kv-outer = kv-outer-wgmma = split-k bit for bit), path U's property test, the union-tile and token-scores index plans against FP64 under the oracle, and
# compute-sanitizer racecheck on small cases of path K (prefill) and split-k (decode) with room to finish.
set -uo pipefail
tar xJf .devbuild/carry/head.tar.xz
tar xJf .devbuild/carry/bundle.tar.xz .devbuild/union/lib
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
B=.devbuild/head/bin
export COMMIT=${COMMIT:-unknown} PYTHONUNBUFFERED=1
source scripts/device/steps.sh
step prefill_1m 240 python3 bench/gpu_bench.py --bin $B/gpu_bench --out $OUT --prefill 1048576 --sdpa 1048576 \
  --flex '' --decode '' --decode-batched '' --qouter '' --fp8 '' --fp8-decode '' --deadline 230
grep -E '^\|' $OUT/prefill_1m.log | tail -n 8
step twins 140 $B/gpu_twins_test
step union_tile_test 90 $B/gpu_union_tile_test
MSA_GPU_PLANS_MATCHING='index=token-scores,batch=per-sequence,topk=warp,lists=' \
  step plans_token_scores 100 $B/gpu_plans_test
step racecheck_prefill 80 compute-sanitizer --tool racecheck $B/gpu_bench prefill 512 1 attend=kv-outer-wgmma-p16
step racecheck_decode 60 compute-sanitizer --tool racecheck $B/gpu_bench decode 2048 1
MSA_GPU_PLANS_MATCHING='attend=union-tile' step plans_union_tile 200 $B/gpu_plans_test

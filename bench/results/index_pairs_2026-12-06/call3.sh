#!/usr/bin/env bash
# Call 3 of bench/results/index_pairs_2026-12-06.md (carry .devbuild/carry after scripts/device/build_bundles.sh,
# variants pairs, slack and five): call 2's ncu put the pairs' lost time at the per-tile rendezvous (each CTA waited
# for its partner's release of the tile just finished before loading the next). slack = the pairs reloading the
# stage of tile - 2 (four stages, two tiles ahead); five = five stages, three tiles ahead (as HEAD). The index branch
# alone at 128K, 256K, 512K: pairs, slack, five and HEAD interleaved; then the twins and the 128K prefill digests of
# the faster, ncu on five's 128K index launch, and five's bf16 index=wgmma plans.
source scripts/device/head_bundle.sh
tar xJf .devbuild/carry/pairs.tar.xz
A=.devbuild/pairs/bin
export PYTHONUNBUFFERED=1 STEPS_BUDGET=${STEPS_BUDGET:-570}
source scripts/device/steps.sh
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
step index 200 python3 bench/gpu_index_bench.py \
  --bins five=$A/gpu_bench_five,slack=$A/gpu_bench_slack,pairs=$A/gpu_bench,head=$A/gpu_bench_base --out $OUT \
  --prefill ${PREFILLS:-131072,262144,524288} --decode '' --rounds 2 --tag pair_stages
tail -n 14 $OUT/index.log
for v in five slack; do
  step twins_$v 40 $A/gpu_twins_$v --gtest_filter='*WgmmaIndex*:*BatchedDecodeIndex*'
  grep -E "bit-identical|refused|Failure" $OUT/twins_$v.log | head -n 4
done
mkdir -p .devbuild/five_ab && cp $A/gpu_bench_five .devbuild/five_ab/gpu_bench && cp $A/gpu_bench_base .devbuild/five_ab/gpu_bench_base
step prefill_bits 45 env BIN=.devbuild/five_ab LIBS=.devbuild/union/lib ROUNDS=1 LIMIT=40 scripts/device/ab_bench.sh
sed -n '/== A \/ B/,$p' $OUT/prefill_bits.log
step ncu_five 60 ncu --clock-control none -k regex:BlockMax --launch-count 1 --section SpeedOfLight \
  --section WarpStateStats --metrics lts__t_bytes.sum,lts__t_sector_hit_rate.pct $A/gpu_bench_five prefill 131072 1
grep -E "Duration|Compute \(SM\)|Warp Cycles Per Issued|lts__t|barrier" $OUT/ncu_five.log | head -n 8
step plans 150 env MSA_GPU_PLANS_MATCHING=index=wgmma $A/gpu_plans_five --gtest_filter='*/bf16'

#!/usr/bin/env bash
# Call 4 of bench/results/split_k_ahead_2026-12-05.md, for an H200 (the card issue 19's targets were set on), HEAD's
# binaries (the device code of 240dced): the -inf block test on the build without its fix (the nofix bundle, from
# targets_2026-12-05/without_fix.patch as it now applies: it must fail), call 2's A/B of the mma.sync index kernel
# against auto's on batch-1 decode steps, then the prefill targets, each script measuring its ceilings and torch SDPA
# in the same call: 1M against SDPA (its FP64 out is 64 GiB: an H200 only), and the 128K main branch on three
# selections.
set -uo pipefail
source scripts/device/head_bundle.sh
export COMMIT=${COMMIT:-unknown} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,memory.total --format=csv,noheader
source scripts/device/steps.sh
tar xJf .devbuild/carry/nofix.tar.xz
step nofix_overflow 60 .devbuild/nofix/bin/gpu_lowp_test --gtest_filter='*Weighs*'
grep -E 'sequences, attend=' $OUT/nofix_overflow.log | head -n 4
for round in 1 2; do
  step decode_index_r$round 60 python3 bench/gpu_decode_bench.py --bin $B/gpu_bench --out $OUT \
    --shapes 1x1x4096,1x1x16384,1x1x65536,1x1x262144,1x1x1048576 --plans 'attend=auto;index=mma' --tag index_r$round
  grep -E '^\| [0-9]' $OUT/decode_index_r$round.log | cut -d'|' -f2,3,8,12,15
done
memory_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -n 1)
if [ "$memory_mib" -gt 100000 ]; then
  step prefill_1m 250 python3 bench/gpu_bench.py --bin $B/gpu_bench --out $OUT --prefill 1048576 --sdpa 1048576 \
    --flex '' --decode '' --decode-batched '' --qouter '' --fp8 '' --fp8-decode '' --deadline 240
  grep -E '^\|' $OUT/prefill_1m.log | tail -n 8
else
  echo "prefill_1m: skipped, $memory_mib MiB of device memory (its FP64 out alone is 64 GiB)"
fi
step selection_128k 200 python3 bench/gpu_selection_bench.py --bin $B/gpu_bench --out $OUT --prefill 131072 \
  --selections random,overlap90,pages --sdpa --tag targets
tail -n 10 $OUT/selection_128k.log

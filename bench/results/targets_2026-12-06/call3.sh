#!/usr/bin/env bash
# Call 3 of bench/results/targets_2026-12-06.md, HEAD's binaries (build_bundles.sh's head bundle; carry
# .devbuild/carry), after the decode index's bulk copies landed: the decode targets again against the copy ceiling
# measured in the same call, then the index branch alone at 128K, 256K and 512K prefill, to see where its share of
# the GEMM ceiling falls between 128K (84%) and 1M (72%): 128K's index keys (32 MB) fit the H200's L2, 256K's do not.
# Last, ncu on the index launch of a 1M prefill's last chunk (16 chunks of 65536 queries: kChunkBudgetBytes over
# 4 heads x 8192 blocks x 4 bytes; its keys reach 1M): its L2 hit rate and DRAM bytes, to test the inference that the
# 1M index is DRAM-bound (index_pairs_2026-12-06.md: the first chunk of a long prefill is 128K's launch, 99% L2 hits).
set -uo pipefail
source scripts/device/head_bundle.sh
export COMMIT=${COMMIT:-unknown} PYTHONUNBUFFERED=1 STEPS_BUDGET=${STEPS_BUDGET:-340}
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader
source scripts/device/steps.sh
step decode 100 python3 bench/gpu_decode_bench.py --bin $B/gpu_bench --out $OUT \
  --shapes 1x1x4096,1x1x262144,1x1x1048576,8x16x65536,128x1x32768 --tag targets_rule
tail -n 8 $OUT/decode.log
step index 120 python3 bench/gpu_index_bench.py --bins head=$B/gpu_bench --out $OUT --prefill 131072,262144,524288 \
  --decode '' --rounds 2 --tag curve
tail -n 5 $OUT/index.log
step ncu_1m 90 ncu --clock-control none -k regex:BlockMax --launch-skip 15 --launch-count 1 \
  --metrics lts__t_sector_hit_rate.pct,dram__bytes_read.sum,lts__t_bytes.sum,gpu__time_duration.sum \
  $B/gpu_bench prefill 1048576 1
grep -E "BlockMax|dram__bytes|lts__t|gpu__time" $OUT/ncu_1m.log | head -n 6

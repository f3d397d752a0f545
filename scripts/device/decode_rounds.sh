# scripts/device/decode_rounds.sh: sourced by a device run's script. decode_rounds ROUNDS SHAPES PLANS NAME=BINARY...
# times the decode steps of PLANS at SHAPES (bench/gpu_decode_bench.py) with each named gpu_bench binary in turn, for
# ROUNDS interleaved rounds. Prints each run's rows (shape, plan, step graph back to back, checks) and appends its
# whole log to $OUT/decode.log; the per-run JSON and tables are removed (decode.log holds them).
decode_rounds() {
  local rounds=$1 shapes=$2 plans=$3
  shift 3
  for round in $(seq "$rounds"); do
    for build in "$@"; do
      local name=${build%%=*} bin=${build#*=}
      timeout 80 python3 bench/gpu_decode_bench.py --bin "$bin" --out $OUT --plans "$plans" --shapes "$shapes" \
        --tag "${name}_$round" >$OUT/now.log 2>&1
      echo "== $name round $round: exit $?"
      grep -E '^\| [0-9]' $OUT/now.log | awk -F'|' '{print $2, $3, $12, $15}'
      { echo "== $name round $round"; cat $OUT/now.log; } >>$OUT/decode.log
    done
  done
  rm -f $OUT/*.json $OUT/*.md $OUT/now.log
}

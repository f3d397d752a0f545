# scripts/device/steps.sh: sourced by a device run's script. step NAME LIMIT COMMAND... runs COMMAND with its output
# in $OUT/NAME.log, for at most LIMIT seconds and never past the run's budget (STEPS_BUDGET seconds from the start
# of the script, default 570: a device call's 600 s less the transfers); it is skipped where less than LIMIT / 2
# seconds are left. Prints the exit status, the time and the log's verdict lines (gtest, the plans and path-U tests,
# compute-sanitizer).
step() {
  local name=$1 limit=$2 left=$((${STEPS_BUDGET:-570} - SECONDS))
  shift 2
  if [ $left -lt $((limit / 2)) ]; then echo "$name: skipped, $left s left"; return; fi
  [ $limit -gt $left ] && limit=$left
  local start=$SECONDS
  timeout $limit "$@" >$OUT/$name.log 2>&1
  echo "$name: exit $? in $((SECONDS - start)) s: $(grep -E '^\[  (PASSED|FAILED) |runnable plans|rows unchanged|rows on path|ERROR SUMMARY' $OUT/$name.log | tr '\n' ' ')"
}

# gpu/first_run_lib.sh: what the gpu/*_first_run.sh scripts (the first device checks of new kernels) share. Sourced as
#   source "$(dirname "$0")/first_run_lib.sh" DEFAULT_OUT_NAME DEFAULT_DEADLINE MIN_STEP_SECONDS "${1:-}"
# it goes to the repository root and sets B (BUILD, default .devbuild/build-gpu), O (the output folder: the script's
# argument, else $OUT, else DEFAULT_OUT_NAME in the root), G (gpu_bench), rc (0), puts LIBS on the library path, and
# defines `run NAME SECONDS CMD...`: CMD under `timeout`, its output in $O/NAME.txt (the last 3 lines echoed), its exit
# status in $O/rc.list, rc=1 when it fails. DEADLINE (default DEFAULT_DEADLINE) bounds the whole script: a step gets at
# most the seconds left, and none starts with under MIN_STEP_SECONDS left (it is listed in rc.list as skipped).
set -uo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-.devbuild/build-gpu}; O=${4:-${OUT:-$PWD/$1}}; mkdir -p "$O"; rc=0; G=$B/gpu/gpu_bench
[ -n "${LIBS:-}" ] && export LD_LIBRARY_PATH="$(cd "$LIBS" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
T0=$SECONDS; rm -f "$O/rc.list"
D=${DEADLINE:-$2}; MIN_STEP=$3
run() { local n=$1 t=$2; shift 2; local left=$((D - (SECONDS - T0)))
  if [ $left -lt $MIN_STEP ]; then echo "=== $n SKIPPED (deadline ${D} s)"; echo "$n skipped" >>"$O/rc.list"; return; fi
  [ "$t" -gt $left ] && t=$left; echo "=== $n: $*"; local s=$SECONDS; timeout "$t" "$@" >"$O/$n.txt" 2>&1; local r=$?
  tail -n 3 "$O/$n.txt" | cut -c1-400; echo "=== $n rc=$r ($((SECONDS - s)) s, $((SECONDS - T0)) s in all)"
  echo "$n $r" >>"$O/rc.list"; [ $r -eq 0 ] || rc=1; }

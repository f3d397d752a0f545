#!/usr/bin/env bash
# Run 6's command (kept with its results): run 4's code (36a715a). compute-sanitizer (racecheck, synccheck, memcheck)
# on a routed 4096 prefill at 90% overlap (every CTA of path U takes several tiles and scales each tile's Q), as the
# session's last device seconds allow (200 s in all). Binaries as scripts/device/kernel_check.sh.
tar xJf .devbuild/carry/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
B=.devbuild/union/bin
for tool in racecheck synccheck memcheck; do
  left=$((200 - SECONDS))
  if [ $left -lt 30 ]; then echo "$tool: skipped, $left s left"; continue; fi
  start=$SECONDS
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu_bench prefill 4096 1 selection=overlap90 \
    attend=routed >$OUT/routed_$tool.log 2>&1
  echo "$tool: exit $? in $((SECONDS - start)) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|nonfinite' $OUT/routed_$tool.log | grep -o 'SUMMARY.*\|"nonfinite_outputs": [0-9]*' | tr '\n' ' ')"
done

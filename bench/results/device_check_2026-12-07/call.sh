#!/usr/bin/env bash
# bench/results/device_check_2026-12-07.md: scripts/device/device_check.sh on HEAD's binaries (carry
# .devbuild/carry/check.tar.xz and .devbuild/carry/bundle.tar.xz after scripts/device/build_bundles.sh). PART=1: the
# canonical cases, the >= 128K exact case, the conformance suite, every gpu test but the plans test, golden verify
# (exact, bf16, fp16), memcheck and racecheck. PART=2: the conformance suite under every forced plan, the bitwise
# replay and the property tests. FORCED_PLANS, SKIP and ONLY, where given, replace a part's own (a short call can
# take a part's most wanted steps and leave the rest to the other). The gtest reports come back packed
# (reports.tar.xz: a run returns 8 files at most).
set -uo pipefail
tar xJf .devbuild/carry/check.tar.xz
tar xJf .devbuild/carry/bundle.tar.xz .devbuild/union/lib
if [ "${PART:-1}" = 1 ]; then
  export FORCED_PLANS="${FORCED_PLANS-}" SKIP="${SKIP:-time_128k gpu_plans replay property}"
else
  export ONLY="${ONLY:-device conformance_?* replay property}"
fi
raw=$OUT/raw
COMMIT=${COMMIT:-unknown} BUILD=.devbuild/check/build-gpu LIBS=.devbuild/union/lib QUICK=1 DEADLINE=${DEADLINE:-560} \
  bash scripts/device/device_check.sh "$raw"
rc=$?
tar cJf "$OUT/reports.tar.xz" -C "$raw" .
mv "$raw/summary.md" "$raw/log.txt" "$OUT/"
rm -rf "$raw"
exit $rc

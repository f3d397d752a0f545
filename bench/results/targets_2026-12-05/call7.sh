#!/usr/bin/env bash
# Prepared, not yet run (this session's device time ran out). Call 7 of the targets run
# (bench/results/targets_2026-12-05.md): the test of a block whose scores all overflow to -inf, built on HEAD with the
# kernel change of 6f69ef5 reverted (without_fix.patch; build_bundles.sh's nofix bundle). It must fail there: the
# mma.sync tiles and split-k give the block a NaN partial, and the 16-bit partials store 0 / 0.
tar xJf .devbuild/carry/nofix.tar.xz
tar xJf .devbuild/carry/bundle.tar.xz .devbuild/union/lib
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
timeout 90 .devbuild/nofix/bin/gpu_lowp_test --gtest_filter='*Weighs*' >$OUT/nofix_overflow.log 2>&1
echo "gpu_lowp_test without the fix: exit $?"
grep -E '^\[  (PASSED|FAILED) |main-branch runs' $OUT/nofix_overflow.log
grep -E 'sequences, attend=' $OUT/nofix_overflow.log | sed 's/: .*//' | sort | uniq -c

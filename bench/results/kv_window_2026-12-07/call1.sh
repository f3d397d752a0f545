#!/usr/bin/env bash
# Call 1 of bench/results/kv_window_2026-12-07.md: call3.sh's A/B over HEAD and the windows of 1024, 2048 and 4096
# queries (variants w1, w2, w4 of scripts/device/build_bundles.sh at 9b009e7, which built them from window1.patch,
# window2.patch and window4.patch), Nsight Compute on w2, no plans test. It ran as `ROUNDS=1 bash call1.sh` twice,
# when these steps were in call2.sh (since folded into call3.sh) with one Nsight build.
BUILDS="head w1 w2 w4" NCU_BUILDS=w2 PLANS=0 STEPS_BUDGET=${STEPS_BUDGET:-200} exec bash "$(dirname "$0")/call3.sh"

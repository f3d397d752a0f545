#!/usr/bin/env bash
# Call 1 of bench/results/kv_window_2026-12-07.md: call2.sh's A/B over HEAD and the windows of 1024, 2048 and 4096
# queries (variants w1, w2, w4 of scripts/device/build_bundles.sh at 9b009e7, which built them from window1.patch,
# window2.patch and window4.patch), Nsight Compute on w2. It ran as `ROUNDS=1 bash call1.sh` twice.
BUILDS="head w1 w2 w4" NCU_BUILD=w2 exec bash "$(dirname "$0")/call2.sh"

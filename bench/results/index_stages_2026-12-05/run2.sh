#!/usr/bin/env bash
# Run 2 of bench/results/index_stages_2026-12-05.md, on the same H200 as run 1, warm (one command line, kept as it
# ran): the A/B again, three more rounds, on the shapes where run 1 moved.
tar xJf .devbuild/carry/stages.tar.xz; tar xJf .devbuild/carry/bundle.tar.xz .devbuild/union/lib; BIN=.devbuild/stages/bin LIBS=.devbuild/union/lib PLANS= ROUNDS=3 LIMIT=200 DECODE_SHAPES=1x1x16384,1x1x65536,1x1x262144,1x1x1048576,2x1x4096,128x1x32768 scripts/device/ab_bench.sh > $OUT/ab_decode_2.log 2>&1; sed -n '/== A \/ B/,$p' $OUT/ab_decode_2.log

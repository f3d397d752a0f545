#!/usr/bin/env bash
# scripts/device/build_bundles.sh: builds the stripped binaries that the prepared device runs carry (each called with
# carry .devbuild/carry) from HEAD and the prepared patches, in a scratch worktree (.devbuild/src, its own build
# folder), so that the checkout itself is never touched. Writes
#   .devbuild/carry/bundle.tar.xz  .devbuild/union/lib  (the shared libraries the binaries link and the device lacks)
#   .devbuild/carry/head.tar.xz    .devbuild/head/bin   (HEAD itself: scripts/device/head_bundle.sh unpacks both)
#   .devbuild/carry/nofix.tar.xz   .devbuild/nofix/bin  (HEAD with the -inf block fix reverted: its test must fail)
#   .devbuild/carry/prewait.tar.xz .devbuild/prewait/bin (topk_prewait_2026-12-08's A: gpu_bench, gpu_twins_test)
#   .devbuild/carry/check.tar.xz   .devbuild/check/build-gpu  (device_check.sh's tree: BUILD=.devbuild/check/build-gpu)
# A variant (VARIANTS) is HEAD with some patches applied, in order, and the targets built from it; LAYOUT then puts
# each built binary where the run scripts read it. nvcc and ccache compile (CMAKE_CUDA_COMPILER_LAUNCHER), so a
# variant whose sources an earlier one already compiled costs little. Each archive is written whole or not at all.
# The A/B builds of concluded experiments are gone: those of
# bench/results/prepared_patches_2026-12-05.md (only exp2_approx landed) and chunk_budget_2026-12-05's (landed), and
# mma_rank_2026-12-05's split-k merge A/B (the push merge did not land: its patch is against 949a6e5), and
# index_stages_2026-12-05's (not landed; its patch applies up to 47a1f03), and those checked on an H200 on
# 2026-12-06: split_k_eight_warps_2026-12-05's (landed; four_warps.patch, its reverse, built the variant `four`),
# index_tma_2026-12-05's (landed; cp_async_keys.patch turned its bulk copies off: `cpasync`, archive tma) and
# index_tma_batched_2026-12-05's (landed with its rule: batched_tma.patch and batched_rule.patch, `batched`, `rule`),
# and index_pairs_2026-12-06's (not landed: key_pairs.patch and the patches on it, variants pairs, slack, five, fence).
# index_span_2026-12-06's key spans landed (key_spans.patch, variants span and half before); its call 3 ran on
# 2026-12-07 with span = HEAD and span's base = HEAD without them (without_spans.patch, which applies up to 924ed1c;
# variant before, archive span). topk_held_2026-12-06's
# variant held (held_keys.patch) was dropped: not landed. fused_decode_2026-12-06's fglobal (global_merge.patch, the
# merge from global memory against one over distributed shared memory) landed: the patch applies to 58d011f. Its
# prefetch_l2.patch (variant prefetch, archive sync) did not land, nor synccheck_2026-12-06's hoist.patch and
# nocap.patch (variants hoist and nocap); all three apply to d0238ec. synccheck_2026-12-06's call 2 needs only HEAD.
# decode_bulk_rows_2026-12-06's bulk_rows.patch (variant bulk, K and V rows by bulk copies) did not land: it applies
# to 4f91f2c. kv_window_2026-12-07's windows did not land, with or without cache hints: window1/2/4.patch (variants
# w1, w2, w4) apply to 9b009e7, window2_hints.patch, hints.patch and set_aside.patch (variants w2h, h, w2hs) to
# cf4086d.
# Needs what `make build` installs (scripts/install-deps) and nvcc on the PATH.
# Usage: [JOBS=2] scripts/device/build_bundles.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
src=$root/.devbuild/src
built=$root/.devbuild/built
F=bench/results/targets_2026-12-05/without_fix.patch
P=bench/results/topk_prewait_2026-12-08/prewait.patch
tests="gpu_twins_test gpu_union_tile_test gpu_plans_test gpu_lowp_test gpu_e4m3_test gpu_fused_decode_test gpu_out_format_test"
# device_check.sh's tests: every gpu test (tests/CMakeLists.txt's foreach list), the conformance suite and the property
# tests.
gpu_tests=$(sed -n '/^foreach(gpu_test /,/)/p' tests/CMakeLists.txt | grep -o 'gpu_[a-z0-9_]*_test' | tr '\n' ' ')
[ -n "$gpu_tests" ] || { echo "build_bundles: no gpu tests found in tests/CMakeLists.txt" >&2; exit 1; }
check_tests="$gpu_tests conformance_test property_test"

# name | patches, applied to HEAD in this order | targets (bench/ or tests/)
VARIANTS="
main   |    | gpu_bench $check_tests msa gpu_check
nofix  | $F | gpu_lowp_test
prewait | $P | gpu_bench gpu_twins_test
"

# where the run scripts read it (under .devbuild) | variant/target
LAYOUT="
head/bin/gpu_bench            | main/gpu_bench
$(for t in $tests; do echo "head/bin/$t | main/$t"; done)
nofix/bin/gpu_lowp_test       | nofix/gpu_lowp_test
prewait/bin/gpu_bench         | prewait/gpu_bench
prewait/bin/gpu_twins_test    | prewait/gpu_twins_test
check/build-gpu/tools/msa/msa | main/msa
check/build-gpu/gpu/gpu_check | main/gpu_check
$(for t in $check_tests; do echo "check/build-gpu/tests/$t | main/$t"; done)
"
# archive | the folder under .devbuild it holds
ARCHIVES="
bundle.tar.xz | union
head.tar.xz   | head
nofix.tar.xz  | nofix
prewait.tar.xz | prewait
check.tar.xz  | check
"

trim() { sed 's/^ *//; s/ *$//'; }
command -v nvcc >/dev/null || { echo "build_bundles: nvcc is not on the PATH" >&2; exit 1; }
head=$(git rev-parse HEAD)
if [ -d "$src" ]; then
  git -C "$src" reset -q --hard && git -C "$src" clean -fdq  # an earlier variant's patch, new files included
  git -C "$src" checkout -q --detach "$head"
else
  git worktree prune  # a worktree folder deleted by hand stays registered until pruned
  git worktree add -q --detach "$src" "$head"
fi
if [ ! -f "$src/build/build.ninja" ]; then
  cmake -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache \
    -DMSA_ENABLE_CUDA=ON -DMSA_BUILD_PYTHON=OFF -DPython3_EXECUTABLE="$root/.venv/bin/python" \
    -S "$src" -B "$src/build" >/dev/null
fi

rm -rf "$built"
count=$(echo "$VARIANTS" | grep -c '|')
n=0
while IFS='|' read -r name patches targets; do
  name=$(echo "$name" | trim)
  [ -n "$name" ] || continue
  n=$((n + 1))
  start=$SECONDS
  git -C "$src" reset -q --hard "$head"
  git -C "$src" clean -fdq
  for patch in $patches; do
    git -C "$src" apply "$root/$patch" || { echo "build_bundles: $patch does not apply to $head (variant $name)" >&2; exit 1; }
  done
  echo "[$n/$count] $name: building $(echo "$targets" | trim)"
  ninja -C "$src/build" -j "${JOBS:-2}" $targets >"$built.log" 2>&1 ||
    { tail -n 30 "$built.log" >&2; echo "build_bundles: variant $name failed to build (log $built.log)" >&2; exit 1; }
  mkdir -p "$built/$name"
  for target in $targets; do
    binary=$(find "$src/build/bench" "$src/build/tests" "$src/build/tools/msa" "$src/build/gpu" -maxdepth 1 -type f \
      -name "$target" | head -n 1)
    strip -o "$built/$name/$target" "$binary"
  done
  echo "[$n/$count] $name: done in $((SECONDS - start)) s"
done <<<"$VARIANTS"
git -C "$src" reset -q --hard "$head"
git -C "$src" clean -fdq

# Each bundle's folder is made afresh, so that no binary of an earlier layout stays in it.
for folder in $(echo "$LAYOUT" | awk -F/ '/\|/ {print $1}' | sort -u); do rm -rf "${root:?}/.devbuild/$folder"; done
while IFS='|' read -r place from; do
  place=$(echo "$place" | trim)
  [ -n "$place" ] || continue
  mkdir -p "$root/.devbuild/$(dirname "$place")"
  cp "$built/$(echo "$from" | trim)" "$root/.devbuild/$place"
done <<<"$LAYOUT"
# The shared libraries that the built binaries link and the device machine lacks (the tests link both).
rm -rf "$root/.devbuild/union"
mkdir -p "$root/.devbuild/union/lib"
for lib in libhwy.so.1 libgomp.so.1; do
  path=$(ldd "$built"/*/* | awk -v lib="$lib" '$1 == lib && !found {print $3; found = 1}')
  [ -z "$path" ] || cp -L "$path" "$root/.devbuild/union/lib/$lib"
done

mkdir -p "$root/.devbuild/carry"
for old in "$root"/.devbuild/carry/*.tar.xz; do  # an earlier layout's archives: never carried again
  [ -e "$old" ] && ! grep -q "^$(basename "$old") " <<<"$ARCHIVES" && rm -f "$old"
done
while IFS='|' read -r archive folder; do
  archive=$(echo "$archive" | trim)
  [ -n "$archive" ] || continue
  tar cJf "$root/.devbuild/carry/$archive.partial" -C "$root" ".devbuild/$(echo "$folder" | trim)"
  mv "$root/.devbuild/carry/$archive.partial" "$root/.devbuild/carry/$archive"
  echo "$archive: $(du -h "$root/.devbuild/carry/$archive" | cut -f1)"
done <<<"$ARCHIVES"
echo "build_bundles: built from $head"

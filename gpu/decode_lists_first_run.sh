#!/usr/bin/env bash
# gpu/decode_lists_first_run.sh [OUT_DIR]: first device check of the KV-outer direct lists (gpu/kv_outer_attend.cu
# DirectListsKernel: one list-building launch per chunk where every sequence has one query, instead of 3 memsets, 2
# counting kernels, a 2-kernel scan and a fill), one call (under 2 min), with THIS branch's binaries laid out as
# gpu/device_check.sh says (BUILD=.devbuild/build-gpu LIBS=.devbuild/lib). Small decode shapes first with lists=direct,
# out / lse compared bit for bit with the general lists on the same selection (lists_check; on a failure: memcheck,
# stop), then the list tests and conformance with MSA_GPU_KV_LISTS=direct, timings general vs direct (main_ms: direct
# launches, main_graph_ms: one replayed CUDA graph), sanitizers on a small decode shape, a summary table.
# Every step runs under `timeout`; DEADLINE (default 115 s) bounds the whole script (steps past it are listed as skipped).
source "$(dirname "$0")/first_run_lib.sh" decode_lists_first_run_out 115 6 "${1:-}"
summary() { python3 - "$O" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
rcs = dict(l.split() for l in open(os.path.join(out, "rc.list"))) if os.path.exists(os.path.join(out, "rc.list")) else {}
print(f"{'run':26} {'rc':>3} {'lists':7} {'main':14} {'main ms':>9} {'graph ms':>9} {'lists_check':12} {'words':>5} {'bad':>4} {'nan':>4}")
for f in sorted(glob.glob(os.path.join(out, "*.txt"))):
    name = os.path.basename(f)[:-4]
    d = ([json.loads(l) for l in open(f, errors="replace") if l.startswith("{")] or [None])[-1]
    if d and "main_ms" in d:
        print(f"{name:26} {rcs.get(name, '?'):>3} {d.get('lists', '?'):7} {d.get('main_kernel', '?'):14} {d['main_ms']:9.4f} "
              f"{d['main_graph_ms']:9.4f} {d.get('lists_check', '?'):12} {d.get('lists_diff_words', -1):5} "
              f"{d['bad_selection_rows']:4} {d['nonfinite_outputs']:4}")
    else:
        lines = [l.strip() for l in open(f, errors="replace") if "PASSED" in l or "FAILED" in l or "ERROR SUMMARY" in l]
        print(f"{name:26} {rcs.get(name, '?'):>3} {' | '.join(lines[-3:]) or '(see ' + name + '.txt)'}")
skipped = [n for n, r in rcs.items() if r == "skipped"]
if skipped: print("skipped (deadline):", " ".join(skipped))
res = {}
for f in glob.glob(os.path.join(out, "*_general.txt")) + glob.glob(os.path.join(out, "*_direct.txt")):
    d = ([json.loads(l) for l in open(f, errors="replace") if l.startswith("{")] or [None])[-1]
    if d and d.get("main_ms", 0) > 0: res[os.path.basename(f)[:-4]] = d
for name in sorted(n[:-8] for n in res if n.endswith("_general")):
    if name + "_direct" in res:
        g, d = res[name + "_general"], res[name + "_direct"]
        step_g = g["index_ms"] + g["topk_ms"] + g["main_graph_ms"]; step_d = d["index_ms"] + d["topk_ms"] + d["main_graph_ms"]
        print(f"{name:20} main general {g['main_ms']:8.4f} direct {d['main_ms']:8.4f} ms ({g['main_ms'] / d['main_ms']:5.2f}x) | "
              f"graph general {g['main_graph_ms']:8.4f} direct {d['main_graph_ms']:8.4f} ms "
              f"({g['main_graph_ms'] / max(d['main_graph_ms'], 1e-9):5.2f}x) | index+topk+graph {step_g:.4f} -> {step_d:.4f} ms")
PY
echo "decode_lists_first_run: rc=$rc, $((SECONDS - T0)) s (outputs in $O)"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; L=lists=direct
# 1. Small decode shapes with the direct lists, each checked bit for bit against the general lists (lists_check):
#    8 x 4096 keys (32 blocks, every slot valid), 16 x 300 keys and 33 x 130 keys (3 and 2 blocks < top_k 16: the -1
#    slots' padding tiles), 5 x 1 key, and 8 x 4096 on the mma.sync tiles.
run small_b8_4096 30 "$G" decode 4096 2 batch=8 $L; run small_b16_300 30 "$G" decode 300 2 batch=16 $L
run small_b33_130 30 "$G" decode 130 2 batch=33 $L; run small_b5_1 30 "$G" decode 1 2 batch=5 $L
run small_b8_4096_mma 30 "$G" decode 4096 2 batch=8 main=kv-outer $L
[ $rc -eq 0 ] || { run memcheck_b16_300 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$G" decode 300 1 batch=16 $L
  run memcheck_b5_1 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$G" decode 1 1 batch=5 $L; summary; exit 1; }
# 2. The suites: direct vs general bit for bit on the decode list cases (both tile kernels, bf16 and fp16) and the
#    refusal of an unknown value; conformance vs the oracle with the direct lists forced.
E="env MSA_GPU_KV_LISTS=direct"
run gpu_tests 40 $E "$B/tests/gpu_backend_test" --gtest_filter='GpuBackend.*KvLists*' --gtest_brief=1
run conformance 40 $E "$B/tests/conformance_test" --gtest_brief=1
# 3. Timings, general then direct lists (the direct runs also check their bits against the general lists).
for l in general direct; do run "decode_4k_b1_$l" 20 "$G" decode 4096 10 lists=$l; done
for l in general direct; do run "decode_64k_b1_$l" 20 "$G" decode 65536 10 lists=$l; done
for l in general direct; do run "decode_1m_b1_$l" 30 "$G" decode 1048576 10 lists=$l; done
for l in general direct; do run "decode_32k_b128_$l" 30 "$G" decode 32768 10 batch=128 lists=$l; done
# 4. Sanitizers on a small decode shape with padding tiles (3 blocks < top_k).
for t in memcheck racecheck; do run "$t" 40 compute-sanitizer --tool $t --error-exitcode 9 "$G" decode 300 1 batch=4 $L; done
summary; exit $rc

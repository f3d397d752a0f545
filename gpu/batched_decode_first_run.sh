#!/usr/bin/env bash
# gpu/batched_decode_first_run.sh [OUT_DIR]: first device check of the batched decode index branch (gpu/kernels.h
# ChunkGeometry::sequences: one block-max launch and one top-k for every sequence of a decode batch instead of one each
# per sequence), one call (under 2 min), with THIS branch's binaries laid out as gpu/device_check.sh says
# (BUILD=.devbuild/build-gpu LIBS=.devbuild/lib). Small decode shapes first, batched, their block scores and selection
# compared bit for bit with the per-sequence launches (batch_check; on a failure: memcheck, stop), then the batched
# tests and conformance with MSA_GPU_INDEX_BATCH=batched, timings per-sequence vs batched (index_ms, topk_ms: launches
# timed one by one; step_graph_ms: index + top-k + main branch as one replayed CUDA graph), sanitizers on a small
# batched shape, a summary table (% copy: decode_bytes / step_graph_ms against COPY_GBPS, default 4200 GB/s, the H200's
# measured copy rate). Every step runs under `timeout`; DEADLINE (default 115 s) bounds the whole script (steps past it
# are listed as skipped).
source "$(dirname "$0")/first_run_lib.sh" batched_decode_first_run_out 115 6 "${1:-}"
summary() { COPY_GBPS=${COPY_GBPS:-4200} python3 - "$O" <<'PY'
import glob, json, os, sys
out = sys.argv[1]; copy = float(os.environ["COPY_GBPS"])
rcs = dict(l.split() for l in open(os.path.join(out, "rc.list"))) if os.path.exists(os.path.join(out, "rc.list")) else {}
last = lambda f: ([json.loads(l) for l in open(f, errors="replace") if l.startswith("{")] or [None])[-1]
print(f"{'run':30} {'rc':>3} {'index':12} {'index ms':>9} {'topk ms':>8} {'main ms':>8} {'step graph':>10} {'% copy':>6} "
      f"{'batch_check':12} {'diffs':>5} {'index_check':12} {'topk_check':10} {'bad':>4} {'nan':>4}")
for f in sorted(glob.glob(os.path.join(out, "*.txt"))):
    name = os.path.basename(f)[:-4]; d = last(f)
    if d and "index_ms" in d:
        step = d.get("step_graph_ms", 0); frac = 100 * d["decode_bytes"] / step / 1e6 / copy if step > 0 else 0
        print(f"{name:30} {rcs.get(name, '?'):>3} {d.get('index_batch', '?'):12} {d['index_ms']:9.4f} {d['topk_ms']:8.4f} "
              f"{d['main_ms']:8.4f} {step:10.4f} {frac:6.1f} {d.get('batch_check', '?'):12} {d.get('batch_diff_entries', -1):5} "
              f"{d.get('index_check', '?'):12} {d.get('topk_check', '?'):10} {d['bad_selection_rows']:4} {d['nonfinite_outputs']:4}")
    else:
        lines = [l.strip() for l in open(f, errors="replace") if "PASSED" in l or "FAILED" in l or "ERROR SUMMARY" in l]
        print(f"{name:30} {rcs.get(name, '?'):>3} {' | '.join(lines[-3:]) or '(see ' + name + '.txt)'}")
skipped = [n for n, r in rcs.items() if r == "skipped"]
if skipped: print("skipped (deadline):", " ".join(skipped))
res = {os.path.basename(f)[:-4]: last(f) for f in glob.glob(os.path.join(out, "t_*.txt"))}
for name in sorted(n[:-len("_per-sequence")] for n in res if n.endswith("_per-sequence")):
    p, b = res.get(name + "_per-sequence"), res.get(name + "_batched")
    if not (p and b and p.get("index_ms", 0) > 0 and b.get("index_ms", 0) > 0): continue
    ip, ib = p["index_ms"] + p["topk_ms"], b["index_ms"] + b["topk_ms"]
    sp, sb = p.get("step_graph_ms", 0), b.get("step_graph_ms", 0)
    pct = lambda d, ms: 100 * d["decode_bytes"] / ms / 1e6 / copy if ms > 0 else 0
    print(f"{name:16} index+topk per-seq {ip:8.4f} batched {ib:8.4f} ms ({ip / ib:5.2f}x) | step graph per-seq {sp:8.4f} "
          f"batched {sb:8.4f} ms ({sp / max(sb, 1e-9):5.2f}x, {pct(p, sp):5.1f}% -> {pct(b, sb):5.1f}% of copy)")
PY
echo "batched_decode_first_run: rc=$rc, $((SECONDS - T0)) s (outputs in $O)"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; X=index_batch=batched
# 1. Small decode batches, batched, each checked bit for bit against the per-sequence launches (batch_check): 8 x 4096
#    keys, 16 x 300 keys (3 blocks < top_k 16), 5 x 1 key, 8 x 16 queries over 2000 keys (q_len 16: 64 rows per
#    sequence), the mma.sync index kernel, and 3 x 200000 keys with the threshold top-k (split lists at their rows'
#    offset in the batch).
run small_b8_4096 30 "$G" decode 4096 2 batch=8 $X; run small_b16_300 30 "$G" decode 300 2 batch=16 $X
run small_b5_1 30 "$G" decode 1 2 batch=5 $X; run small_b8_q16_2000 30 "$G" decode 2000 2 batch=8 q_len=16 $X
run small_b8_4096_mma 30 "$G" decode 4096 2 batch=8 index=mma $X; run small_b3_200k_fast 30 "$G" decode 200000 2 batch=3 topk=fast $X
[ $rc -eq 0 ] || { run memcheck_b16_300 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$G" decode 300 1 batch=16 $X
  run memcheck_b5_1 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$G" decode 1 1 batch=5 $X; summary; exit 1; }
# 2. The suites: batched vs per-sequence bit for bit on the decode batch cases (both index kernels, both top-k kernels,
#    bf16 and fp16) and the refusal of an unknown value; conformance vs the oracle with the batched path forced.
E="env MSA_GPU_INDEX_BATCH=batched"
run gpu_tests 40 $E "$B/tests/gpu_backend_test" --gtest_filter='GpuBackend.*Batch*' --gtest_brief=1
run conformance 40 $E "$B/tests/conformance_test" --gtest_brief=1
# 3. Timings, per-sequence then batched (the batched runs also check their bits against the per-sequence launches).
for m in per-sequence batched; do run "t_32k_b128_$m" 25 "$G" decode 32768 10 batch=128 index_batch=$m; done
for m in per-sequence batched; do run "t_64k_b8_q16_$m" 20 "$G" decode 65536 10 batch=8 q_len=16 index_batch=$m; done
for m in per-sequence batched; do run "t_4k_b128_$m" 20 "$G" decode 4096 10 batch=128 index_batch=$m; done
for m in per-sequence batched; do run "t_1m_b1_$m" 25 "$G" decode 1048576 10 index_batch=$m; done
# 4. Sanitizers on a small batched shape (q_len 2: two queries per sequence, 3 blocks < top_k).
for t in memcheck racecheck; do run "$t" 40 compute-sanitizer --tool $t --error-exitcode 9 "$G" decode 300 1 batch=4 q_len=2 $X; done
summary; exit $rc

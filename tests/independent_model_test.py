#!/usr/bin/env python3
"""Acceptance test: `msa run` against an INDEPENDENT numpy model of SPEC.md sections 1-3.

Nothing here is shared with the C++ project: the inputs are generated with numpy's own RNG and written
by a hand-rolled safetensors writer (SPEC section 7), the outputs are read by a hand-rolled reader, and
the expected values come from a float64 numpy model written from the SPEC text, evaluated in numpy's
own order (BLAS dot products, vectorised masks), not the canonical order of SPEC section 4.

Checks (per case):
  * topk_indices equal exactly, whole rows with positions, except rows whose selection hinges on a
    near-tie (two candidate blocks whose model scores differ by <= 1e-12 relative); those are counted,
    printed and excluded;
  * out, lse, index_lse and the finite entries of block_scores within |a-b| <= 1e-12 * max(1, |b|),
    -inf entries of block_scores identical. index_lse, out and lse are modelled on the C++ selection,
    so that a tie flip cannot cascade.
A negative self-check perturbs the C++ outputs (out by 1e-9 relative, one topk entry) and requires
the comparison to fail on both.

Usage: python3 tests/independent_model_test.py --msa build/tools/msa/msa --workdir /tmp/msa-indep
Last line printed: "N passed, M failed"; exit code 0 only when M == 0.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

import numpy as np

from safetensors_io import read_safetensors, write_safetensors

RTOL = 1e-12

# ----------------------------------------------------------------------------------------------------
# safetensors, by hand
# ----------------------------------------------------------------------------------------------------

def f32_to_bf16_bits(x):
    """Round float32 to bfloat16, nearest-even, returned as uint16 bit patterns (finite inputs)."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    return b.astype(np.uint16)


def bf16_bits_to_f64(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


# ----------------------------------------------------------------------------------------------------
# problem generation
# ----------------------------------------------------------------------------------------------------
def encode(x64, dt):
    """Store float64 values in dtype dt; returns (storage array, exactly widened float64 model input)."""
    if dt == "F64":
        return x64.astype(np.float64), x64.astype(np.float64)
    if dt == "F32":
        s = x64.astype(np.float32)
        return s, s.astype(np.float64)
    if dt == "F16":
        s = x64.astype(np.float16)
        return s, s.astype(np.float64)
    if dt == "BF16":
        s = f32_to_bf16_bits(x64.astype(np.float32))
        return s, bf16_bits_to_f64(s)
    raise ValueError(dt)


def make_problem(c):
    rng = np.random.default_rng(c["seed"])
    lens = c["lens"]  # [(q_len, k_len)]
    Hq, Hkv, D, Dv, Di = c["Hq"], c["Hkv"], c["D"], c["Dv"], c["Di"]
    cu_q = np.concatenate([[0], np.cumsum([q for q, _ in lens])]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum([k for _, k in lens])]).astype(np.int32)
    tq, tk = int(cu_q[-1]), int(cu_k[-1])
    shapes = {"q": (tq, Hq, D), "k": (tk, Hkv, D), "v": (tk, Hkv, Dv),
              "index_q": (tq, Hkv, Di), "index_k": (tk, 1, Di)}
    dts = c["dtypes"]
    tensors, model = [], {}
    for name, shp in shapes.items():
        x = rng.standard_normal(shp) * c.get("amp", {}).get(name, 1.0)
        dt = dts if isinstance(dts, str) else dts[name]
        store, wide = encode(x, dt)
        tensors.append((name, dt, store))
        model[name] = wide
    tensors.append(("cu_seqlens_q", "I32", cu_q))
    tensors.append(("cu_seqlens_k", "I32", cu_k))
    model["cu_seqlens_q"], model["cu_seqlens_k"] = cu_q, cu_k
    cfg = {"block_size": c["Bk"], "top_k": c["top_k"], "init_blocks": c["init"], "pooling": c["pooling"]}
    for key in ("softmax_scale", "index_scale"):
        if key in c:
            cfg[key] = c[key]
    return tensors, model, cfg


# ----------------------------------------------------------------------------------------------------
# the independent model (SPEC sections 1-3)
# ----------------------------------------------------------------------------------------------------
def _logsumexp_rows(x):
    """Row-wise natural-log logsumexp of a 2-D array that may hold -inf (every row has a finite entry)."""
    m = np.max(x, axis=1)
    return m + np.log(np.sum(np.exp(x - m[:, None]), axis=1))


def model_index_branch(m, cfg):
    """Returns block_scores [Hidx,total_q,max_blocks] and the model selection [Hidx,total_q,top_k],
    plus per-row near-tie flags."""
    iq, ik = m["index_q"], m["index_k"][:, 0, :]
    cu_q, cu_k = m["cu_seqlens_q"], m["cu_seqlens_k"]
    Bk, K, init, pool = cfg["block_size"], cfg["top_k"], cfg["init_blocks"], cfg["pooling"]
    tq, Hidx, Di = iq.shape
    iscale = cfg.get("index_scale", 1.0 / math.sqrt(Di))
    kl = np.diff(cu_k)
    max_blocks = int(-(-int(kl.max()) // Bk)) if len(kl) else 0
    scores = np.full((Hidx, tq, max_blocks), -np.inf)
    sel = np.full((Hidx, tq, K), -1, dtype=np.int64)
    tie = np.zeros((Hidx, tq), dtype=bool)
    for b in range(len(cu_q) - 1):
        q0, q1, k0, k1 = int(cu_q[b]), int(cu_q[b + 1]), int(cu_k[b]), int(cu_k[b + 1])
        ql, kln = q1 - q0, k1 - k0
        if ql == 0:
            continue
        nb = -(-kln // Bk)
        pos = kln - ql + np.arange(ql)                      # suffix rule
        keys = np.arange(nb * Bk)
        visible_key = keys[None, :] <= pos[:, None]         # [ql, nb*Bk]; keys >= kln are never <= pos
        kpad = np.zeros((nb * Bk, Di))
        kpad[:kln] = ik[k0:k1]
        for r in range(Hidx):
            if pool == "mean":
                # per block, running sum over keys in ascending order, so the local (partial) block
                # of query i uses the first pos-b*Bk+1 keys of its block
                csum = np.cumsum(kpad.reshape(nb, Bk, Di), axis=1)          # [nb, Bk, Di]
                M = np.full((ql, nb), -np.inf)
                for i in range(ql):
                    local = pos[i] // Bk
                    means = np.empty((local + 1, Di))
                    means[:local] = csum[:local, Bk - 1, :] / Bk
                    cnt = pos[i] - local * Bk + 1
                    means[local] = csum[local, cnt - 1, :] / cnt
                    M[i, :local + 1] = (means @ iq[q0 + i, r]) * iscale
            else:
                x = (iq[q0:q1, r] @ kpad.T) * iscale                       # [ql, nb*Bk]
                x = np.where(visible_key, x, -np.inf).reshape(ql, nb, Bk)
                mx = np.max(x, axis=2)                                      # -inf for invisible blocks
                if pool == "max":
                    M = mx
                elif pool == "lse":
                    with np.errstate(invalid="ignore", divide="ignore"):
                        sh = np.where(np.isfinite(mx), mx, 0.0)
                        M = np.where(np.isfinite(mx),
                                     sh + np.log(np.sum(np.exp(x - sh[:, :, None]), axis=2)), -np.inf)
                else:
                    raise ValueError(pool)
            scores[r, q0:q1, :nb] = M
            for i in range(ql):
                local = int(pos[i] // Bk)
                forced_init = [j for j in range(min(init, local + 1)) if j != local]
                forced = set(forced_init) | {local}
                cands = np.array([j for j in range(local + 1) if j not in forced], dtype=np.int64)
                cs = M[i, cands]
                order = np.lexsort((cands, -cs))                            # score desc, then id asc
                cands, cs = cands[order], cs[order]
                take = max(0, K - len(forced))
                row = list(cands[:take]) + forced_init + [local]
                row = row[:K]
                sel[r, q0 + i, :len(row)] = row
                # near-tie: any adjacent pair in the ranked list that decides a slot or the cut-off
                span = min(len(cs), take + 1)
                if span >= 2:
                    a, bb = cs[:span - 1], cs[1:span]
                    if np.any(np.abs(a - bb) <= RTOL * np.maximum(1.0, np.abs(bb))):
                        tie[r, q0 + i] = True
    return scores, sel, tie


def model_attention(m, cfg, sel):
    """index_lse, out, lse computed on the selection `sel` [Hidx,total_q,top_k] (the C++ one)."""
    q, k, v = m["q"], m["k"], m["v"]
    iq, ik = m["index_q"], m["index_k"][:, 0, :]
    cu_q, cu_k = m["cu_seqlens_q"], m["cu_seqlens_k"]
    Bk = cfg["block_size"]
    tq, Hq, D = q.shape
    Hkv, Dv, Di = k.shape[1], v.shape[2], iq.shape[2]
    G = Hq // Hkv
    scale = cfg.get("softmax_scale", 1.0 / math.sqrt(D))
    iscale = cfg.get("index_scale", 1.0 / math.sqrt(Di))
    index_lse = np.full((Hkv, tq), np.nan)
    out = np.full((tq, Hq, Dv), np.nan)
    lse = np.full((tq, Hq), np.nan)
    for b in range(len(cu_q) - 1):
        q0, q1, k0, k1 = int(cu_q[b]), int(cu_q[b + 1]), int(cu_k[b]), int(cu_k[b + 1])
        ql, kln = q1 - q0, k1 - k0
        if ql == 0:
            continue
        pos = kln - ql + np.arange(ql)
        kblock = np.arange(kln) // Bk
        causal = np.arange(kln)[None, :] <= pos[:, None]
        for r in range(Hkv):
            s = sel[r, q0:q1]                                             # [ql, top_k]
            insel = np.zeros((ql, kln), dtype=bool)
            for j in range(s.shape[1]):
                col = s[:, j]
                insel |= (col[:, None] == kblock[None, :]) & (col[:, None] >= 0)
            mask = insel & causal
            x = (iq[q0:q1, r] @ ik[k0:k1].T) * iscale
            index_lse[r, q0:q1] = _logsumexp_rows(np.where(mask, x, -np.inf))
            for h in range(r * G, (r + 1) * G):
                z = np.where(mask, (q[q0:q1, h] @ k[k0:k1, r].T) * scale, -np.inf)
                mz = np.max(z, axis=1)
                p = np.exp(z - mz[:, None])
                l = np.sum(p, axis=1)
                out[q0:q1, h] = (p @ v[k0:k1, r]) / l[:, None]
                lse[q0:q1, h] = mz + np.log(l)
    return index_lse, out, lse


# ----------------------------------------------------------------------------------------------------
# comparison
# ----------------------------------------------------------------------------------------------------
def relerr(a, b):
    """max |a-b| / max(1,|b|) over the arrays (inf if any NaN / non-finite mismatch)."""
    if a.size == 0:
        return 0.0
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return math.inf
    return float(np.max(np.abs(a - b) / np.maximum(1.0, np.abs(b))))


def compare(cpp, model_scores, model_sel, tie, m, cfg):
    """Returns (ok, {output: worst error or mismatch count}, messages)."""
    res, msgs, ok = {}, [], True
    # selection, whole rows, near-tie rows excluded
    ci = cpp["topk_indices"].astype(np.int64)
    diff_rows = np.any(ci != model_sel, axis=2) & ~tie
    res["topk_mismatch_rows"] = int(np.count_nonzero(diff_rows))
    res["near_tie_rows"] = int(np.count_nonzero(tie))
    if res["topk_mismatch_rows"]:
        ok = False
        r, t = map(int, np.argwhere(diff_rows)[0])
        msgs.append(f"topk_indices differ in {res['topk_mismatch_rows']} rows; first (group {r}, row {t}): "
                    f"msa {ci[r, t].tolist()} model {model_sel[r, t].tolist()} "
                    f"model scores {model_scores[r, t].tolist()}")
    # block_scores: -inf pattern identical, finite values close
    bs = cpp["block_scores"]
    ninf_c, ninf_m = np.isneginf(bs), np.isneginf(model_scores)
    if not np.array_equal(ninf_c, ninf_m):
        ok = False
        r, t, j = map(int, np.argwhere(ninf_c != ninf_m)[0])
        msgs.append(f"block_scores -inf pattern differs first at [{r},{t},{j}]: msa {bs[r, t, j]!r} "
                    f"model {model_scores[r, t, j]!r}")
        res["block_scores"] = math.inf
    else:
        fin = ~ninf_m
        res["block_scores"] = relerr(bs[fin], model_scores[fin])
    # attention-side outputs on the C++ selection
    index_lse, out, lse = model_attention(m, cfg, cpp["topk_indices"].astype(np.int64))
    for name, want in (("index_lse", index_lse), ("out", out), ("lse", lse)):
        res[name] = relerr(cpp[name], want)
    for name in ("block_scores", "index_lse", "out", "lse"):
        if not res[name] <= RTOL:
            ok = False
            msgs.append(f"{name}: worst relative error {res[name]:.3e} > {RTOL:g}")
    if res["near_tie_rows"]:
        msgs.append(f"note: {res['near_tie_rows']} near-tie rows excluded from the exact selection check")
    return ok, res, msgs


def check_shapes(outs, m, cfg):
    tq, Hq = m["q"].shape[:2]
    Hkv, Dv = m["k"].shape[1], m["v"].shape[2]
    kl = np.diff(m["cu_seqlens_k"])
    mb = -(-int(kl.max()) // cfg["block_size"])
    want = {"topk_indices": ("I32", (Hkv, tq, cfg["top_k"])), "block_scores": ("F64", (Hkv, tq, mb)),
            "index_lse": ("F64", (Hkv, tq)), "out": ("F64", (tq, Hq, Dv)), "lse": ("F64", (tq, Hq))}
    errs = []
    for name, (dt, shp) in want.items():
        if name not in outs:
            errs.append(f"missing output tensor {name}")
        elif outs[name][0] != dt or tuple(outs[name][1].shape) != shp:
            errs.append(f"{name}: got {outs[name][0]}{list(outs[name][1].shape)}, want {dt}{list(shp)}")
    return errs


# ----------------------------------------------------------------------------------------------------
# cases
# ----------------------------------------------------------------------------------------------------
MIXED = {"q": "F32", "k": "BF16", "v": "F16", "index_q": "F64", "index_k": "BF16"}
CASES = [
    # prefill, G = 2, max pooling (M3-like contract), no init blocks
    dict(name="prefill_max_f64", seed=101, lens=[(300, 300)], Hq=8, Hkv=4, D=32, Dv=32, Di=32,
         Bk=16, top_k=6, init=0, pooling="max", dtypes="F64"),
    # chunked prefill (prefix of keys), G = 4, lse pooling, one init block
    dict(name="chunked_lse_f32", seed=202, lens=[(96, 260), (40, 171)], Hq=8, Hkv=2, D=16, Dv=24, Di=16,
         Bk=32, top_k=4, init=1, pooling="lse", dtypes="F32"),
    # decode batch, q_len 1..16 over longer keys, mean pooling, two init blocks, bf16 inputs
    dict(name="decode_mean_bf16", seed=303, lens=[(1, 333), (16, 400), (7, 129), (3, 64)],
         Hq=8, Hkv=2, D=64, Dv=64, Di=32, Bk=8, top_k=8, init=2, pooling="mean", dtypes="BF16"),
    # ragged batch: k_len not a multiple of Bk, one sequence with q_len = 0, f16 inputs, max pooling
    dict(name="ragged_max_f16", seed=404, lens=[(50, 77), (0, 40), (120, 120)], Hq=4, Hkv=2, D=8, Dv=8,
         Di=8, Bk=16, top_k=5, init=1, pooling="max", dtypes="F16"),
    # ragged batch with explicit scales, lse pooling, G = 4, two init blocks
    dict(name="ragged_lse_scales_f64", seed=505, lens=[(21, 45), (64, 64), (0, 10), (9, 200)],
         Hq=8, Hkv=2, D=24, Dv=16, Di=40, Bk=4, top_k=7, init=2, pooling="lse", dtypes="F64",
         softmax_scale=0.3, index_scale=0.0625),
    # prefill, mean pooling, explicit scales, mixed dtypes, G = 4
    dict(name="prefill_mean_mixed", seed=606, lens=[(200, 200), (33, 90)], Hq=4, Hkv=1, D=16, Dv=32,
         Di=64, Bk=16, top_k=3, init=1, pooling="mean", dtypes=MIXED, softmax_scale=0.2,
         index_scale=0.11),
    # dense equivalence range: top_k covers every visible block, so slots are -1 padded
    dict(name="dense_cover_max_f32", seed=707, lens=[(60, 60), (5, 57)], Hq=4, Hkv=2, D=16, Dv=16, Di=16,
         Bk=8, top_k=8, init=0, pooling="max", dtypes="F32"),
    # sharp index scores (large amplitude), lse pooling: exercises max-subtraction / underflow paths
    dict(name="sharp_lse_f64", seed=808, lens=[(128, 192)], Hq=4, Hkv=2, D=32, Dv=32, Di=16,
         Bk=16, top_k=4, init=1, pooling="lse", dtypes="F64", amp={"index_q": 6.0, "q": 4.0}),
]


def run_case(c, msa, workdir):
    tensors, m, cfg = make_problem(c)
    assert cfg["init_blocks"] < cfg["top_k"]
    inp = os.path.join(workdir, c["name"] + ".in.safetensors")
    outp = os.path.join(workdir, c["name"] + ".out.safetensors")
    if os.path.exists(outp):
        os.remove(outp)
    write_safetensors(inp, tensors, {"msa_config": json.dumps(cfg)})
    proc = subprocess.run([msa, "run", "--inputs", inp, "--out", outp], capture_output=True, text=True)
    if proc.returncode != 0:
        return False, None, [f"msa exited {proc.returncode}: {proc.stderr.strip()[-2000:]}"], None
    outs, _ = read_safetensors(outp)
    errs = check_shapes(outs, m, cfg)
    if errs:
        return False, None, errs, None
    cpp = {name: arr for name, (_, arr) in outs.items()}
    model_scores, model_sel, tie = model_index_branch(m, cfg)
    ok, res, msgs = compare(cpp, model_scores, model_sel, tie, m, cfg)
    return ok, res, msgs, (cpp, model_scores, model_sel, tie, m, cfg)


def negative_selfcheck(ctx):
    """Perturb the C++ outputs, one at a time; the comparison must report each as a failure:
    (a) one value of `out` moved by 1e-9 relative, (b) one history slot of one topk row replaced by a
    visible block that the row did not select (a plausible-looking but wrong selection)."""
    cpp, model_scores, model_sel, tie, m, cfg = ctx
    # (a) out
    bad = {k: np.array(v, copy=True) for k, v in cpp.items()}
    idx = tuple(int(i) for i in np.unravel_index(np.argmax(np.abs(bad["out"])), bad["out"].shape))
    bad["out"][idx] *= 1.0 + 1e-9
    ok_a, res_a, _ = compare(bad, model_scores, model_sel, tie, m, cfg)
    caught_out = (not ok_a) and res_a["out"] > RTOL and res_a["topk_mismatch_rows"] == 0
    # (b) topk_indices
    bad = {k: np.array(v, copy=True) for k, v in cpp.items()}
    ti = bad["topk_indices"]
    target = None
    for r, t in np.argwhere(~tie & (model_sel[:, :, 1] >= 0)):
        row = ti[r, t]
        visible = np.flatnonzero(np.isfinite(model_scores[r, t]))
        unused = [j for j in visible if j not in set(row.tolist())]
        if unused:
            target = (int(r), int(t), int(unused[0]))
            break
    assert target is not None, "self-check needs a row with an unselected visible block"
    r, t, j = target
    ti[r, t, 0] = j
    ok_b, res_b, _ = compare(bad, model_scores, model_sel, tie, m, cfg)
    caught_topk = (not ok_b) and res_b["topk_mismatch_rows"] == 1
    detail = (f"out{list(idx)} *= 1+1e-9 -> worst out error {res_a['out']:.3e} (caught={caught_out}); "
              f"topk[{r},{t},0] := {j} -> mismatch rows {res_b['topk_mismatch_rows']} (caught={caught_topk})")
    return caught_out and caught_topk, detail


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--msa", required=True, help="path to the msa binary")
    ap.add_argument("--workdir", required=True, help="directory for the generated safetensors files")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    msa = os.path.abspath(args.msa)
    t0 = time.time()
    passed = failed = 0
    ctx0 = None
    for c in CASES:
        tc = time.time()
        try:
            ok, res, msgs, ctx = run_case(c, msa, args.workdir)
        except Exception as e:  # a crash in one case must not hide the others
            ok, res, msgs, ctx = False, None, [f"exception: {type(e).__name__}: {e}"], None
        tq = sum(q for q, _ in c["lens"])
        if res is not None:
            line = (f"{'PASS' if ok else 'FAIL'} {c['name']}: rows={tq} groups={c['Hkv']} "
                    f"topk_mismatch_rows={res['topk_mismatch_rows']} near_tie_rows={res['near_tie_rows']} "
                    f"block_scores={res['block_scores']:.2e} index_lse={res['index_lse']:.2e} "
                    f"out={res['out']:.2e} lse={res['lse']:.2e} ({time.time() - tc:.2f}s)")
        else:
            line = f"FAIL {c['name']}: rows={tq}"
        print(line)
        for msg in msgs:
            print("    " + msg)
        if ok:
            passed += 1
            if ctx0 is None:
                ctx0 = ctx
        else:
            failed += 1
    # negative self-check: the comparison must be able to fail
    if ctx0 is None:
        print("FAIL selfcheck_negative: no passing case to perturb")
        failed += 1
    else:
        ok, detail = negative_selfcheck(ctx0)
        print(f"{'PASS' if ok else 'FAIL'} selfcheck_negative: {detail}")
        passed += ok
        failed += not ok
    print(f"total time {time.time() - t0:.2f}s")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""`msa check` on the dialects of the known MSA implementations, and the judge's mutation score.

For each dialect (msa_dialects.DIALECTS: official FP32 references, official bf16/fp16-out kernels,
official use_fp16_score, official decode (query-major), vLLM, SGLang, FlashInfer), an independent numpy emulation
written from that implementation's public conventions (cited in msa_dialects.py) computes the outputs that
implementation would produce on each golden case, in its own format (id order and layout, dtypes, lse base), and
writes a candidate safetensors file whose __metadata__ declares those conventions. Then:

  1. emulation check (always): each unmutated candidate, read back in its own conventions, agrees with the
     reference outputs (msa's FP64 goldens) within this script's own fp32/bf16/fp16 tolerances, and its id order is
     the dialect's; rows whose selection differs must be near-ties on float64 scores computed here;
  2. dialects (the judge): every unmutated candidate must PASS `msa check` (exit 0, RESULT: PASS);
  3. mutations (the judge's mutation score): every planted bug of mutations.MUTATIONS (kind x case) must FAIL
     (exit 1) with its expected report line FAIL (`selection`, `order`, `layout`, `out`, `lse`, `index_lse`; the
     `error` kind: exit 2 naming --topk-layout); the caught/total table is printed at the end.

Cases: `msa golden generate --suite dialects` (7 cases) plus this file's EXTRA_CASES (small inputs made here with
numpy's RNG; their reference outputs come from `msa run --backend reference`).

Usage (an outside user needs only the msa binary and numpy):
    python3 tests/dialects/dialect_check.py --msa build/tools/msa/msa --workdir /tmp/msa-dialects
    ... --part emulation        only step 1 (no judge verdicts)
    ... --part dialects         steps 1 and 2
    ... --part mutations        step 3 (with step 1 for the dialects it plants in)
    ... --only 'vllm|sglang'    only dialects / kinds whose name matches the regex
    ... --jobs 2                parallel workers (each `msa check` runs with --threads 1)
    ... --goldens DIR           also run the unmutated dialects on another golden directory's cases
                                (e.g. `msa golden generate --suite smoke --dir DIR`)
Candidates stay under WORKDIR/candidates/ (rerun one by hand: `msa check --inputs ... --outputs ...`).
Last line: "N passed, M failed"; exit code 0 only when M == 0.
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # the workers run in parallel; a threaded BLAS only contends
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import concurrent.futures
import json
import math
import re
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import msa_dialects as md  # noqa: E402
from mutations import MUTATIONS  # noqa: E402

LINES = ("selection", "order", "layout", "out", "lse", "index_lse")
# column labels of the mutation table
SHORT = {"m3_decode": "m3dec", "m3_prefill": "m3pre", "init_local": "initloc", "large_logits": "large",
         "square": "square", "fp16_scores": "fp16", "chunked": "chunk", "x_large_bf16": "xlarge",
         "x_init_f16": "xinit", "x_fp16_ties": "xf16tie", "x_fp16_decode": "xf16dec", "x_fp16_prefill": "xf16pre",
         "x_ties_f32": "xties", "x_square_f32": "xsquare", "x_decode_f16": "xdecode"}
GOLDEN_KEYS = ("m3_decode", "m3_prefill", "init_local", "large_logits", "square", "fp16_scores", "chunked")

# Small inputs of this folder's own (numpy RNG, written with md.write_safetensors): what the dialects suite lacks.
EXTRA_CASES = [
    # logits of a few hundred (fp32 exp overflows past ~88) in bf16, an init block and two local blocks
    dict(key="x_large_bf16", seed=11, lens=[(70, 70), (20, 150)], Hq=4, Hkv=2, D=32, Bk=16, top_k=5, init=1,
         local=2, dtype="BF16", amp={"q": 30.0, "index_q": 30.0}),
    # two init blocks and two local blocks over sequences short enough that the forced sets overlap; G = 2, Hkv = 3
    dict(key="x_init_f16", seed=12, lens=[(5, 5), (17, 17), (30, 90)], Hq=6, Hkv=3, D=16, Bk=8, top_k=6, init=2,
         local=2, dtype="F16"),
    # score_format fp16 with few-valued index inputs: exactly tied fp16 scores (id order decides), an init block
    dict(key="x_fp16_ties", seed=13, lens=[(40, 40), (3, 100)], Hq=4, Hkv=2, D=16, Bk=8, top_k=4, init=1,
         local=1, dtype="BF16", score_format="fp16", few_valued=True),
    # score_format fp16, random inputs, visible > top_k (history to rank), decode chunk
    dict(key="x_fp16_decode", seed=14, lens=[(4, 700), (1, 333)], Hq=8, Hkv=2, D=64, Bk=32, top_k=8, init=0,
         local=1, dtype="BF16", score_format="fp16"),
    # score_format fp16, random inputs, a prefill past several blocks (fp16 maxima differ from the exact ones)
    dict(key="x_fp16_prefill", seed=17, lens=[(100, 100)], Hq=4, Hkv=2, D=32, Bk=16, top_k=4, init=0,
         local=1, dtype="BF16", score_format="fp16"),
    # few-valued index inputs in fp32: exactly tied block scores (the tie rule decides), an init block
    dict(key="x_ties_f32", seed=18, lens=[(50, 50), (2, 80)], Hq=4, Hkv=2, D=8, Bk=4, top_k=4, init=1,
         local=1, dtype="F32", few_valued=True),
    # total_q == Hidx == 2 in fp32 (a second shape that cannot tell the layouts apart)
    dict(key="x_square_f32", seed=15, lens=[(1, 100), (1, 61)], Hq=4, Hkv=2, D=32, Bk=8, top_k=4, init=0,
         local=1, dtype="F32"),
    # a multi-token decode batch (q_len 1..5) in fp16
    dict(key="x_decode_f16", seed=16, lens=[(1, 90), (2, 64), (3, 120), (5, 77)], Hq=8, Hkv=2, D=64, Bk=16,
         top_k=5, init=0, local=1, dtype="F16"),
]


# ----------------------------------------------------------------------------------------------------
# cases
# ----------------------------------------------------------------------------------------------------
def make_extra_case(c, path):
    rng = np.random.default_rng(c["seed"])
    cu_q = np.concatenate([[0], np.cumsum([q for q, _ in c["lens"]])]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum([k for _, k in c["lens"]])]).astype(np.int32)
    tq, tk = int(cu_q[-1]), int(cu_k[-1])
    shapes = {"q": (tq, c["Hq"], c["D"]), "k": (tk, c["Hkv"], c["D"]), "v": (tk, c["Hkv"], c["D"]),
              "index_q": (tq, c["Hkv"], c["D"]), "index_k": (tk, 1, c["D"])}
    tensors = []
    for name, shp in shapes.items():
        if c.get("few_valued") and name in ("index_q", "index_k"):
            x = rng.integers(-1, 2, size=shp).astype(np.float64)
        else:
            x = rng.standard_normal(shp) * c.get("amp", {}).get(name, 1.0)
        dt = c["dtype"]
        if dt == "BF16":
            store = md.bf16_bits(x.astype(np.float32))
        elif dt == "F16":
            store = x.astype(np.float16)
        else:
            store = x.astype(np.float32)
        tensors.append((name, dt, store))
    tensors += [("cu_seqlens_q", "I32", cu_q), ("cu_seqlens_k", "I32", cu_k)]
    cfg = {"block_size": c["Bk"], "top_k": c["top_k"], "init_blocks": c["init"], "pooling": "max"}
    if c["local"] != 1:
        cfg["local_blocks"] = c["local"]
    if c.get("score_format", "native") != "native":
        cfg["score_format"] = c["score_format"]
    md.write_safetensors(path, tensors, {"msa_config": json.dumps(cfg)})


def prepare_cases(msa, workdir, log, more_goldens=()):
    """Returns {key: (name, inputs_path, outputs_path)}; more_goldens: directories made by `msa golden generate`
    (any suite) whose cases are added under their own names."""
    cases = {}
    for gd in more_goldens:
        for entry in json.load(open(os.path.join(gd, "MANIFEST.json")))["cases"]:
            name = entry["name"]
            cases[name] = (name, os.path.join(gd, name, "inputs.safetensors"),
                           os.path.join(gd, name, "outputs.safetensors"))
    gdir = os.path.join(workdir, "golden-dialects")
    mpath = os.path.join(gdir, "MANIFEST.json")
    # (re)generated whenever the msa binary is newer than the goldens (the suite lives in its code)
    if not os.path.exists(mpath) or os.path.getmtime(mpath) < os.path.getmtime(msa):
        t0 = time.time()
        run([msa, "golden", "generate", "--suite", "dialects", "--dir", gdir])
        log(f"generated --suite dialects in {time.time() - t0:.1f}s")
    manifest = json.load(open(os.path.join(gdir, "MANIFEST.json")))
    for entry in manifest["cases"]:
        name = entry["name"]
        key = next(k for k in GOLDEN_KEYS if name.startswith("dialect_" + k + "_b"))
        cases[key] = (name, os.path.join(gdir, name, "inputs.safetensors"),
                      os.path.join(gdir, name, "outputs.safetensors"))
    xdir = os.path.join(workdir, "extra")
    os.makedirs(xdir, exist_ok=True)
    t0 = time.time()
    for c in EXTRA_CASES:
        inp = os.path.join(xdir, c["key"] + ".inputs.safetensors")
        outp = os.path.join(xdir, c["key"] + ".outputs.safetensors")
        make_extra_case(c, inp)
        run([msa, "run", "--inputs", inp, "--out", outp, "--backend", "reference", "--threads", "1"])
        cases[c["key"]] = (c["key"], inp, outp)
    log(f"made {len(EXTRA_CASES)} extra cases in {time.time() - t0:.1f}s")
    return cases


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[-1500:]}")
    return p


_CASE_CACHE = {}
_BASE_CACHE = {}


def unmutated(case, dialect):
    if (case.name, dialect) not in _BASE_CACHE:
        t, m, _ = md.emulate(case, md.dialect_knobs(dialect))
        _BASE_CACHE[(case.name, dialect)] = (t, m)
    return _BASE_CACHE[(case.name, dialect)]


def load_case(spec):
    name, inp, outp = spec
    if name not in _CASE_CACHE:
        _CASE_CACHE[name] = md.Case(name, inp, outp)
    return _CASE_CACHE[name]


# ----------------------------------------------------------------------------------------------------
# the emulation check: own tolerances against the reference outputs
# ----------------------------------------------------------------------------------------------------
def read_back(case, tensors, meta):
    """The candidate in canonical form: ids head-major, lse natural, floats widened to float64."""
    d = {}
    for name, dt, arr in tensors:
        if name == "topk_indices":
            ids = arr.astype(np.int64)
            if meta.get("topk_layout") == "query_major":
                ids = ids.transpose(1, 0, 2)
            d[name] = ids
        else:
            x = md.bf16_to_f32(arr).astype(np.float64) if dt == "BF16" else arr.astype(np.float64)
            if name in ("lse", "index_lse") and meta.get("lse_base") == "2":
                x = x / md.LOG2E
            d[name] = (dt, x)
    return d


def check_order(case, knobs, ids, M64):
    """The dialect's slot order, row by row. Returns the first bad row as a message, or None."""
    for r in range(case.Hidx):
        for t in range(case.total_q):
            row = [int(j) for j in ids[r, t]]
            n = min(int(case.visible[t]), case.top_k)
            valid, pad = row[:n], row[n:]
            init, locals_, local = case.forced(t)
            if any(j < 0 for j in valid) or any(j != -1 for j in pad):
                return f"row ({r},{t}) {row}: -1 padding not after {n} valid ids"
            if knobs.order == "strict_desc" and valid[-1] != local:
                return f"row ({r},{t}) {row}: local {local} not last"
            if knobs.order == "ascending" and valid != sorted(valid):
                return f"row ({r},{t}) {row}: not ascending"
            if knobs.order == "sentinel":
                nf = len(init) + len(set(locals_) | {local})
                head = valid[:min(nf, n)]
                if head != init + sorted(set(locals_) | {local}):
                    return f"row ({r},{t}) {row}: forced blocks not first"
    return None


def emulation_check(case, knobs, tensors, meta):
    """Returns a list of problems (empty: the emulation agrees with the reference)."""
    g = case.golden()
    cand = read_back(case, tensors, meta)
    problems = []
    M64 = md.exact_block_scores(case)
    if case.score_format == "fp16":
        with np.errstate(over="ignore"):
            M64 = M64.astype(np.float16).astype(np.float64)
    same = np.ones((case.Hidx, case.total_q), dtype=bool)
    if "topk_indices" in cand:
        ids = cand["topk_indices"]
        msg = check_order(case, knobs, ids, M64)
        if msg:
            problems.append("order: " + msg)
        gi = g["topk_indices"].astype(np.int64)
        near = far = 0
        # near-tie band: the fp32 error of the scores, or the rounding of the stored scores (bf16 storage)
        band = 1e-5 if knobs.score_storage != "bf16" else 2.0 ** -7
        for r in range(case.Hidx):
            for t in range(case.total_q):
                a = set(int(j) for j in ids[r, t] if j >= 0)
                b = set(int(j) for j in gi[r, t] if j >= 0)
                if a == b:
                    continue
                same[r, t] = False
                init, locals_, local = case.forced(t)
                hist_b = [j for j in b if j not in set(init) | set(locals_) | {local}]
                theta = min(M64[r, t, j] for j in hist_b) if hist_b else 0.0
                tol = band * max(1.0, abs(theta))
                if all(abs(M64[r, t, j] - theta) <= tol for j in a ^ b):
                    near += 1
                else:
                    far += 1
                    if far == 1:
                        problems.append(f"selection row ({r},{t}): {sorted(a)} vs reference {sorted(b)} "
                                        f"(not a near-tie at theta {theta:.6g})")
        if near:
            problems.append(f"note: {near} near-tie rows differ from the reference (allowed)")
    for name in ("out", "lse", "index_lse"):
        if name not in cand:
            continue
        dt, x = cand[name]
        ref = g[name]
        if name == "index_lse":
            rows = same
        else:
            rows = same.all(axis=0)
            if name == "out":
                rows = rows[:, None, None] & np.ones(ref.shape, dtype=bool)
            else:
                rows = rows[:, None] & np.ones(ref.shape, dtype=bool)
        u = {"F32": 2.0 ** -24, "BF16": 2.0 ** -8, "F16": 2.0 ** -11}[dt]
        # the output's own rounding (2u, p rounded to v's dtype included) + an fp32 accumulation allowance
        fp32 = 1e-4 if name == "out" else 1e-5
        if case.name.startswith("dialect_large_logits") or case.name.startswith("x_large"):
            fp32 *= 10  # logits ~1e4: fp32 score errors of ~1e-3 move the softmax weights
        bound = (2 * u if dt != "F32" else 0) * np.abs(ref) + fp32 * np.maximum(1.0, np.abs(ref))
        if name == "out" and knobs.p_round_to_v and case.dtypes["v"] in ("BF16", "F16"):
            # p rounded to v's dtype before the PV product: |sum (p~ - p) v| / l <= u_v * max|v|
            uv = 2.0 ** -8 if case.dtypes["v"] == "BF16" else 2.0 ** -11
            bound = bound + uv * float(np.max(np.abs(case.x64["v"])))
        bad = rows & ~(np.abs(x - ref) <= bound)
        if bad.any():
            i = tuple(int(v) for v in np.argwhere(bad)[0])
            problems.append(f"{name} ({dt}): {int(bad.sum())} values off, first {i}: {x[i]!r} vs {ref[i]!r}")
    return [p for p in problems if not p.startswith("note:")], [p for p in problems if p.startswith("note:")]


# ----------------------------------------------------------------------------------------------------
# the judge
# ----------------------------------------------------------------------------------------------------
def judge(msa, inputs, outputs, json_path):
    if os.path.exists(json_path):
        os.remove(json_path)
    p = subprocess.run([msa, "check", "--inputs", inputs, "--outputs", outputs, "--json", json_path,
                        "--threads", "1"], capture_output=True, text=True)
    lines = {}
    for line in p.stdout.splitlines():
        m = re.match(r"^  (selection|order|layout|out|lse|index_lse)\s+(PASS|FAIL)\b", line)
        if m:
            lines.setdefault(m.group(1), set()).add(m.group(2))
    rep = None
    if os.path.exists(json_path):
        try:
            rep = json.load(open(json_path))
        except ValueError:
            rep = None
    return p.returncode, p.stdout, p.stderr, lines, rep


def failing_lines(lines):
    return sorted(k for k, v in lines.items() if "FAIL" in v)


def json_agrees(rep, expect):
    """Where the JSON report says something about the expected line, it must say FAIL. Returns a problem or None."""
    if rep is None:
        return "no JSON report"
    if rep.get("passed") is not False:
        return f"JSON passed = {rep.get('passed')!r}"
    sel = rep.get("selection") or {}
    if expect == "selection" and sel.get("passed") is not False:
        return f"JSON selection.passed = {sel.get('passed')!r}"
    if expect == "order" and not (sel.get("order_fault_rows") or 0) > 0:
        return f"JSON selection.order_fault_rows = {sel.get('order_fault_rows')!r}"
    if expect in ("out", "lse", "index_lse"):
        for t in rep.get("tensors") or []:
            if t.get("name") == expect and t.get("passed") is not False:
                return f"JSON tensors[{expect}].passed = {t.get('passed')!r}"
    return None


# ----------------------------------------------------------------------------------------------------
# jobs
# ----------------------------------------------------------------------------------------------------
def candidate_path(workdir, tag):
    d = os.path.join(workdir, "candidates")
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, tag + ".safetensors"), os.path.join(d, tag + ".json")


def plant_differs(base_t, base_m, tensors, meta):
    """Whether a planted bug changed the candidate by more than fp32 noise: metadata, ids, a dtype or shape, a
    NaN / inf pattern, or a float value by more than 1e-5 relative (the unmutated and mutated emulations may sum
    in different orders, so last-bit differences do not count as a plant)."""
    if base_m != meta or len(base_t) != len(tensors):
        return True
    for (n1, d1, a1), (n2, d2, a2) in zip(base_t, tensors):
        if n1 != n2 or d1 != d2 or a1.shape != a2.shape:
            return True
        if d1 == "I32":
            if not np.array_equal(a1, a2):
                return True
            continue
        x1 = md.bf16_to_f32(a1).astype(np.float64) if d1 == "BF16" else a1.astype(np.float64)
        x2 = md.bf16_to_f32(a2).astype(np.float64) if d2 == "BF16" else a2.astype(np.float64)
        f1, f2 = np.isfinite(x1), np.isfinite(x2)
        if not np.array_equal(f1, f2):
            return True
        if f1.any() and np.max(np.abs(x1[f1] - x2[f1]) / np.maximum(1.0, np.abs(x1[f1]))) > 1e-5:
            return True
    return False


def run_job(job):
    """job: dict(type, dialect, key, spec, kind?, expect?, knobs?, msa, workdir, use_judge). Returns a result dict."""
    t0 = time.time()
    case = load_case(job["spec"])
    res = dict(job=job, ok=True, problems=[], notes=[], verdict="")
    try:
        if job["type"] == "dialect":
            knobs = md.dialect_knobs(job["dialect"])
            tag = f"{job['dialect']}__{job['key']}"
        else:
            knobs = md.dialect_knobs(job["dialect"], **job["knobs"])
            tag = f"bug_{job['kind']}__{job['dialect']}__{job['key']}"
        tensors, meta, info = md.emulate(case, knobs)
        path, jpath = candidate_path(job["workdir"], tag)
        md.write_safetensors(path, tensors, meta)
        res["path"] = path
        if job["type"] == "dialect":
            problems, notes = emulation_check(case, knobs, tensors, meta)
            res["problems"] += ["emulation: " + p for p in problems]
            res["notes"] += notes
        else:
            # the plant took: the mutated candidate differs from the unmutated one
            base_t, base_m = unmutated(case, job["dialect"])
            if not plant_differs(base_t, base_m, tensors, meta):
                res["problems"].append("plant: the mutated candidate equals the unmutated one (beyond fp32 noise)")
            if knobs.selection_edit != "none" and not info.get("edits"):
                res["problems"].append("plant: no row could be edited")
            if info.get("edits"):
                r, t, before, after = info["edits"][0]
                res["notes"].append(f"edited {len(info['edits'])} rows, first (group {r}, row {t}): "
                                    f"{before} -> {after}{info.get('edit_note', '')}")
        if job["use_judge"]:
            rc, out, err, lines, rep = judge(job["msa"], case.inputs_path, path, jpath)
            res["rc"], res["stdout"], res["stderr"] = rc, out, err
            fl = failing_lines(lines)
            if job["type"] == "dialect":
                if rc != 0 or "RESULT: PASS" not in out or fl:
                    res["problems"].append(f"judge: exit {rc}, failing lines {fl}")
                res["verdict"] = "PASS" if rc == 0 else f"exit {rc} {fl}"
            else:
                exp = job["expect"]
                if exp == "pass":
                    caught = rc == 0 and "RESULT: PASS" in out and not fl
                    res["verdict"] = f"exit {rc} FAIL lines {fl}"
                    if not caught:
                        res["problems"].append(f"judge: exit {rc}, failing lines {fl} (a control: want PASS)")
                elif exp == "error":
                    caught = rc == 2 and "--topk-layout" in err
                    res["verdict"] = f"exit {rc}"
                    if not caught:
                        res["problems"].append(f"judge: exit {rc} (want 2 naming --topk-layout): "
                                               f"{err.strip()[:300]}")
                else:
                    caught = rc == 1 and exp in fl and "RESULT: FAIL" in out
                    res["verdict"] = f"exit {rc} FAIL lines {fl}"
                    if not caught:
                        res["problems"].append(f"judge: exit {rc}, failing lines {fl} (want {exp} FAIL)")
                    else:
                        jp = json_agrees(rep, exp)
                        if jp:
                            res["problems"].append("judge JSON: " + jp)
                            caught = False
                res["caught"] = caught
    except Exception as e:  # one broken job must not hide the others
        import traceback
        res["problems"].append(f"exception: {type(e).__name__}: {e}\n{traceback.format_exc()[-1500:]}")
        res["caught"] = False
    res["ok"] = not res["problems"]
    res["seconds"] = time.time() - t0
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--msa", required=True, help="path to the msa binary")
    ap.add_argument("--workdir", required=True, help="directory for goldens, inputs and candidates")
    ap.add_argument("--part", default="all", choices=["all", "emulation", "dialects", "mutations"])
    ap.add_argument("--only", default="", help="regex: only dialects / mutation kinds whose name matches")
    ap.add_argument("--jobs", type=int, default=2, help="parallel workers (default 2)")
    ap.add_argument("--goldens", action="append", default=[],
                    help="another golden directory (`msa golden generate --suite smoke --dir D`, or your own in that "
                         "layout): the unmutated dialects also run on its max-pooling, native-index cases")
    ap.add_argument("--skip-heavy", action="store_true",
                    help="leave out the M3-sized cases (m3_decode, m3_prefill, fp16_scores): for sanitizer builds")
    ap.add_argument("--no-judge", action="store_true",
                    help="emulate and self-check only; do not run msa check (mutations: only check that each plant "
                         "changes the candidate)")
    args = ap.parse_args()
    msa = os.path.abspath(args.msa)
    workdir = os.path.abspath(args.workdir)
    os.makedirs(workdir, exist_ok=True)
    t_start = time.time()
    log = lambda s: print(s, flush=True)  # noqa: E731
    cases = prepare_cases(msa, workdir, log, [os.path.abspath(d) for d in args.goldens])
    more_keys = [k for k in cases if k not in GOLDEN_KEYS and k not in [c["key"] for c in EXTRA_CASES]]
    only = re.compile(args.only) if args.only else None
    use_judge = args.part != "emulation" and not args.no_judge
    jobs = []
    if args.part in ("all", "emulation", "dialects"):
        for dialect, spec in md.DIALECTS.items():
            if only and not only.search(dialect):
                continue
            for key in list(GOLDEN_KEYS) + [c["key"] for c in EXTRA_CASES] + more_keys:
                case = load_case(cases[key])
                # the emulations model max pooling and native index inputs (no lse / mean pooling, no e4m3)
                if case.pooling != "max" or case.cfg.get("index_format", "native") != "native":
                    continue
                if spec["applies"](case):
                    jobs.append(dict(type="dialect", dialect=dialect, key=key, spec=cases[key], msa=msa,
                                     workdir=workdir, use_judge=use_judge))
    if args.part in ("all", "mutations"):
        for m in MUTATIONS:
            if only and not only.search(m["kind"]):
                continue
            for dialect, key in m["on"]:
                jobs.append(dict(type="mutation", kind=m["kind"], expect=m["expect"], knobs=m["knobs"],
                                 dialect=dialect, key=key, spec=cases[key], msa=msa, workdir=workdir,
                                 use_judge=use_judge))
    # the expensive M3 cases first, so the pool's tail is short
    heavy = ("m3_decode", "m3_prefill", "fp16_scores")
    if args.skip_heavy:
        jobs = [j for j in jobs if j["key"] not in heavy]
    jobs.sort(key=lambda j: 0 if j["key"] in heavy else 1)
    results = []
    with concurrent.futures.ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for res in pool.map(run_job, jobs):
            results.append(res)
    passed = failed = 0
    # --- the dialects ---
    dres = [r for r in results if r["job"]["type"] == "dialect"]
    if dres:
        log("\n== dialects (unmutated): emulation vs reference" + (", then msa check" if use_judge else ""))
        for r in sorted(dres, key=lambda r: (r["job"]["dialect"], r["job"]["key"])):
            j = r["job"]
            status = "PASS" if r["ok"] else "FAIL"
            log(f"{status} {j['dialect']:20s} {j['key']:13s} {r['verdict']:10s} ({r['seconds']:.1f}s)")
            for p in r["problems"]:
                log("    " + p)
            for n in r["notes"]:
                log("    " + n)
            if not r["ok"] and "stdout" in r:
                log("    candidate: " + r.get("path", "?"))
                log("    " + "\n    ".join(r["stdout"].splitlines()[-25:]))
            passed += r["ok"]
            failed += not r["ok"]
    # --- the mutation table ---
    mres = [r for r in results if r["job"]["type"] == "mutation"]
    if mres:
        log("\n== mutations: planted bugs, each must FAIL on its expected line")
        for r in mres:
            j = r["job"]
            if j["expect"] == "pass":
                status = "PASSED" if r["ok"] else "WRONG "
            else:
                status = "CAUGHT" if r["ok"] else "MISSED"
            log(f"{status} {j['kind']:32s} {j['dialect']:20s}@{j['key']:13s} want {j['expect']:9s} "
                f"{r['verdict']} ({r['seconds']:.1f}s)")
            for p in r["problems"] + r["notes"]:
                log("    " + p)
            if not r["ok"] and "stdout" in r:
                log("    candidate: " + r.get("path", "?"))
                log("    " + "\n    ".join(r["stdout"].splitlines()[-25:]))
            passed += r["ok"]
            failed += not r["ok"]
        # kind x case table: bugs (caught/planted), then controls (passed/planted)
        keys = [k for k in list(GOLDEN_KEYS) + [c["key"] for c in EXTRA_CASES]
                if any(r["job"]["key"] == k for r in mres)]
        kinds = []
        for r in mres:
            if r["job"]["kind"] not in kinds:
                kinds.append(r["job"]["kind"])
        bugs = [k for k in kinds if not k.startswith("ok_")]
        controls = [k for k in kinds if k.startswith("ok_")]
        w = max(len(k) for k in kinds) + 1
        cw = max(len(SHORT.get(k, k)) for k in keys) + 1

        def table(title, names):
            log(title)
            log(" " * w + "".join(f"{SHORT.get(k, k):>{cw}}" for k in keys) + f"{'total':>7}")
            tc = tt = 0
            for kind in names:
                row = f"{kind:{w}}"
                kc = kt = 0
                for key in keys:
                    rs = [r for r in mres if r["job"]["kind"] == kind and r["job"]["key"] == key]
                    if rs:
                        c = sum(r["ok"] for r in rs)
                        row += f"{f'{c}/{len(rs)}':>{cw}}"
                        kc += c
                        kt += len(rs)
                    else:
                        row += f"{'.':>{cw}}"
                row += f"{f'{kc}/{kt}':>7}"
                tc += kc
                tt += kt
                log(row)
            return tc, tt

        legend = ", ".join(f"{SHORT.get(k, k)} = {k}" for k in keys if SHORT.get(k, k) != k)
        tc, tt = table("\n== the judge's mutation score: planted bugs caught / planted (kind x case)", bugs)
        if controls:
            pc, pt = table("\n== controls: changes the rules allow, judged PASS / planted", controls)
        log(f"columns: {legend}")
        if use_judge:
            log(f"caught {tc}/{tt} planted bugs ({len(bugs)} kinds), {100.0 * tc / max(tt, 1):.1f}%" +
                (f"; controls passed {pc}/{pt}" if controls else ""))
        else:
            log(f"no judge run: {tc}/{tt} plants change their candidate ({len(bugs)} kinds)")
    log(f"total time {time.time() - t_start:.1f}s")
    log(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

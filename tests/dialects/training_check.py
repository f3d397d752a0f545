#!/usr/bin/env python3
"""`msa check` on training outputs (SPEC.md section 8), and the judge's mutation score for them.

For each of this file's CASES (small inputs made here with numpy's generator, with dout and sometimes dlse), `msa run`
gives the reference selection; an independent numpy emulation of a training kernel (training_dialects.py: the
official MiniMax-AI/MSA conventions, in two dialects, F32 and BF16 gradients) computes dq, dk, dv, dqi, dki and
kl_loss on that selection and writes a candidate file. Then:

  1. unmutated: every candidate agrees with msa's FP64 reference outputs within this script's own tolerance, and
     must PASS `msa check` (exit 0, every line PASS);
  2. mutations (training_mutations.MUTATIONS): every planted bug must exit 1 with FAIL on each expected tensor's line,
     and that line's `worst:` location must be a (row, head) the plant changed (query rows for dq / dqi, key rows for
     dk / dv / dki, `seq S key K (key row R)` with R = cu_seqlens_k[S] + K); every control must PASS.

Usage:
    python3 tests/dialects/training_check.py --msa build/tools/msa/msa --workdir /tmp/msa-training [--jobs 2]
    ... --only REGEX        only the mutation kinds matching REGEX (the unmutated candidates always run)
Candidates stay under WORKDIR/candidates/ (rerun one by hand: `msa check --inputs ... --outputs ...`).
Last line: "N of N planted training bugs caught (K kinds); controls C of C; U of U unmutated training outputs pass";
exit code 0 only when everything is as required.
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # the workers run in parallel; a threaded BLAS only contends
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import concurrent.futures
import json
import re
import subprocess
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import msa_dialects as md  # noqa: E402
import training_dialects as td  # noqa: E402
import training_mutations  # noqa: E402
from training_mutations import MUTATIONS  # noqa: E402

# Small training problems: lens = [(q_len, k_len)] per sequence (queries are the causal suffix of their keys).
CASES = [
    # one prefill past several blocks, G = 2
    dict(key="prefill_f32", short="prefill", seed=31, lens=[(40, 40)], Hq=4, Hkv=2, D=24, Bk=8, top_k=3, init=0,
         pooling="max", dtype="F32"),
    # chunked prefill: 24 queries after a 66-key prefix, an init block, lse pooling
    dict(key="chunked_bf16", short="chunked", seed=32, lens=[(24, 90)], Hq=4, Hkv=2, D=16, Bk=8, top_k=4, init=1,
         pooling="lse", dtype="BF16"),
    # a ragged batch with a sequence of keys only (q_len 0), Hkv = 3, mean pooling
    dict(key="ragged_f32", short="ragged", seed=33, lens=[(5, 5), (0, 9), (17, 17), (12, 60)], Hq=6, Hkv=3, D=12,
         Bk=4, top_k=5, init=0, pooling="mean", dtype="F32"),
    # GQA with G = 4, with dlse
    dict(key="gqa4_dlse_bf16", short="gqa4", seed=34, lens=[(48, 48)], Hq=8, Hkv=2, D=32, Bk=16, top_k=3, init=0,
         pooling="max", dtype="BF16", dlse=True),
    # multi-token decode, q_len 1..4, with dlse
    dict(key="decode_dlse_f32", short="decode", seed=35, lens=[(1, 50), (2, 33), (3, 70), (4, 41)], Hq=4, Hkv=2,
         D=20, Bk=8, top_k=4, init=0, pooling="max", dtype="F32", dlse=True),
    # logits of tens to hundreds (nearly one-hot softmax rows) in bf16
    dict(key="large_bf16", short="large", seed=36, lens=[(32, 64)], Hq=4, Hkv=2, D=16, Bk=8, top_k=3, init=0,
         pooling="max", dtype="BF16", amp={"q": 30.0, "index_q": 30.0}),
]
assert tuple(c["key"] for c in CASES) == training_mutations.CASES, "the mutation table names other cases"
assert tuple(td.DIALECTS) == training_mutations.DIALECTS, "the mutation table names other dialects"
LINE = re.compile(r"^  (selection|dq|dk|dv|dqi|dki|kl_loss)\s+(PASS|FAIL)\b")
WORST = re.compile(r"^\s+worst: (?:seq (\d+) (query|key) (\d+) \((?:row|key row) (\d+)\)(?: head (\d+))?|the value)")


# ----------------------------------------------------------------------------------------------------
# cases
# ----------------------------------------------------------------------------------------------------
def stored(x, dtype):
    return md.bf16_bits(x.astype(np.float32)) if dtype == "BF16" else x.astype(np.float32)


def make_inputs(c, path):
    """inputs.safetensors of SPEC 7 with dout (and dlse) for one CASES entry."""
    rng = np.random.default_rng(c["seed"])
    cu_q = np.concatenate([[0], np.cumsum([q for q, _ in c["lens"]])]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum([k for _, k in c["lens"]])]).astype(np.int32)
    total_q, total_k = int(cu_q[-1]), int(cu_k[-1])
    shapes = {"q": (total_q, c["Hq"], c["D"]), "k": (total_k, c["Hkv"], c["D"]), "v": (total_k, c["Hkv"], c["D"]),
              "index_q": (total_q, c["Hkv"], c["D"]), "index_k": (total_k, 1, c["D"]),
              "dout": (total_q, c["Hq"], c["D"])}
    if c.get("dlse"):
        shapes["dlse"] = (total_q, c["Hq"])
    tensors = []
    for name, shape in shapes.items():
        x = rng.standard_normal(shape) * c.get("amp", {}).get(name, 1.0)
        tensors.append((name, c["dtype"], stored(x, c["dtype"])))
    tensors += [("cu_seqlens_q", "I32", cu_q), ("cu_seqlens_k", "I32", cu_k)]
    config = {"block_size": c["Bk"], "top_k": c["top_k"], "init_blocks": c["init"], "pooling": c["pooling"]}
    md.write_safetensors(path, tensors, {"msa_config": json.dumps(config)})


def wait_for(path, seconds=60):
    deadline = time.time() + seconds
    while not os.path.exists(path) and time.time() < deadline:
        time.sleep(2)
    time.sleep(2)  # let whoever writes it finish


def run_msa(msa, args):
    """msa with args. The binary may be rebuilt under us: when it is missing or cannot start, wait for it and retry
    once."""
    for attempt in (1, 2):
        if not os.path.exists(msa):
            wait_for(msa)
        try:
            return subprocess.run([msa] + args, capture_output=True, text=True)
        except OSError:
            if attempt == 2:
                raise
            wait_for(msa)


def prepare_cases(msa, workdir):
    """Returns {key: (inputs path, reference outputs path)}; the reference gives the selection."""
    directory = os.path.join(workdir, "cases")
    os.makedirs(directory, exist_ok=True)
    paths = {}
    for c in CASES:
        inputs = os.path.join(directory, c["key"] + ".inputs.safetensors")
        reference = os.path.join(directory, c["key"] + ".reference.safetensors")
        make_inputs(c, inputs)
        p = run_msa(msa, ["run", "--inputs", inputs, "--out", reference, "--backend", "reference", "--threads", "1"])
        if p.returncode != 0:
            raise RuntimeError(f"msa run on {c['key']} exited {p.returncode}: {p.stderr.strip()[-1500:]}")
        paths[c["key"]] = (inputs, reference)
    return paths


# ----------------------------------------------------------------------------------------------------
# the judge's report
# ----------------------------------------------------------------------------------------------------
def parse_report(text):
    """{line name: (PASS | FAIL, worst location or None)}; a location is (seq, "query" | "key", index, row, head)
    or () for `the value`."""
    lines, current = {}, None
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            current = m.group(1)
            lines[current] = (m.group(2), None)
            continue
        m = WORST.match(line)
        if m and current is not None:
            if m.group(1) is None:
                where = ()
            else:
                head = int(m.group(5)) if m.group(5) is not None else 0
                where = (int(m.group(1)), m.group(2), int(m.group(3)), int(m.group(4)), head)
            lines[current] = (lines[current][0], where)
            current = None
    return lines


def location_problem(case, name, where, touched):
    """Why the worst location of tensor `name` is not a row the plant changed, or None."""
    if where is None:
        return f"{name}: no worst: line"
    if name == "kl_loss":
        return None if where == () and () in touched else f"kl_loss: worst {where!r}"
    if where == ():
        return f"{name}: worst names no row"
    seq, kind, index, row, head = where
    want_kind, cu = ("key", case.cu_k) if name in td.KEY_MAJOR else ("query", case.cu_q)
    if kind != want_kind:
        return f"{name}: worst names a {kind} row, want a {want_kind} row"
    if row != int(cu[seq]) + index:
        return f"{name}: worst row {row} is not cu_seqlens[{seq}] + {index} = {int(cu[seq]) + index}"
    if (row, head) not in touched:
        sample = sorted(touched)[:6]
        return (f"{name}: worst (row {row}, head {head}) is not among the {len(touched)} (row, head) pairs the plant "
                f"changed (first {sample})")
    return None


# ----------------------------------------------------------------------------------------------------
# jobs
# ----------------------------------------------------------------------------------------------------
_CASES, _BASES = {}, {}


def load_case(key, paths):
    if key not in _CASES:
        _CASES[key] = td.TrainingCase(key, *paths)
    return _CASES[key]


def unmutated(case, dialect):
    if (case.name, dialect) not in _BASES:
        _BASES[(case.name, dialect)] = td.emulate(case, td.dialect_knobs(dialect))
    return _BASES[(case.name, dialect)]


# The unmutated emulation against msa's FP64 reference outputs: this script's own bound on the relative L2 error of
# each output (fp32 arithmetic; bf16 storage and bf16 intermediate operands).
EMULATION_TOLERANCE = {"F32": 1e-5, "BF16": 2e-2}


def emulation_problems(case, dialect, values):
    knobs = td.dialect_knobs(dialect)
    reference = case.golden()
    problems = []
    for name in td.TRAINING_OUTPUTS:
        dtype = knobs.kl_dtype if name == "kl_loss" else knobs.grad_dtype
        ref = reference[name].astype(np.float64)
        error = np.linalg.norm(values[name] - ref) / max(np.linalg.norm(ref), 1e-300)
        if not error <= EMULATION_TOLERANCE[dtype]:
            problems.append(f"emulation: {name} relative L2 error {error:.3g} against the FP64 reference "
                            f"(tolerance {EMULATION_TOLERANCE[dtype]:g} at {dtype})")
    return problems


def judge(msa, inputs, candidate, flags):
    p = run_msa(msa, ["check", "--inputs", inputs, "--outputs", candidate, "--threads", "1"] + flags)
    return p.returncode, p.stdout, p.stderr, parse_report(p.stdout)


def verdict_problems(job, case, rc, report, lines, touched):
    """What is wrong with the judge's verdict for this job (empty: as required)."""
    failing = sorted(name for name, (status, _) in lines.items() if status == "FAIL")
    if job["expect"] == "pass":
        problems = []
        if rc != 0 or "RESULT: PASS" not in report or failing:
            problems.append(f"judge: exit {rc}, FAIL lines {failing} (want PASS)")
        missing = [n for n in ("selection",) + td.TRAINING_OUTPUTS if n not in lines]
        if missing:
            problems.append(f"judge: no report line for {missing}")
        return problems
    problems = []
    if rc != 1 or "RESULT: FAIL" not in report:
        problems.append(f"judge: exit {rc} (want 1, RESULT: FAIL)")
    for name in job["expect"]:
        status, where = lines.get(name, ("absent", None))
        if status != "FAIL":
            problems.append(f"judge: {name} {status} (want FAIL)")
            continue
        problem = location_problem(case, name, where, touched[name])
        if problem:
            problems.append("judge location: " + problem)
    return problems


def plant_problems(job, touched):
    """The plant took: a control changes some stored value, a bug changes every tensor it must be caught on."""
    if job["kind"] == "unmutated":
        return []
    if job["expect"] == "pass":
        return [] if any(touched.values()) else ["plant: the control equals the unmutated candidate"]
    return [f"plant: {name} equals the unmutated candidate's" for name in job["expect"] if not touched[name]]


def run_job(job):
    """job: dict(kind, expect, dialect, key, knobs, flags (msa check's), paths, msa, workdir). Returns a result
    dict."""
    t0 = time.time()
    result = dict(job=job, problems=[], verdict="")
    try:
        case = load_case(job["key"], job["paths"])
        base_tensors, base_meta, base_values = unmutated(case, job["dialect"])
        if job["kind"] == "unmutated":
            tensors, meta, values = base_tensors, base_meta, base_values
        else:
            tensors, meta, values = td.emulate(case, td.dialect_knobs(job["dialect"], **job["knobs"]))
        touched = td.touched_rows(base_values, values)
        if job["kind"] == "unmutated":
            result["problems"] += emulation_problems(case, job["dialect"], values)
        result["problems"] += plant_problems(job, touched)
        directory = os.path.join(job["workdir"], "candidates")
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"{job['kind']}__{job['dialect']}__{job['key']}.safetensors")
        md.write_safetensors(path, tensors, meta)
        result["path"] = path
        rc, report, stderr, lines = judge(job["msa"], case.inputs_path, path, job["flags"])
        result["report"] = report + stderr
        failing = sorted(name for name, (status, _) in lines.items() if status == "FAIL")
        result["verdict"] = f"exit {rc} FAIL lines {failing}"
        result["problems"] += verdict_problems(job, case, rc, report, lines, touched)
    except Exception as e:  # one broken job must not hide the others
        result["problems"].append(f"exception: {type(e).__name__}: {e}\n{traceback.format_exc()[-1500:]}")
    result["ok"] = not result["problems"]
    result["seconds"] = time.time() - t0
    return result


def make_jobs(args, paths):
    common = dict(msa=os.path.abspath(args.msa), workdir=os.path.abspath(args.workdir))
    jobs = [dict(kind="unmutated", expect="pass", dialect=dialect, key=c["key"], knobs={}, flags=[],
                 paths=paths[c["key"]], **common) for dialect in td.DIALECTS for c in CASES]
    only = re.compile(args.only) if args.only else None
    for m in MUTATIONS:
        if only and not only.search(m["kind"]):
            continue
        for dialect, key in m["on"]:
            jobs.append(dict(kind=m["kind"], expect=m["expect"], dialect=dialect, key=key, knobs=m["knobs"],
                             flags=m.get("flags", []), paths=paths[key], **common))
    return jobs


# ----------------------------------------------------------------------------------------------------
# the tables
# ----------------------------------------------------------------------------------------------------
def table(log, title, results, kinds):
    """kind x case: passing results / results; returns (passing, total)."""
    keys = [c["key"] for c in CASES]
    width = max(len(k) for k in kinds) + 1
    column = max(len(c["short"]) for c in CASES) + 2
    log(title)
    log(" " * width + "".join(f"{c['short']:>{column}}" for c in CASES) + f"{'total':>8}")
    all_ok = all_n = 0
    for kind in kinds:
        row, kind_ok, kind_n = f"{kind:{width}}", 0, 0
        for key in keys:
            cell = [r for r in results if r["job"]["kind"] == kind and r["job"]["key"] == key]
            ok = sum(r["ok"] for r in cell)
            row += f"{f'{ok}/{len(cell)}' if cell else '.':>{column}}"
            kind_ok, kind_n = kind_ok + ok, kind_n + len(cell)
        log(row + f"{f'{kind_ok}/{kind_n}':>8}")
        all_ok, all_n = all_ok + kind_ok, all_n + kind_n
    return all_ok, all_n


def report_results(log, results):
    for r in results:
        j = r["job"]
        if j["kind"] == "unmutated":
            status = "PASS  " if r["ok"] else "FAIL  "
        elif j["expect"] == "pass":
            status = "PASSED" if r["ok"] else "WRONG "
        else:
            status = "CAUGHT" if r["ok"] else "MISSED"
        want = "pass" if j["expect"] == "pass" else "FAIL " + ",".join(j["expect"])
        want += "".join(" " + flag for flag in j["flags"])
        log(f"{status} {j['kind']:30s} {j['dialect']:4s}@{j['key']:15s} want {want:22s} {r['verdict']} "
            f"({r['seconds']:.2f}s)")
        for p in r["problems"]:
            log("    " + p)
        if not r["ok"] and "report" in r:
            log("    candidate: " + r.get("path", "?"))
            log("    " + "\n    ".join(r["report"].splitlines()[-22:]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--msa", required=True, help="path to the msa binary")
    ap.add_argument("--workdir", required=True, help="directory for inputs, reference selections and candidates")
    ap.add_argument("--jobs", type=int, default=2, help="parallel workers (default 2)")
    ap.add_argument("--only", default="", help="regex: only the mutation kinds whose name matches")
    ap.add_argument("--seed-offset", type=int, default=0,
                    help="added to every case's seed: the same checks on other random inputs (default 0)")
    args = ap.parse_args()
    for case in CASES:
        case["seed"] += args.seed_offset
    os.makedirs(args.workdir, exist_ok=True)
    t_start = time.time()
    log = lambda s: print(s, flush=True)  # noqa: E731
    paths = prepare_cases(os.path.abspath(args.msa), os.path.abspath(args.workdir))
    log(f"made {len(CASES)} training cases and their reference selections in {time.time() - t_start:.1f}s")
    jobs = make_jobs(args, paths)
    with concurrent.futures.ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(run_job, jobs))
    log("\n== candidates: unmutated must PASS, planted bugs must FAIL on their lines at a changed row")
    report_results(log, results)
    base = [r for r in results if r["job"]["kind"] == "unmutated"]
    bugs = [r for r in results if r["job"]["kind"] != "unmutated" and r["job"]["expect"] != "pass"]
    controls = [r for r in results if r["job"]["kind"] != "unmutated" and r["job"]["expect"] == "pass"]
    kinds = lambda rs: list(dict.fromkeys(r["job"]["kind"] for r in rs))  # noqa: E731
    columns = ", ".join(f"{c['short']} = {c['key']}" for c in CASES)
    unmutated_ok, unmutated_n = table(log, "\n== unmutated training outputs: PASS / candidates (both dialects)", base,
                                      ["unmutated"])
    caught, planted = table(log, "\n== planted training bugs: caught / planted (kind x case)", bugs, kinds(bugs))
    controls_ok, controls_n = (table(log, "\n== controls: judged PASS / planted", controls, kinds(controls))
                               if controls else (0, 0))
    log(f"columns: {columns}")
    log(f"total time {time.time() - t_start:.1f}s")
    log(f"{caught} of {planted} planted training bugs caught ({len(kinds(bugs))} kinds); controls {controls_ok} of "
        f"{controls_n}; {unmutated_ok} of {unmutated_n} unmutated training outputs pass")
    everything = caught == planted and controls_ok == controls_n and unmutated_ok == unmutated_n
    return 0 if everything and planted > 0 else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""mo.check against `msa check` on the same files: an M3-shaped prefill (Hq=64, Hkv=4, D=Dv=Di=128, block 128,
top_k 16, bf16 inputs) whose candidate is the reference's own outputs stored as a bf16 kernel stores them (int32 ids,
bf16 out, fp32 lse). Both judge the same inputs and outputs with the same thread count; the ratio is the Python
package's cost over the tool's (target: at most 1.2). Writes bench/results/python_check_<date>.{json,md}.

Usage: bench/python_check_bench.py --msa build/tools/msa/msa --tokens 32768 [--repeats 1] [--workdir DIR]
(run with PYTHONPATH=build/python and the project's .venv python; the 32K case takes tens of minutes on 2 cores)"""
import argparse
import datetime
import json
import os
import pathlib
import subprocess
import sys
import time

import ml_dtypes
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
import msa_oracle as mo  # noqa: E402
from safetensors_io import write_safetensors  # noqa: E402  (numpy writer, independent of the package)

HQ, HKV, D = 64, 4, 128
CONFIG = mo.Config(block_size=128, top_k=16)


def make_case(tokens, seed):
    rng = np.random.default_rng(seed)

    def bf16(*shape):
        return rng.standard_normal(shape, dtype=np.float32).astype(ml_dtypes.bfloat16)

    cu = np.array([0, tokens], dtype=np.int32)
    return dict(q=bf16(tokens, HQ, D), k=bf16(tokens, HKV, D), v=bf16(tokens, HKV, D), index_q=bf16(tokens, HKV, D),
                index_k=bf16(tokens, 1, D), cu_seqlens_q=cu, cu_seqlens_k=cu.copy())


def storage(array):
    """(file dtype, storage array) of the numpy writer."""
    if array.dtype == ml_dtypes.bfloat16:
        return "BF16", array.view(np.uint16)
    return {np.dtype(np.float32): "F32", np.dtype(np.float64): "F64", np.dtype(np.int32): "I32"}[array.dtype], array


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--msa", required=True)
    parser.add_argument("--tokens", type=int, default=32768)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", default="/tmp/msa-python-check-bench")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    parser.add_argument("--python-only", action="store_true",
                        help="time mo.check alone (when one device call cannot hold both checks) and print its time")
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    threads = os.environ.get("OMP_NUM_THREADS") or str(os.cpu_count())

    inputs = make_case(args.tokens, args.seed)
    start = time.perf_counter()
    ref = mo.reference(**inputs, config=CONFIG)  # the fastest exact backend: the reference's bits
    candidate_seconds = time.perf_counter() - start
    print(f"candidate (mo.reference, backends {mo.backends()}): {candidate_seconds:.1f} s", flush=True)
    outputs = dict(topk_indices=ref.topk_indices, out=ref.out.astype(ml_dtypes.bfloat16),
                   lse=ref.lse.astype(np.float32))
    del ref  # the FP64 outputs (2 GB at 32K) are not needed while the two checks run
    inputs_path, outputs_path = os.path.join(args.workdir, "inputs.safetensors"), os.path.join(args.workdir,
                                                                                              "outputs.safetensors")
    write_safetensors(inputs_path, [(name, *storage(array)) for name, array in inputs.items()],
                      {"msa_config": CONFIG.to_json()})
    write_safetensors(outputs_path, [(name, *storage(array)) for name, array in outputs.items()], {})

    if args.python_only:
        start = time.perf_counter()
        verdict = mo.check(inputs=inputs, outputs=outputs, config=CONFIG)
        print(f"mo.check: {time.perf_counter() - start:.1f} s, passed {verdict.passed}", flush=True)
        print(verdict.report)
        return
    tool_seconds, python_seconds = [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        run = subprocess.run([args.msa, "check", "--inputs", inputs_path, "--outputs", outputs_path],
                             capture_output=True, text=True)
        tool_seconds.append(time.perf_counter() - start)
        print(f"msa check: {tool_seconds[-1]:.1f} s", flush=True)
        if run.returncode != 0:
            sys.exit(f"msa check failed ({run.returncode}):\n{run.stdout}{run.stderr}")
        start = time.perf_counter()
        verdict = mo.check(inputs=inputs, outputs=outputs, config=CONFIG)
        python_seconds.append(time.perf_counter() - start)
        print(f"mo.check: {python_seconds[-1]:.1f} s", flush=True)
    tool, python = min(tool_seconds), min(python_seconds)
    tool_report = run.stdout.split("\n", 1)[1]
    result = dict(tokens=args.tokens, shape=dict(hq=HQ, hkv=HKV, d=D, block_size=128, top_k=16, dtype="BF16"),
                  threads=int(threads), repeats=args.repeats, msa_check_seconds=tool_seconds,
                  mo_check_seconds=python_seconds, ratio=python / tool, candidate_seconds=candidate_seconds,
                  same_report=tool_report == verdict.report, passed=verdict.passed,
                  commit=subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                        text=True).stdout.strip(), date=datetime.date.today().isoformat())
    stem = os.path.join(args.out, f"python_check_{result['date']}_{args.tokens // 1024}k")
    with open(stem + ".json", "w") as f:
        json.dump(result, f, indent=1)
    table = (f"# mo.check against msa check, M3-shaped prefill of {args.tokens} tokens (bf16 inputs; candidate: "
             f"int32 ids, bf16 out, fp32 lse)\n\n"
             f"commit {result['commit']}, {threads} threads, best of {args.repeats}\n\n"
             f"| | seconds |\n|---|---|\n| `msa check` (files) | {tool:.2f} |\n| `mo.check` (arrays) | {python:.2f} |\n"
             f"| ratio mo / msa | {python / tool:.3f} (target <= 1.2) |\n\n"
             f"Same report text: {result['same_report']}; verdict: {'PASS' if verdict.passed else 'FAIL'}.\n")
    with open(stem + ".md", "w") as f:
        f.write(table)
    print(table)


if __name__ == "__main__":
    main()

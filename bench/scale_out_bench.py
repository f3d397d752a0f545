#!/usr/bin/env python3
"""Wall time of a golden suite generated in one run against the same suite as Ray tasks on a local cluster, on this
machine, and whether the MANIFEST.json files are byte-identical (they must be). Runs, in order:
  msa golden generate --suite S                      (the reference backend, every core's OpenMP threads)
  msa golden generate --suite S --backend simd       (when the SIMD backend is built)
  python -m msa_oracle.distributed golden --suite S --num-cpus N   (N shards of one CPU each, Ray start included)
Writes bench/results/scale_out_<date>_<suite>.{json,md}.

Usage: PYTHONPATH=build/python .venv/bin/python bench/scale_out_bench.py --msa build/tools/msa/msa [--suite full]"""
import argparse
import datetime
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def timed(command, **kwargs):
    start = time.perf_counter()
    run = subprocess.run(command, capture_output=True, text=True, **kwargs)
    seconds = time.perf_counter() - start
    if run.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({run.returncode}):\n{run.stdout}{run.stderr}")
    print(f"{seconds:8.2f} s  {' '.join(command)}", flush=True)
    return seconds, run.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--msa", required=True)
    parser.add_argument("--suite", default="full")
    parser.add_argument("--num-cpus", type=int, default=os.cpu_count())
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args()
    import msa_oracle as mo
    runs = []
    with tempfile.TemporaryDirectory() as work:
        work = pathlib.Path(work)
        whole = work / "reference"
        seconds, _ = timed([args.msa, "golden", "generate", "--suite", args.suite, "--dir", str(whole)])
        runs.append(dict(run="msa golden generate (reference backend)", seconds=seconds, same_manifest=True))
        manifest = (whole / "MANIFEST.json").read_bytes()
        if dict(mo.backends()).get("simd"):
            seconds, _ = timed([args.msa, "golden", "generate", "--suite", args.suite, "--dir", str(work / "simd"),
                                "--backend", "simd"])
            runs.append(dict(run="msa golden generate --backend simd", seconds=seconds,
                             same_manifest=(work / "simd" / "MANIFEST.json").read_bytes() == manifest))
        seconds, _ = timed([sys.executable, "-m", "msa_oracle.distributed", "golden", "--suite", args.suite, "--dir",
                            str(work / "ray"), "--num-cpus", str(args.num_cpus)])
        runs.append(dict(run=f"msa_oracle.distributed golden, {args.num_cpus} Ray workers (start included)",
                         seconds=seconds, same_manifest=(work / "ray" / "MANIFEST.json").read_bytes() == manifest))
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    result = dict(suite=args.suite, cases=len(mo.golden.case_names(args.suite)), cpus=os.cpu_count(),
                  num_cpus=args.num_cpus, commit=commit, date=datetime.date.today().isoformat(), runs=runs)
    stem = os.path.join(args.out, f"scale_out_{result['date']}_{args.suite}")
    with open(stem + ".json", "w") as f:
        json.dump(result, f, indent=1)
    base = runs[0]["seconds"]
    table = (f"# Golden suite `{args.suite}` ({result['cases']} cases): one run against Ray workers\n\n"
             f"commit {commit}, {os.cpu_count()} cores, one run each (wall seconds)\n\n"
             "| run | seconds | vs the reference run | MANIFEST.json identical |\n|---|---|---|---|\n" +
             "".join(f"| {r['run']} | {r['seconds']:.2f} | {base / r['seconds']:.2f}x | {r['same_manifest']} |\n"
                     for r in runs))
    with open(stem + ".md", "w") as f:
        f.write(table)
    print(table)


if __name__ == "__main__":
    main()

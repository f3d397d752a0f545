"""The wgmma kernels' machine code keeps its matrix instructions pipelined.

ptxas serializes a kernel's wgmma instructions when it cannot prove their accumulators untouched between issue and
wait (its infos C7514-C7520, printed only with -Xptxas -v): each wgmma instruction (HGMMA; QGMMA for fp8) then
closes its own group (its `gsb0` operand) and is waited for (WARPGROUP.DEPBAR) before the next is issued.
Pipelined, only the last HGMMA of a run carries gsb0. Nothing fails and the results are the same; the kernel is just
slower. This test reads the SASS of the CUDA backend's library with cuobjdump and fails when most of the HGMMA
instructions of a kernel (two or more) carry gsb0, unless the kernel is in SERIALIZED below. It also fails on a
SERIALIZED entry that is no longer serialized, so that the list is kept true.

No device is needed, only cuobjdump: the CUDA toolkit's, or the one Triton ships in the project's virtual
environment. Without one the test skips (exit 77).

Usage: python3 tests/wgmma_pipeline_test.py LIBRARY [--cuobjdump PATH]
"""
import argparse
import collections
import glob
import os
import re
import shutil
import subprocess
import sys

# Kernels known to be serialized, by a substring of their mangled name, with the reason.
SERIALIZED = {}
SKIP = 77


def find_cuobjdump(given):
    candidates = [given] if given else []
    candidates.append(shutil.which("cuobjdump"))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    candidates += glob.glob(os.path.join(root, ".venv/lib/python3*/site-packages/triton/backends/nvidia/bin/cuobjdump"))
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def wgmma_counts(sass):
    """{function: (wgmma instructions (HGMMA, QGMMA, ...), those that close their own group: gsb0)} of
    cuobjdump -sass."""
    counts = collections.defaultdict(lambda: [0, 0])
    function = None
    for line in sass.splitlines():
        named = re.match(r"\s*Function : (\S+)", line)
        if named:
            function = named.group(1)
            continue
        instruction = re.match(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([HQIB]GMMA[^;]*);", line)
        if function is not None and instruction:
            counts[function][0] += 1
            counts[function][1] += "gsb0" in instruction.group(1)
    return counts


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("library")
    p.add_argument("--cuobjdump")
    args = p.parse_args()
    tool = find_cuobjdump(args.cuobjdump)
    if tool is None:
        print("wgmma_pipeline_test: SKIPPED: no cuobjdump (CUDA toolkit or Triton in .venv)")
        return SKIP
    result = subprocess.run([tool, "-sass", "-arch", "sm_90a", args.library], capture_output=True, text=True)
    if result.returncode != 0:
        print(f"wgmma_pipeline_test: cuobjdump -sass -arch sm_90a {args.library} failed: {result.stderr.strip()}")
        return 1
    counts = wgmma_counts(result.stdout)
    if not counts:
        print(f"wgmma_pipeline_test: no wgmma instruction (HGMMA, QGMMA) in {args.library} (built without sm_90a?)")
        return 1
    failures, seen_serialized = [], set()
    for function, (total, closing) in sorted(counts.items()):
        serialized = total >= 2 and 2 * closing > total
        known = next((k for k in SERIALIZED if k in function), None)
        state = "serialized" if serialized else "pipelined"
        print(f"  {state:10s} {closing:3d} of {total:3d} wgmma close a group  {function[:110]}")
        if serialized and known:
            seen_serialized.add(known)
        elif serialized:
            failures.append(f"{function}: {closing} of {total} wgmma instructions each close their own group")
    for known, reason in SERIALIZED.items():
        if known not in seen_serialized:
            failures.append(f"SERIALIZED lists {known} ({reason}), but no such kernel is serialized now")
    kernels = len(counts)
    if failures:
        print(f"wgmma_pipeline_test: FAILED ({kernels} kernels with wgmma)\n  " + "\n  ".join(failures))
        return 1
    listed = ", ".join(sorted(seen_serialized)) or "none"
    print(f"wgmma_pipeline_test: passed: {kernels} kernels with wgmma, serialized only as listed: {listed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

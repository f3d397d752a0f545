#!/usr/bin/env python3
"""Fails when a C++ or CUDA source of the tree differs from what clang-format makes of it (.clang-format at the
root: Google, 120 columns). Prints each file that would change; `--fix` rewrites them.

  tests/format_check.py [--clang-format PATH] [--fix] [--root DIR]
"""
import argparse
import pathlib
import subprocess
import sys

FOLDERS = ["include", "core", "reference", "simd", "gpu", "io", "oracle", "tools", "fuzz", "bench", "tests", "docs", "python"]
SUFFIXES = {".cc", ".h", ".cu", ".cuh"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clang-format", default="clang-format-14")
    parser.add_argument("--fix", action="store_true")
    parser.add_argument("--root", default=pathlib.Path(__file__).resolve().parent.parent, type=pathlib.Path)
    options = parser.parse_args()
    files = sorted(p for folder in FOLDERS for p in (options.root / folder).rglob("*")
                   if p.suffix in SUFFIXES and p.is_file() and "golden" not in p.relative_to(options.root).parts)
    changed = []
    for path in files:
        formatted = subprocess.run([options.clang_format, f"--style=file:{options.root / '.clang-format'}", str(path)],
                                   check=True, capture_output=True).stdout
        if formatted != path.read_bytes():
            changed.append(path.relative_to(options.root))
            if options.fix:
                path.write_bytes(formatted)
    for path in changed:
        print(f"format_check: {path} {'rewritten' if options.fix else 'is not clang-formatted'}")
    print(f"format_check: {len(files)} files checked, {len(changed)} {'rewritten' if options.fix else 'to format'}")
    return 0 if options.fix or not changed else 1


if __name__ == "__main__":
    sys.exit(main())

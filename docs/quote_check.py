#!/usr/bin/env python3
"""Keeps the code in docs/*.md identical to the code that compiles and runs, so the docs cannot drift.

Two markers, each on the line right before a fenced code block:

  <!-- quote: path/from/repo/root#tag -->   the block equals the region of that file between the lines holding
                                            `docs:begin tag` and `docs:end tag` (marker lines excluded, common
                                            indentation removed); mark regions with `// docs:begin tag` in C++
                                            or `# docs:begin tag` in Python and CMake.
  <!-- run: PROGRAM ARGS -->                the block equals what `PROGRAM ARGS` prints on stdout (run in a scratch
                                            directory, exit code 0 or 1); checked when --program PROGRAM=PATH
                                            (or --msa PATH for msa) names the binary, skipped otherwise.

  docs/quote_check.py [--msa PATH] [--program NAME=PATH ...] [--fix] [--root DIR] [FILE.md ...]
  (default: every docs/*.md)

Exit 0 when every block matches, 1 when one differs (each listed as file:line), 2 on a broken marker.
--fix rewrites the differing blocks in place instead.
"""
import argparse
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile
import textwrap

ROOT = pathlib.Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^<!-- (quote|run): (.+?) -->\s*$")
FENCE = re.compile(r"^(```+|~~~+)")


class BrokenMarker(Exception):
    pass


def region(root, path, tag):
    """The lines between `docs:begin tag` and `docs:end tag` in `path`, dedented."""
    file = root / path
    if not file.is_file():
        raise BrokenMarker(f"quoted file {path} does not exist")
    lines = file.read_text().splitlines()
    begins = [i for i, line in enumerate(lines) if re.search(rf"docs:begin {re.escape(tag)}\s*$", line)]
    ends = [i for i, line in enumerate(lines) if re.search(rf"docs:end {re.escape(tag)}\s*$", line)]
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        raise BrokenMarker(f"{path} must hold exactly one `docs:begin {tag}` followed by one `docs:end {tag}` "
                           f"(found {len(begins)} begin, {len(ends)} end)")
    return textwrap.dedent("\n".join(lines[begins[0] + 1:ends[0]])).splitlines()


def run_output(program, arguments):
    """What `program ARGS` prints, trailing spaces stripped, run in a scratch directory. A Python program runs under
    this interpreter (the project's environment, not whichever python3 comes first on PATH); one that dies of an
    exception (a traceback, exit 1) is broken, not a FAIL verdict."""
    command = [sys.executable, program] if str(program).endswith(".py") else [program]
    with tempfile.TemporaryDirectory() as scratch:
        try:
            result = subprocess.run([*command, *arguments], cwd=scratch, capture_output=True, text=True, timeout=300)
        except OSError as error:
            raise BrokenMarker(f"cannot run {program}: {error}")
    if result.returncode not in (0, 1) or "Traceback (most recent call last)" in result.stderr:
        raise BrokenMarker(f"`{' '.join(arguments)}` exited {result.returncode}: {result.stderr.strip()}")
    return [line.rstrip() for line in result.stdout.splitlines()]


def check_file(root, md, programs, fix):
    """Returns (differences, new text)."""
    lines = md.read_text().splitlines()
    differences, output, i = [], [], 0
    while i < len(lines):
        output.append(lines[i])
        marker = MARKER.match(lines[i])
        if not marker:
            i += 1
            continue
        kind, argument = marker.groups()
        where = f"{md.relative_to(root)}:{i + 1}"
        fence = FENCE.match(lines[i + 1]) if i + 1 < len(lines) else None
        if not fence:
            raise BrokenMarker(f"{where}: the `{kind}` marker must be followed directly by a fenced code block")
        close = next((j for j in range(i + 2, len(lines)) if lines[j].strip() == fence.group(1)), None)
        if close is None:
            raise BrokenMarker(f"{where}: the code block is never closed")
        block = lines[i + 2:close]
        if kind == "quote":
            if "#" not in argument:
                raise BrokenMarker(f"{where}: write the quote as path#tag")
            path, tag = argument.rsplit("#", 1)
            wanted = region(root, path, tag)
        else:
            name, *arguments = shlex.split(argument)
            # `run` blocks are checked only when the program's binary is given.
            wanted = run_output(programs[name], arguments) if name in programs else block
        if block != wanted:
            differences.append(f"{where}: the block under `{kind}: {argument}` differs from its source")
        output.extend([lines[i + 1], *(wanted if fix else block), lines[close]])
        i = close + 1
    return differences, "\n".join(output) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", type=pathlib.Path)
    parser.add_argument("--msa", help="the msa binary, to check `run: msa ...` blocks")
    parser.add_argument("--program", action="append", default=[], metavar="NAME=PATH",
                        help="a binary for `run: NAME ...` blocks")
    parser.add_argument("--fix", action="store_true", help="rewrite differing blocks in place")
    parser.add_argument("--root", type=pathlib.Path, default=ROOT, help="the repository root (default: this one)")
    options = parser.parse_args()
    root = options.root.resolve()
    files = [f.resolve() for f in options.files] or sorted((root / "docs").glob("*.md"))
    programs = {name: str(pathlib.Path(path).resolve())
                for name, path in (program.split("=", 1) for program in options.program)}
    if options.msa:
        programs["msa"] = str(pathlib.Path(options.msa).resolve())
    differences = []
    try:
        for md in files:
            found, text = check_file(root, md, programs, options.fix)
            differences += found
            if options.fix and found:
                md.write_text(text)
    except BrokenMarker as error:
        print(f"quote_check: {error}", file=sys.stderr)
        return 2
    for difference in differences:
        print(("fixed " if options.fix else "") + difference, file=sys.stderr)
    if differences and not options.fix:
        print(f"quote_check: {len(differences)} block(s) differ; run docs/quote_check.py --fix with the same "
              "--msa / --program options", file=sys.stderr)
        return 1
    print(f"quote_check: {len(files)} page(s) checked; run blocks of " + (", ".join(sorted(programs)) or "no program"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

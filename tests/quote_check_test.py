#!/usr/bin/env python3
"""docs/quote_check.py on a scratch repository: a matching quote passes, a drifted one fails with its line,
--fix rewrites it, a run block is compared with the program's output, broken markers exit 2."""
import pathlib
import subprocess
import sys
import tempfile

CHECKER = pathlib.Path(__file__).resolve().parent.parent / "docs" / "quote_check.py"

SOURCE = """int Unrelated();
  // docs:begin add
  int Add(int a, int b) {
    return a + b;
  }
  // docs:end add
"""
PAGE = """# Title
<!-- quote: src/add.cc#add -->
```cpp
{body}
```
text after
"""


def check(root, *args):
    result = subprocess.run([sys.executable, str(CHECKER), "--root", str(root), *args], capture_output=True, text=True)
    return result.returncode, result.stderr


def main():
    with tempfile.TemporaryDirectory() as scratch:
        root = pathlib.Path(scratch)
        (root / "src").mkdir()
        (root / "docs").mkdir()
        (root / "src" / "add.cc").write_text(SOURCE)
        page = root / "docs" / "page.md"
        good = "int Add(int a, int b) {\n  return a + b;\n}"  # dedented by two spaces
        page.write_text(PAGE.format(body=good))
        assert check(root) == (0, ""), check(root)

        page.write_text(PAGE.format(body=good.replace("a + b", "b + a")))
        code, errors = check(root)
        assert code == 1 and "docs/page.md:2:" in errors, (code, errors)
        assert check(root, "--fix")[0] == 0
        assert page.read_text() == PAGE.format(body=good), page.read_text()

        # A run block: compared with what the program prints (a shell script standing in for msa).
        program = root / "fake_msa"
        program.write_text("#!/bin/sh\necho \"args: $*\"\n")
        program.chmod(0o755)
        page.write_text("<!-- run: msa explain --keys 3 -->\n```\nargs: explain --keys 3\n```\n")
        assert check(root, "--msa", str(program))[0] == 0
        page.write_text("<!-- run: msa explain --keys 3 -->\n```\nargs: explain --keys 4\n```\n")
        assert check(root, "--msa", str(program))[0] == 1

        for broken in ("<!-- quote: src/add.cc#missing -->\n```\n```\n",  # no such tag
                       "<!-- quote: src/none.cc#add -->\n```\n```\n",     # no such file
                       "<!-- quote: src/add.cc#add -->\n\n```\n```\n",    # not directly followed by a block
                       "<!-- quote: src/add.cc#add -->\n```\nnever closed\n"):
            page.write_text(broken)
            code, errors = check(root)
            assert code == 2 and errors.startswith("quote_check: "), (broken, code, errors)
    print("quote_check: all cases behave")
    return 0


if __name__ == "__main__":
    sys.exit(main())

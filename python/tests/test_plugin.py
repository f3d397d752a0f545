"""The pytest plugin, found through its pytest11 entry point (the package's dist-info), run in a pytester
subprocess: --msa-suite and --msa-case choose the msa_case fixture's cases, and a failed check shows its report."""
import pytest

import msa_oracle as mo

pytest_plugins = ["pytester"]

A_KERNEL_TEST = """
import numpy as np
import msa_oracle as mo

def test_reference_outputs_pass(msa_case):
    expected = msa_case.expected()
    mo.check(inputs=msa_case.inputs(), outputs=dict(out=expected["out"].astype(np.float32)),
             config=msa_case.config)

def test_a_planted_bug_fails(msa_case):
    out = msa_case.expected()["out"].astype(np.float32)
    out[0, 0, 0] += 1.0
    mo.check(inputs=msa_case.inputs(), outputs=dict(out=out), config=msa_case.config)
"""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MSA_ORACLE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_one_case_of_the_suite(pytester, cache):
    name = mo.golden.case_names("smoke")[1]
    pytester.makepyfile(test_kernel=A_KERNEL_TEST)
    result = pytester.runpytest_subprocess("--msa-suite", "smoke", "--msa-case", name, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*OracleMismatch: msa_oracle.check: FAIL against the FP64 reference*",
                                 "*worst: seq 0 query 0 (row 0) head 0 dim 0*", "*reproduce: * check --inputs *"])
    assert (cache / mo.__version__ / "smoke" / "MANIFEST.json").exists()


def test_every_case_of_the_suite(pytester, cache):
    pytester.makepyfile(test_kernel=A_KERNEL_TEST.split("def test_a_planted_bug_fails")[0])
    result = pytester.runpytest_subprocess("--msa-suite", "smoke", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=len(mo.golden.case_names("smoke")))


def test_an_unknown_case_is_a_usage_error(pytester, cache):
    pytester.makepyfile(test_kernel=A_KERNEL_TEST)
    result = pytester.runpytest_subprocess("--msa-case", "no_such_case", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--msa-case no_such_case: not a case of suite smoke*"])

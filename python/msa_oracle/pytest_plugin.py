"""The pytest plugin (entry point pytest11 "msa_oracle"): `pytest --msa-suite smoke|full|dialects|training
[--msa-case NAME]`
parametrizes every test that takes the `msa_case` fixture over that golden suite's cases (a msa_oracle.golden.Case
each), generating the suite on first use into the cache (msa_oracle.golden.cached). A failed mo.check shows its
report, and the command that reproduces it, in pytest's output."""
import pytest

from . import _core, golden


def pytest_addoption(parser):
    group = parser.getgroup("msa_oracle", "MSA golden cases (msa_oracle)")
    group.addoption("--msa-suite", default="smoke", choices=_core.golden_suites,
                    help="the golden suite the msa_case fixture iterates (default: smoke)")
    group.addoption("--msa-case", default=None, metavar="NAME", help="only this case of the suite")


def _chosen_cases(config):
    wanted = config.getoption("msa_case")
    return golden.case_names(config.getoption("msa_suite")) if wanted is None else [wanted]


def pytest_configure(config):
    suite, wanted = config.getoption("msa_suite"), config.getoption("msa_case")
    if wanted is not None and wanted not in golden.case_names(suite):
        raise pytest.UsageError(f"--msa-case {wanted}: not a case of suite {suite} (see msa_oracle.golden.case_names)")


def pytest_generate_tests(metafunc):
    if "msa_case" in metafunc.fixturenames:
        names = _chosen_cases(metafunc.config)
        metafunc.parametrize("msa_case", names, indirect=True, ids=names)


@pytest.fixture(scope="session")
def msa_golden_cases(request):
    """{name: Case} of the suite chosen with --msa-suite, generated into the cache on first use."""
    suite = request.config.getoption("msa_suite")
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")

    def progress(index, count, name, seconds):
        if reporter is not None:
            reporter.write_line(f"msa_oracle: generated [{index + 1}/{count}] {name} ({seconds:.2f} s)")

    return {case.name: case for case in golden.load(golden.cached(suite, progress=progress))}


@pytest.fixture
def msa_case(request, msa_golden_cases):
    """One golden case of the chosen suite (msa_oracle.golden.Case): .name, .config, .inputs(like=...),
    .expected(like=...)."""
    return msa_golden_cases[request.param]

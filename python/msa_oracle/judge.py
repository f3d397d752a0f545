"""mo.check: judge an implementation's outputs against the FP64 reference, as `msa check` does, in a test.

The inputs and outputs become the two files `msa check` would read, judged by the same code; a failed check dumps
them and names the `msa check` command that gives the same verdict from them."""
import json
import os
import shlex
import shutil
import sysconfig
import tempfile
import uuid

from . import _arrays, _core
from .config import Config


class OracleMismatch(AssertionError):
    """A check failed: the message is the judge's report and a "reproduce:" line; `verdict` holds the rest."""

    def __init__(self, verdict):
        super().__init__(verdict.message())
        self.verdict = verdict


class Verdict:
    """The judge's verdict: `passed`, the text `report`, `to_json()`; after a failure `dumped` names the files that
    reproduce it and `reproduce` the command."""

    def __init__(self, passed, report, json_text, dumped, reproduce):
        self.passed = passed
        self.report = report
        self._json = json_text
        self.dumped = dumped
        self.reproduce = reproduce

    def __bool__(self):
        return self.passed

    def to_json(self) -> str:
        """The report as JSON (what `msa check --json` writes)."""
        return self._json

    def as_dict(self) -> dict:
        return json.loads(self._json)

    def message(self) -> str:
        header = "msa_oracle.check: " + ("PASS" if self.passed else "FAIL") + " against the FP64 reference\n"
        tail = f"reproduce: {self.reproduce}\n" if self.reproduce else ""
        return header + self.report + tail


def msa_tool() -> str:
    """The `msa` command: the one installed beside this Python (a wheel's), else on PATH, else the build's own."""
    found = shutil.which("msa", path=os.pathsep.join([sysconfig.get_path("scripts"), os.environ.get("PATH", "")]))
    if found:
        return found
    return _core.build_tool if _core.build_tool and os.path.exists(_core.build_tool) else "msa"


def _reproduce(dumped, precision, tau):
    inputs, outputs = dumped
    words = [msa_tool(), "check", "--inputs", inputs, "--outputs", outputs]
    if precision is not None:
        words += ["--precision", precision]
    if tau is not None:
        words += ["--tau", repr(float(tau))]
    return shlex.join(words)


def check(*, inputs, outputs, config=None, order="strict", topk_layout="head_major", lse_base="e",
          score_precision=None, precision=None, tau=None, raise_on_fail=True, dump_dir=None) -> Verdict:
    """Judges `outputs` (any subset of topk_indices, out, lse, index_lse, in any dtype: each float output is judged
    at its own) on `inputs` (q, k, v, index_q, index_k, cu_seqlens_q, cu_seqlens_k), by the rules of SPEC section 5.

    order, topk_layout, lse_base, score_precision: the candidate's dialect (as `msa check`'s flags of the same
    names); precision: judge every float output at it instead; tau: the selection tolerance. A failed check writes
    inputs.safetensors and outputs.safetensors to dump_dir (default: a new directory under the system's temporary
    one, or $MSA_ORACLE_DUMP_DIR) and raises OracleMismatch unless raise_on_fail is False. Bad input (a missing
    tensor, a wrong shape or dtype) is a ValueError."""
    if config is None:
        config = Config()
    if not isinstance(config, Config):
        raise ValueError(f"config: expected a msa_oracle.Config, got {type(config).__name__}")
    for name, value in (("inputs", inputs), ("outputs", outputs)):
        if not isinstance(value, dict):
            raise ValueError(f"{name}: expected a dict of arrays, got {type(value).__name__}")
    # A rule at its default is not passed on, so that the report says where the rule came from: the default.
    rules = dict(order=(order, "strict"), topk_layout=(topk_layout, "head_major"), lse_base=(lse_base, "e"),
                 score_precision=(score_precision, None), precision=(precision, None))
    rules = {name: str(value) for name, (value, default) in rules.items() if value != default}
    if dump_dir is None:
        base = os.environ.get("MSA_ORACLE_DUMP_DIR") or tempfile.gettempdir()
        dump_dir = os.path.join(base, "msa-check-" + uuid.uuid4().hex[:12])
    result = _core.check(config.to_json(),
                         {name: _arrays.on_host(value, name) for name, value in inputs.items()},
                         {name: _arrays.on_host(value, name) for name, value in outputs.items()},
                         rules, None if tau is None else float(tau), os.fspath(dump_dir))
    dumped = result["dumped"]
    verdict = Verdict(result["passed"], result["report"], result["json"], dumped,
                      _reproduce(dumped, precision, tau) if dumped else None)
    if not verdict.passed and raise_on_fail:
        raise OracleMismatch(verdict)
    return verdict

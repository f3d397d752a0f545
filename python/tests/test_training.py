"""Training through the package (SPEC section 8): mo.training gives the tool's training bits on the training goldens,
and mo.check judges gradients, naming the key row of a bad dk."""
import subprocess

import numpy as np
import pytest

import msa_oracle as mo
from conftest import msa_tool


@pytest.fixture(scope="module")
def training_goldens(tmp_path_factory):
    directory = tmp_path_factory.mktemp("golden") / "training"
    subprocess.run([msa_tool(), "golden", "generate", "--suite", "training", "--dir", str(directory)], check=True,
                   capture_output=True)
    return mo.golden.load(directory)


def test_training_gives_the_golden_bits(training_goldens):
    for case in training_goldens:
        inputs, expected = case.inputs(), case.expected()
        assert "dout" in inputs and {"dq", "dk", "dv", "dqi", "dki", "kl_loss"} <= set(expected)
        got = mo.training(inputs["q"], inputs["k"], inputs["v"], inputs["index_q"], inputs["index_k"],
                          expected["topk_indices"], inputs["cu_seqlens_q"], inputs["cu_seqlens_k"], inputs["dout"],
                          inputs.get("dlse"), config=case.config)
        for name in ("dq", "dk", "dv", "dqi", "dki", "kl_loss"):
            assert np.array_equal(getattr(got, name), expected[name]), (case.name, name)
        assert np.array_equal(got.teacher_lse, expected["lse"])


def test_check_judges_gradients_and_names_the_key_row(training_goldens):
    case = next(c for c in training_goldens if c.name.startswith("train_chunked"))
    inputs, expected = case.inputs(), case.expected()
    outputs = {name: expected[name].astype(np.float32) for name in ("dq", "dk", "dv", "dqi", "dki", "kl_loss")}
    assert mo.check(inputs=inputs, outputs=outputs, config=case.config).passed
    outputs["dk"] = outputs["dk"].copy()
    outputs["dk"][75, 0, 3] *= 1.5  # sequence 1 starts at key row 70: key 5 there
    with pytest.raises(mo.OracleMismatch, match=r"dk +FAIL[^\n]*\n +worst: seq 1 key 5 \(key row 75\) head 0 dim 3"):
        mo.check(inputs=inputs, outputs=outputs, config=case.config)


def test_gradients_need_dout(training_goldens):
    case = training_goldens[0]
    inputs = {name: array for name, array in case.inputs().items() if name not in ("dout", "dlse")}
    with pytest.raises(ValueError, match="training outputs .* are judged only on inputs with dout"):
        mo.check(inputs=inputs, outputs=dict(dq=case.expected()["dq"]), config=case.config)

"""mo.check: the verdict, the exception, the report, the files it dumps and the msa check command that gives the
same verdict from them; dialects declared by keyword."""
import json
import math
import os
import subprocess

import numpy as np
import pytest

import msa_oracle as mo
from conftest import CONFIG, msa_tool, to_torch


def test_reference_outputs_pass_at_every_dtype(inputs):
    ref = mo.reference(**inputs, config=CONFIG)
    for dtype in (np.float64, np.float32, np.float16):
        verdict = mo.check(inputs=inputs, outputs=dict(topk_indices=ref.topk_indices, out=ref.out.astype(dtype),
                                                        lse=ref.lse.astype(dtype), index_lse=ref.index_lse),
                           config=CONFIG)
        assert verdict.passed and verdict and verdict.dumped is None and verdict.reproduce is None
        assert "RESULT: PASS" in verdict.report


def test_a_wrong_output_raises_an_assertion_error_naming_the_row(inputs):
    ref = mo.reference(**inputs, config=CONFIG)
    out = ref.out.astype(np.float32)
    out[7, 2, 5] += 1e-3  # sequence 1 (rows 5..13), query 2
    with pytest.raises(AssertionError) as caught:
        mo.check(inputs=inputs, outputs=dict(out=out), config=CONFIG)
    assert isinstance(caught.value, mo.OracleMismatch)
    message = str(caught.value)
    assert message.startswith("msa_oracle.check: FAIL")
    assert "worst: seq 1 query 2 (row 7) head 2 dim 5" in message
    assert "RESULT: FAIL" in message and "\nreproduce: " in message
    assert caught.value.verdict.as_dict()["passed"] is False


def test_the_reproduce_line_gives_the_same_verdict_from_the_dumped_files(inputs, tmp_path):
    ref = mo.reference(**inputs, config=CONFIG)
    ids = ref.topk_indices.copy()
    ids[1, 10, 0], ids[1, 10, 1] = ids[1, 10, 1], ids[1, 10, 0]  # the local block no longer last: an order fault
    verdict = mo.check(inputs=inputs, outputs=dict(topk_indices=ids, lse=ref.lse.astype(np.float32)), config=CONFIG,
                       precision="fp32", tau=0.0, raise_on_fail=False, dump_dir=tmp_path / "dump")
    assert not verdict.passed
    assert verdict.dumped == (str(tmp_path / "dump" / "inputs.safetensors"),
                              str(tmp_path / "dump" / "outputs.safetensors"))
    assert verdict.reproduce.endswith("--precision fp32 --tau 0.0")
    run = subprocess.run(verdict.reproduce, shell=True, capture_output=True, text=True)
    assert run.returncode == 1, run.stderr
    assert "  order      FAIL  1 of 30 rows" in run.stdout
    cli_report = run.stdout.split("\n", 1)[1]  # after the line naming the files
    for flag, keyword in (("--order any", "order=any"), ("(--precision)", "(precision=)"), ("(--tau)", "(tau=)")):
        cli_report = cli_report.replace(flag, keyword)
    assert cli_report == verdict.report  # the same report, but for how the settings are spelled


def test_dialect_keywords(inputs):
    """vLLM's order (local block first) fails strict as an order fault and passes with order="any"; a
    query-major selection and a log2 lse pass when declared."""
    ref = mo.reference(**inputs, config=CONFIG)
    vllm = np.full_like(ref.topk_indices, -1)
    for r, t in np.ndindex(ref.topk_indices.shape[:2]):
        row = ref.topk_indices[r, t]
        valid = list(row[row >= 0])
        vllm[r, t, :len(valid)] = [valid[-1]] + valid[:-1]
    strict = mo.check(inputs=inputs, outputs=dict(topk_indices=vllm), config=CONFIG, raise_on_fail=False)
    assert not strict.passed and "  order      FAIL" in strict.report and "judge with order=any" in strict.report
    assert mo.check(inputs=inputs, outputs=dict(topk_indices=vllm), config=CONFIG, order="any").passed
    query_major = np.ascontiguousarray(ref.topk_indices.transpose(1, 0, 2))
    assert mo.check(inputs=inputs, outputs=dict(topk_indices=query_major), config=CONFIG,
                    topk_layout="query_major").passed
    log2 = (ref.lse / math.log(2)).astype(np.float32)
    assert mo.check(inputs=inputs, outputs=dict(lse=log2), config=CONFIG, lse_base="2").passed
    assert not mo.check(inputs=inputs, outputs=dict(lse=log2), config=CONFIG, raise_on_fail=False).passed


def test_declared_bf16_scores_widen_tau(inputs):
    ref = mo.reference(**inputs, config=CONFIG)
    default = json.loads(mo.check(inputs=inputs, outputs=dict(topk_indices=ref.topk_indices), config=CONFIG)
                         .to_json())
    bf16 = json.loads(mo.check(inputs=inputs, outputs=dict(topk_indices=ref.topk_indices), config=CONFIG,
                               score_precision="bf16").to_json())
    assert bf16["selection"]["tau"] > 10 * default["selection"]["tau"] > 0


def test_torch_inputs_and_outputs(inputs):
    torch = pytest.importorskip("torch")
    tensors = to_torch(inputs)
    ref = mo.reference(**tensors, config=CONFIG)
    out = ref.out.to(torch.bfloat16)
    assert mo.check(inputs=tensors, outputs=dict(out=out, topk_indices=ref.topk_indices), config=CONFIG).passed
    bad = out.clone()
    bad[0, 0, 0] += 0.25
    with pytest.raises(mo.OracleMismatch, match=r"worst: seq 0 query 0 \(row 0\) head 0 dim 0"):
        mo.check(inputs=tensors, outputs=dict(out=bad), config=CONFIG)


def test_the_dump_directory_comes_from_the_environment(inputs, tmp_path, monkeypatch):
    monkeypatch.setenv("MSA_ORACLE_DUMP_DIR", str(tmp_path))
    ref = mo.reference(**inputs, config=CONFIG)
    verdict = mo.check(inputs=inputs, outputs=dict(lse=ref.lse + 1.0), config=CONFIG, raise_on_fail=False)
    assert os.path.dirname(os.path.dirname(verdict.dumped[0])) == str(tmp_path)
    assert msa_tool() in verdict.reproduce

"""mo.golden: generate, load (every SHA-256 checked), a case's inputs and expected outputs; and the reference
through Python gives the bits of the msa tool (the same SHA-256) on every canonical case."""
import hashlib
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import msa_oracle as mo
from conftest import msa_tool


@pytest.fixture(scope="module")
def smoke_by_the_tool(tmp_path_factory):
    """The smoke suite as `msa golden generate` writes it."""
    directory = tmp_path_factory.mktemp("golden") / "smoke"
    subprocess.run([msa_tool(), "golden", "generate", "--suite", "smoke", "--dir", str(directory)], check=True,
                   capture_output=True)
    return directory


def outputs_sha256(ref):
    """SHA-256 over topk_indices, block_scores, index_lse, out, lse (the file contract's outputs_sha256)."""
    digest = hashlib.sha256()
    for name in ("topk_indices", "block_scores", "index_lse", "out", "lse"):
        digest.update(np.ascontiguousarray(getattr(ref, name)).tobytes())
    return digest.hexdigest()


def test_the_reference_through_python_gives_the_tools_bits(smoke_by_the_tool):
    cases = mo.golden.load(smoke_by_the_tool)
    assert len(cases) == len(mo.golden.case_names("smoke")) > 10
    backends = [name for name, available in mo.backends() if available]
    for case in cases:
        _, metadata = mo.golden._read(os.path.join(case.directory, "outputs.safetensors"))
        for backend in backends:
            ref = mo.reference(**case.inputs(), config=case.config, backend=backend)
            assert outputs_sha256(ref) == metadata["outputs_sha256"], (case.name, backend)


def test_python_generates_the_tools_files(smoke_by_the_tool, tmp_path):
    names = mo.golden.case_names("smoke")[:3]
    seen = []
    mo.golden.generate(tmp_path / "g", "smoke", names=names, progress=lambda i, n, name, s: seen.append((i, n, name)))
    assert seen == [(i, 3, name) for i, name in enumerate(names)]
    for name in names:
        for file_name in ("inputs.safetensors", "outputs.safetensors"):
            assert (tmp_path / "g" / name / file_name).read_bytes() == \
                (smoke_by_the_tool / name / file_name).read_bytes()


def test_case_inputs_and_expected_outputs(smoke_by_the_tool):
    case = mo.golden.load(smoke_by_the_tool)[0]
    inputs, expected = case.inputs(), case.expected()
    assert set(inputs) == {"q", "k", "v", "index_q", "index_k", "cu_seqlens_q", "cu_seqlens_k"}
    assert inputs["cu_seqlens_q"].dtype == np.int32
    assert expected["out"].shape == (inputs["q"].shape[0], inputs["q"].shape[1], inputs["v"].shape[2])
    verdict = mo.check(inputs=inputs, outputs={name: expected[name] for name in ("topk_indices", "out", "lse")},
                       config=case.config)
    assert verdict.passed


def test_case_inputs_like_a_torch_tensor_keep_their_dtype(smoke_by_the_tool):
    torch = pytest.importorskip("torch")
    bf16_case = next(case for case in mo.golden.load(smoke_by_the_tool) if case.dtype == "BF16")
    inputs = bf16_case.inputs(like=torch.empty(0))
    assert inputs["q"].dtype == torch.bfloat16 and inputs["cu_seqlens_q"].dtype == torch.int32
    expected = bf16_case.expected(like=torch.empty(0))
    assert expected["out"].dtype == torch.float64


def test_a_corrupted_or_missing_file_is_refused(smoke_by_the_tool, tmp_path):
    copy = tmp_path / "smoke"
    shutil.copytree(smoke_by_the_tool, copy)
    name = json.loads((copy / "MANIFEST.json").read_text())["cases"][2]["name"]
    target = copy / name / "outputs.safetensors"
    data = bytearray(target.read_bytes())
    data[-1] ^= 1
    target.write_bytes(bytes(data))
    with pytest.raises(mo.golden.GoldenError, match=f"{name}/outputs.safetensors: SHA-256 .* but MANIFEST.json "
                                                    "records .*: the file changed"):
        mo.golden.load(copy)
    target.unlink()
    with pytest.raises(mo.golden.GoldenError, match="outputs.safetensors: missing"):
        mo.golden.load(copy)
    (copy / "MANIFEST.json").write_text("{not json")
    with pytest.raises(mo.golden.GoldenError, match="cannot read the manifest"):
        mo.golden.load(copy)


def test_the_cache_is_generated_once_per_version(tmp_path, monkeypatch):
    monkeypatch.setenv("MSA_ORACLE_CACHE", str(tmp_path))
    calls = []
    directory = mo.golden.cached("smoke", progress=lambda *args: calls.append(args))
    assert directory == str(tmp_path / mo.__version__ / "smoke") and len(calls) == len(mo.golden.case_names())
    assert mo.golden.cached("smoke", progress=lambda *args: calls.append(args)) == directory
    assert len(calls) == len(mo.golden.case_names())  # the second call found it


def test_an_unknown_suite():
    known = r"smoke, full, dialects, training, long"
    with pytest.raises(ValueError, match=rf'^suite="huge": unknown suite \(known: {known}\)'):
        mo.golden.case_names("huge")

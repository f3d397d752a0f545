"""CUDA tensors: with the gpu backend, exact mode reads them on the device (no input copied from the host) and gives
the reference's bits; without it they are copied to the host. The device tests run where torch sees a CUDA device
and the module has the gpu backend, and are skipped elsewhere (CI has no GPU)."""
import numpy as np
import pytest

import msa_oracle as mo
from msa_oracle import _core
from conftest import CONFIG, make_inputs, to_torch

torch = pytest.importorskip("torch")
ON_DEVICE = torch.cuda.is_available() and dict(mo.backends()).get("gpu", False)
needs_device = pytest.mark.skipif(not ON_DEVICE, reason="needs a CUDA device and the gpu backend")


@needs_device
@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16"])
def test_exact_mode_reads_cuda_tensors_in_place_and_gives_the_reference_bits(dtype):
    host = to_torch(make_inputs(seed=11), dtype=getattr(torch, dtype))
    device = {name: tensor.cuda() for name, tensor in host.items()}
    on_device = mo.reference(**device, config=CONFIG)
    assert on_device.backend == "gpu" and on_device.out.is_cuda
    assert _core.gpu_last_input_upload_bytes() == 0  # attend read q, k, v on the device
    on_host = mo.reference(**host, config=CONFIG, backend="reference")
    for name in ("topk_indices", "block_scores", "index_lse", "out", "lse"):
        assert torch.equal(getattr(on_device, name).cpu(), getattr(on_host, name)), name
    sel = mo.select(device["index_q"], device["index_k"], device["cu_seqlens_q"], device["cu_seqlens_k"], config=CONFIG)
    assert sel.backend == "gpu" and _core.gpu_last_input_upload_bytes() == 0
    mo.select(host["index_q"], host["index_k"], host["cu_seqlens_q"], host["cu_seqlens_k"], config=CONFIG,
              backend="gpu")
    assert _core.gpu_last_input_upload_bytes() > 0  # the control: host inputs are copied over


@needs_device
def test_strided_cuda_tensors_are_packed_on_the_device():
    host = to_torch(make_inputs(seed=12))
    device = {name: tensor.cuda() for name, tensor in host.items()}
    wide = torch.zeros(device["q"].shape[0], 2 * device["q"].shape[1], device["q"].shape[2], dtype=torch.float64,
                       device="cuda")
    wide[:, ::2] = device["q"]
    strided = dict(device, q=wide[:, ::2])
    got = mo.reference(**strided, config=CONFIG)
    assert _core.gpu_last_input_upload_bytes() == 0
    assert torch.equal(got.out.cpu(), mo.reference(**host, config=CONFIG, backend="reference").out)


@needs_device
def test_a_non_finite_cuda_input_is_named():
    device = {name: tensor.cuda() for name, tensor in to_torch(make_inputs(seed=13)).items()}
    device["k"][4, 1, 2] = float("inf")
    with pytest.raises(ValueError, match=r"^k\[4, 1, 2\] = inf: inputs must be finite"):
        mo.reference(**device, config=CONFIG)


@needs_device
def test_check_on_cuda_tensors():
    device = {name: tensor.cuda() for name, tensor in to_torch(make_inputs(seed=14)).items()}
    ref = mo.reference(**device, config=CONFIG)
    assert mo.check(inputs=device, outputs=dict(topk_indices=ref.topk_indices, out=ref.out.to(torch.bfloat16)),
                    config=CONFIG).passed


def test_cuda_views_are_refused_by_host_backends():
    """The library's own guard, without a device: a view marked as CUDA memory never reaches a host backend."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA tensor to mark a view as device memory")
    device = {name: tensor.cuda() for name, tensor in to_torch(make_inputs(seed=15)).items()}
    with pytest.raises(ValueError, match=r"^index_q is in CUDA device memory, but backend simd reads host memory"):
        _core.select(CONFIG.to_json(), device["index_q"], device["index_k"], device["cu_seqlens_q"].cpu(),
                     device["cu_seqlens_k"].cpu(), backend="simd")


@needs_device
def test_training_on_cuda_tensors_gives_the_reference_bits():
    host = to_torch(make_inputs(seed=17))
    rng = np.random.default_rng(17)
    host["dout"] = torch.from_numpy(rng.standard_normal((host["q"].shape[0], 4, 8)))
    selection = mo.select(host["index_q"], host["index_k"], host["cu_seqlens_q"], host["cu_seqlens_k"], config=CONFIG)
    args = [host[name] for name in ("q", "k", "v", "index_q", "index_k")]
    on_host = mo.training(*args, selection.topk_indices, host["cu_seqlens_q"], host["cu_seqlens_k"], host["dout"],
                          config=CONFIG, backend="reference")
    device = [tensor.cuda() for tensor in args]
    on_device = mo.training(*device, selection.topk_indices, host["cu_seqlens_q"], host["cu_seqlens_k"],
                            host["dout"].cuda(), config=CONFIG)
    assert on_device.backend == "gpu" and on_device.dq.is_cuda
    for name in ("dq", "dk", "dv", "dqi", "dki", "kl_loss"):
        assert torch.equal(getattr(on_device, name).cpu(), getattr(on_host, name)), name

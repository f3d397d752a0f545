"""Shared pieces of the msa_oracle tests: small random problems as numpy arrays or torch tensors, the independent
numpy model of tests/independent_model_test.py (written from SPEC.md, not from the C++ code), the msa tool."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests"))

import msa_oracle as mo  # noqa: E402

# A ragged batch of a chunked prefill and a prefill, small dims, every block count path (sequences shorter and
# longer than top_k blocks).
LENGTHS = [(5, 13), (9, 9), (1, 3)]
SHAPE = dict(hq=4, hkv=2, d=16, dv=8, di=12)
CONFIG = mo.Config(block_size=4, top_k=3)


def prefix_sums(lengths):
    sums = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=sums[1:])
    return sums


def make_inputs(seed=0, lengths=LENGTHS, dtype=np.float64, hq=4, hkv=2, d=16, dv=8, di=12):
    """{q, k, v, index_q, index_k, cu_seqlens_q, cu_seqlens_k} of standard normal values (numpy's own generator)."""
    rng = np.random.default_rng(seed)
    total_q = sum(q for q, _ in lengths)
    total_k = sum(k for _, k in lengths)

    def normal(*shape):
        return rng.standard_normal(shape).astype(dtype)

    return dict(q=normal(total_q, hq, d), k=normal(total_k, hkv, d), v=normal(total_k, hkv, dv),
                index_q=normal(total_q, hkv, di), index_k=normal(total_k, 1, di),
                cu_seqlens_q=prefix_sums([q for q, _ in lengths]), cu_seqlens_k=prefix_sums([k for _, k in lengths]))


def to_torch(inputs, device="cpu", dtype=None):
    torch = pytest.importorskip("torch")
    result = {}
    for name, array in inputs.items():
        tensor = torch.from_numpy(np.ascontiguousarray(array))
        if dtype is not None and tensor.is_floating_point():
            tensor = tensor.to(dtype)
        result[name] = tensor.to(device)
    return result


def model_config(config):
    """The independent model's config dict."""
    cfg = dict(block_size=config.block_size, top_k=config.top_k, init_blocks=config.init_blocks,
               pooling=config.pooling)
    for name in ("softmax_scale", "index_scale"):
        if getattr(config, name) is not None:
            cfg[name] = getattr(config, name)
    return cfg


def model(inputs, config):
    """The independent model's (block_scores, selection, near-tie rows, index_lse, out, lse) on `inputs`."""
    import independent_model_test as independent

    m = {name: np.asarray(value, dtype=np.float64) if name.startswith(("q", "k", "v", "index")) else np.asarray(value)
         for name, value in inputs.items()}
    cfg = model_config(config)
    scores, selection, ties = independent.model_index_branch(m, cfg)
    index_lse, out, lse = independent.model_attention(m, cfg, selection)
    return dict(block_scores=scores, topk_indices=selection, ties=ties, index_lse=index_lse, out=out, lse=lse)


def msa_tool():
    tool = mo.msa_tool()
    assert os.path.exists(tool), f"the msa tool {tool} is not built"
    return tool


@pytest.fixture
def inputs():
    return make_inputs()

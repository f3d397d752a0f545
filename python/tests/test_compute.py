"""mo.reference, mo.select and mo.attend on numpy arrays and torch tensors, against the independent numpy model
(tests/independent_model_test.py, written from SPEC.md) and against each other."""
import numpy as np
import pytest

import msa_oracle as mo
from conftest import CONFIG, make_inputs, model, to_torch

RTOL = 1e-12


def close(got, want):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    finite = np.isfinite(want)
    assert np.array_equal(np.isfinite(got), finite)
    assert np.array_equal(got[~finite], want[~finite])
    assert np.all(np.abs(got[finite] - want[finite]) <= RTOL * np.maximum(1.0, np.abs(want[finite])))


def same_sets(got, want):
    """Rows compared as sets of valid ids, and the local block (the model's last valid id) last in both."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape
    for row_got, row_want in zip(got.reshape(-1, got.shape[-1]), want.reshape(-1, want.shape[-1])):
        valid = row_want[row_want >= 0]
        assert sorted(row_got[row_got >= 0]) == sorted(valid)
        assert row_got[len(valid) - 1] == valid[-1]


@pytest.mark.parametrize("backend", [name for name, available in mo.backends() if available])
def test_reference_matches_the_independent_model(inputs, backend):
    ref = mo.reference(**inputs, config=CONFIG, backend=backend)
    want = model(inputs, CONFIG)
    assert not want["ties"].any()
    assert ref.backend == backend
    same_sets(ref.topk_indices, want["topk_indices"])
    for name in ("block_scores", "index_lse", "out", "lse"):
        close(getattr(ref, name), want[name])


def test_results_have_the_documented_shapes_and_dtypes(inputs):
    ref = mo.reference(**inputs, config=CONFIG)
    total_q, hidx = inputs["q"].shape[0], inputs["index_q"].shape[1]
    assert ref.topk_indices.shape == (hidx, total_q, CONFIG.top_k) and ref.topk_indices.dtype == np.int32
    assert ref.block_scores.shape == (hidx, total_q, 4)  # ceil(13 / 4) blocks
    assert ref.index_lse.shape == (hidx, total_q)
    assert ref.out.shape == (total_q, 4, 8) and ref.out.dtype == np.float64
    assert ref.lse.shape == (total_q, 4)


def test_select_then_attend_is_the_reference(inputs):
    ref = mo.reference(**inputs, config=CONFIG)
    sel = mo.select(inputs["index_q"], inputs["index_k"], inputs["cu_seqlens_q"], inputs["cu_seqlens_k"],
                    config=CONFIG)
    att = mo.attend(inputs["q"], inputs["k"], inputs["v"], sel.topk_indices, inputs["cu_seqlens_q"],
                    inputs["cu_seqlens_k"], config=CONFIG)
    for name in ("topk_indices", "block_scores", "index_lse"):
        assert np.array_equal(getattr(sel, name), getattr(ref, name))
    assert np.array_equal(att.out, ref.out) and np.array_equal(att.lse, ref.lse)


def test_attend_takes_any_valid_selection_and_a_query_major_layout(inputs):
    """A selection other than the index branch's (every row: the local block, then block 0 when it is another):
    attention matches the independent model on that selection, in either layout."""
    import independent_model_test as independent

    ref = mo.reference(**inputs, config=CONFIG)
    chosen = np.full_like(ref.topk_indices, -1)
    local = ref.topk_indices.max(axis=2)  # the local block is the largest visible id
    chosen[..., 0] = np.where(local > 0, 0, local)
    chosen[..., 1] = np.where(local > 0, local, -1)
    att = mo.attend(inputs["q"], inputs["k"], inputs["v"], chosen, inputs["cu_seqlens_q"], inputs["cu_seqlens_k"],
                    config=CONFIG)
    m = {name: np.asarray(value, dtype=np.float64) if value.dtype.kind == "f" else value
         for name, value in inputs.items()}
    _, out, lse = independent.model_attention(m, dict(block_size=4, top_k=3, init_blocks=0, pooling="max"), chosen)
    close(att.out, out)
    close(att.lse, lse)
    query_major = np.ascontiguousarray(chosen.transpose(1, 0, 2))
    att_query_major = mo.attend(inputs["q"], inputs["k"], inputs["v"], query_major, inputs["cu_seqlens_q"],
                                inputs["cu_seqlens_k"], config=CONFIG, topk_layout="query_major")
    assert np.array_equal(att_query_major.out, att.out)


@pytest.mark.parametrize("torch_dtype", ["float64", "float32", "bfloat16", "float16"])
def test_torch_tensors_give_the_bits_of_numpy_arrays_of_the_same_values(torch_dtype):
    torch = pytest.importorskip("torch")
    dtype = getattr(torch, torch_dtype)
    tensors = to_torch(make_inputs(seed=3), dtype=dtype)
    arrays = {name: (t.double().numpy() if t.is_floating_point() else t.numpy()) for name, t in tensors.items()}
    from_torch = mo.reference(**tensors, config=CONFIG)
    from_numpy = mo.reference(**arrays, config=CONFIG)  # the same values, widened exactly to float32
    assert isinstance(from_torch.out, torch.Tensor) and from_torch.out.dtype == torch.float64
    assert isinstance(from_numpy.out, np.ndarray)
    for name in ("topk_indices", "block_scores", "index_lse", "out", "lse"):
        assert np.array_equal(getattr(from_torch, name).numpy(), getattr(from_numpy, name)), name


def test_bf16_numpy_arrays_through_ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    inputs = make_inputs(seed=4)
    bf16 = {name: (a.astype(ml_dtypes.bfloat16) if a.dtype.kind == "f" else a) for name, a in inputs.items()}
    widened = {name: (a.astype(np.float64) if a.dtype.kind != "i" else a) for name, a in bf16.items()}
    a = mo.reference(**bf16, config=CONFIG)
    b = mo.reference(**widened, config=CONFIG)
    assert np.array_equal(a.out, b.out) and np.array_equal(a.topk_indices, b.topk_indices)


def test_strided_inputs_are_read_in_place(inputs):
    """Rows and heads with strides of their own (a slice of a wider buffer): the same results as contiguous ones."""
    wide = np.zeros((inputs["q"].shape[0], 2 * inputs["q"].shape[1], inputs["q"].shape[2]))
    wide[:, ::2] = inputs["q"]
    strided = dict(inputs, q=wide[:, ::2])
    assert not strided["q"].flags.c_contiguous
    assert np.array_equal(mo.reference(**strided, config=CONFIG).out, mo.reference(**inputs, config=CONFIG).out)


def test_every_pooling_and_init_blocks_against_the_model(inputs):
    for config in (mo.Config(block_size=4, top_k=3, pooling="lse"), mo.Config(block_size=4, top_k=3, pooling="mean"),
                   mo.Config(block_size=4, top_k=3, init_blocks=1), mo.Config(block_size=2, top_k=4, index_scale=0.5)):
        ref = mo.reference(**inputs, config=config)
        want = model(inputs, config)
        same_sets(ref.topk_indices, want["topk_indices"])
        close(ref.block_scores, want["block_scores"])
        close(ref.out, want["out"])

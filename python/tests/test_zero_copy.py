"""Inputs cross into the compiled module without copies: the view it reads starts at the caller's own data."""
import numpy as np
import pytest

from msa_oracle._arrays import view_info


def test_numpy_arrays_of_every_dtype_are_viewed_in_place():
    for dtype, name in ((np.float64, "F64"), (np.float32, "F32"), (np.float16, "F16")):
        x = np.ones((5, 3, 8), dtype=dtype)
        address, got_dtype, shape, strides = view_info(x, "q")
        assert (address, got_dtype, shape, strides) == (x.ctypes.data, name, (5, 3, 8), (24, 8, 1))


def test_ml_dtypes_bf16_arrays_are_viewed_in_place():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.ones((4, 2, 8), dtype=ml_dtypes.bfloat16)
    assert view_info(x, "q")[:2] == (x.ctypes.data, "BF16")


def test_strided_numpy_views_keep_their_strides():
    base = np.zeros((6, 8, 16))
    x = base[1::2, ::4]  # rows and heads strided, last axis contiguous
    address, _, shape, strides = view_info(x, "k")
    assert address == x.ctypes.data and shape == (3, 2, 16) and strides == (256, 64, 1)


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16", "float16"])
def test_torch_tensors_are_viewed_in_place(dtype):
    torch = pytest.importorskip("torch")
    x = torch.ones(5, 2, 8, dtype=getattr(torch, dtype), requires_grad=dtype != "bfloat16")
    address, _, shape, _ = view_info(x, "q")
    assert address == x.data_ptr() and shape == (5, 2, 8)
    transposed = torch.ones(2, 5, 8, dtype=getattr(torch, dtype)).transpose(0, 1)
    assert view_info(transposed, "q")[0] == transposed.data_ptr()

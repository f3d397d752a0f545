"""Bad arguments are ValueErrors that name the tensor or field, its value and the rule: never a crash, never a
silent conversion."""
import numpy as np
import pytest

import msa_oracle as mo
from conftest import CONFIG, make_inputs


def raises(match, function, *args, **kwargs):
    with pytest.raises(ValueError, match=match):
        function(*args, **kwargs)


def test_wrong_dtypes_are_named_and_not_converted(inputs):
    raises(r"^q: dtype I64 is not accepted: float64, float32, bfloat16 or float16",
           mo.reference, **dict(inputs, q=inputs["q"].astype(np.int64)), config=CONFIG)
    raises(r"^index_k: dtype uint16 is not accepted",
           mo.reference, **dict(inputs, index_k=inputs["index_k"].view(np.uint16)[..., ::4].copy()), config=CONFIG)
    raises(r"^cu_seqlens_q: I64 \[4\] is not accepted: must be int32 \[B\+1\]",
           mo.reference, **dict(inputs, cu_seqlens_q=inputs["cu_seqlens_q"].astype(np.int64)), config=CONFIG)
    raises(r"^cu_seqlens_k: F64 \[4\] is not accepted",
           mo.reference, **dict(inputs, cu_seqlens_k=inputs["cu_seqlens_k"].astype(np.float64)), config=CONFIG)


def test_wrong_ranks_shapes_and_strides(inputs):
    raises(r"^v: shape \[25, 16\] must be rank 3 \[total_k, Hkv, Dv\]",
           mo.reference, **dict(inputs, v=inputs["v"].reshape(25, 16)), config=CONFIG)
    raises(r"^q: its last axis has stride 2 elements: it must be contiguous",
           mo.reference, **dict(inputs, q=np.repeat(inputs["q"], 2, axis=2)[..., ::2]), config=CONFIG)
    raises(r"^index_q has 3 heads: must equal Hkv = 2",
           mo.reference, **dict(inputs, index_q=np.zeros((15, 3, 12))), config=CONFIG)
    raises(r"^k has 24 rows but cu_seqlens_k\[3\] = 25",
           mo.reference, **dict(inputs, k=inputs["k"][:24]), config=CONFIG)
    raises(r"^sequence 1 has q_len 9 > k_len 8",
           mo.reference, **dict(inputs, cu_seqlens_k=np.array([0, 13, 21, 24], dtype=np.int32),
                                 k=inputs["k"][:24], v=inputs["v"][:24], index_k=inputs["index_k"][:24]),
           config=CONFIG)


def test_non_finite_inputs_are_named(inputs):
    q = inputs["q"].copy()
    q[2, 1, 3] = np.nan
    raises(r"^q\[2, 1, 3\] = nan: inputs must be finite", mo.reference, **dict(inputs, q=q), config=CONFIG)


def test_not_an_array():
    inputs = make_inputs()
    raises(r"^q: expected a numpy array or a torch tensor, got list", mo.reference,
           **dict(inputs, q=inputs["q"].tolist()), config=CONFIG)


def test_config_fields_are_checked_when_made():
    raises(r"^Config.top_k = 0", mo.Config, top_k=0)
    raises(r"^Config.pooling = \"median\": must be \"max\", \"lse\" or \"mean\"", mo.Config, pooling="median")
    raises(r"^Config.block_size = 1.5: must be an int", mo.Config, block_size=1.5)
    raises(r"^Config.softmax_scale = 'big': must be a number or None", mo.Config, softmax_scale="big")
    raises(r"top_k", mo.Config, top_k=2, init_blocks=1, local_blocks=2)
    raises(r"^config: expected a msa_oracle.Config, got dict", mo.reference, **make_inputs(), config=dict(top_k=3))


def test_unknown_backend_lists_the_compiled_ones(inputs):
    raises(r'^backend="tpu": not compiled in \(compiled in: reference, simd', mo.reference, **inputs, config=CONFIG,
           backend="tpu")


def test_attend_refuses_invalid_selections(inputs):
    ref = mo.reference(**inputs, config=CONFIG)
    bad = ref.topk_indices.copy()
    bad[0, 4, 0] = bad[0, 4, 1]  # a duplicate id
    raises(r"^topk_indices\[0, 4, 1\] = 1: block selected twice", mo.attend, inputs["q"], inputs["k"], inputs["v"], bad, inputs["cu_seqlens_q"],
           inputs["cu_seqlens_k"], config=CONFIG)
    raises(r"^topk_indices: dtype I64 is not accepted: must be int32", mo.attend, inputs["q"], inputs["k"],
           inputs["v"], ref.topk_indices.astype(np.int64), inputs["cu_seqlens_q"], inputs["cu_seqlens_k"],
           config=CONFIG)
    raises(r"^topk_indices: shape \[2, 15, 2\] must be \[2, 15, 3\]", mo.attend, inputs["q"], inputs["k"],
           inputs["v"], np.ascontiguousarray(ref.topk_indices[..., :2]), inputs["cu_seqlens_q"],
           inputs["cu_seqlens_k"], config=CONFIG)
    raises(r"^layout='sideways'", mo.attend, inputs["q"], inputs["k"], inputs["v"], ref.topk_indices,
           inputs["cu_seqlens_q"], inputs["cu_seqlens_k"], config=CONFIG, topk_layout="sideways")


def test_check_refuses_bad_arguments(inputs):
    ref = mo.reference(**inputs, config=CONFIG)
    raises(r'^outputs: unknown tensor "topk" \(known: topk_indices, out, lse, index_lse, dq, dk, dv, dqi, dki, '
           r'kl_loss\)', mo.check, inputs=inputs,
           outputs=dict(topk=ref.topk_indices), config=CONFIG)
    raises(r'^inputs: tensor "v" is missing', mo.check, inputs={k: a for k, a in inputs.items() if k != "v"},
           outputs=dict(out=ref.out), config=CONFIG)
    raises(r"^order=sometimes: must be strict or any", mo.check, inputs=inputs, outputs=dict(out=ref.out),
           config=CONFIG, order="sometimes")
    raises(r'^outputs: tensor "out" has shape \[15, 4\]: must be \[15, 4, 8\]', mo.check, inputs=inputs,
           outputs=dict(out=ref.out[..., 0]), config=CONFIG)
    raises(r"^outputs: supplies none of topk_indices, out, lse, index_lse", mo.check, inputs=inputs, outputs={},
           config=CONFIG)
    raises(r"^inputs: expected a dict of arrays, got list", mo.check, inputs=[], outputs={}, config=CONFIG)
    raises(r"tensor \"topk_indices\" has shape \[15, 2, 3\], the query_major layout, but the layout is head_major "
           r"\(default: \[Hidx, total_q, top_k\], shape \[2, 15, 3\]\): pass topk_layout=query_major", mo.check, inputs=inputs,
           outputs=dict(topk_indices=np.ascontiguousarray(ref.topk_indices.transpose(1, 0, 2))), config=CONFIG)

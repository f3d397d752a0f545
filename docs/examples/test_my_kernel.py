"""A kernel project's test, as it would write one: its MSA (here `my_msa`, written in torch the way a first port is:
bf16 inputs, fp32 accumulation, top-k on fp32 block maxima, the local block forced last) judged by msa_oracle
instead of a hand-written FP32 reference and assert_close (docs/python.md).

    pytest docs/examples/test_my_kernel.py

The first test passes on every shape; the second plants a bug (a query that sees one key past its position) and
requires the oracle's report to name a row the bug touches."""
import math
import re

import pytest
import torch

import msa_oracle as mo

CONFIG = mo.Config(block_size=64, top_k=4)
HQ, HKV, D = 8, 2, 64
SHAPES = {  # name: (q_len, k_len) per sequence
    "prefill": [(320, 320)],
    "chunked_prefill_and_decode": [(64, 448), (1, 200), (4, 131)],
    "ragged_prefill": [(130, 130), (65, 65), (257, 257)],
}


def my_msa(q, k, v, index_q, index_k, cu_seqlens_q, cu_seqlens_k, block_size, top_k, see_past_the_end=0):
    """Returns topk_indices [Hkv, total_q, top_k] int32, out [total_q, Hq, D] bf16, lse [total_q, Hq] fp32."""
    total_q, hq, d = q.shape
    hkv, group = k.shape[1], hq // k.shape[1]
    topk = torch.full((hkv, total_q, top_k), -1, dtype=torch.int32)
    out = torch.empty(total_q, hq, v.shape[2], dtype=torch.bfloat16)
    lse = torch.empty(total_q, hq, dtype=torch.float32)
    for b in range(len(cu_seqlens_q) - 1):
        q0, q1, k0, k1 = (int(x) for x in (cu_seqlens_q[b], cu_seqlens_q[b + 1], cu_seqlens_k[b], cu_seqlens_k[b + 1]))
        q_len, k_len = q1 - q0, k1 - k0
        if q_len == 0:
            continue
        pos = torch.arange(k_len - q_len, k_len)  # the queries are the causal suffix of the keys
        visible = torch.arange(k_len)[None, :] <= pos[:, None] + see_past_the_end  # [q_len, k_len]
        blocks = -(-k_len // block_size)
        # Index branch: token scores, block maxima, top-(k-1) history blocks, then the local block.
        x = torch.einsum("thd,sd->hts", index_q[q0:q1].float(), index_k[k0:k1, 0].float())
        x = (x * index_q.shape[2] ** -0.5).masked_fill(~visible, -math.inf)
        padded = torch.full((hkv, q_len, blocks * block_size), -math.inf)
        padded[..., :k_len] = x
        block_max = padded.view(hkv, q_len, blocks, block_size).amax(dim=3)  # [Hkv, q_len, blocks]
        local = pos // block_size
        history = block_max.masked_fill(torch.arange(blocks)[None, None, :] >= local[None, :, None], -math.inf)
        ranked = torch.topk(history, k=min(top_k - 1, blocks), dim=2).indices
        for t in range(q_len):
            kept = min(top_k - 1, int(local[t]))
            topk[:, q0 + t, :kept] = ranked[:, t, :kept].to(torch.int32)
            topk[:, q0 + t, kept] = int(local[t])
        # Main branch: softmax over the selected blocks' visible keys, per head of each group.
        key_block = torch.arange(k_len) // block_size
        for r in range(hkv):
            chosen = (key_block[None, :, None] == topk[r, q0:q1, None, :]).any(dim=2) & visible  # [q_len, k_len]
            heads = slice(r * group, (r + 1) * group)
            s = torch.einsum("thd,sd->hts", q[q0:q1, heads].float(), k[k0:k1, r].float()) * d ** -0.5
            s = s.masked_fill(~chosen[None], -math.inf)
            lse[q0:q1, heads] = torch.logsumexp(s, dim=2).transpose(0, 1)
            p = torch.softmax(s, dim=2)
            out[q0:q1, heads] = torch.einsum("hts,sd->thd", p, v[k0:k1, r].float()).to(torch.bfloat16)
    return topk, out, lse


def random_inputs(lengths, seed):
    generator = torch.Generator().manual_seed(seed)
    total_q, total_k = sum(q for q, _ in lengths), sum(k for _, k in lengths)

    def normal(*shape):
        return torch.randn(*shape, generator=generator).to(torch.bfloat16)

    cu_q = torch.tensor([0] + [sum(q for q, _ in lengths[:i + 1]) for i in range(len(lengths))], dtype=torch.int32)
    cu_k = torch.tensor([0] + [sum(k for _, k in lengths[:i + 1]) for i in range(len(lengths))], dtype=torch.int32)
    return dict(q=normal(total_q, HQ, D), k=normal(total_k, HKV, D), v=normal(total_k, HKV, D),
                index_q=normal(total_q, HKV, D), index_k=normal(total_k, 1, D), cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)


# docs:begin check
@pytest.mark.parametrize("shape", SHAPES)
def test_my_msa_matches_the_oracle(shape):
    inputs = random_inputs(SHAPES[shape], seed=len(shape))
    topk, out, lse = my_msa(**inputs, block_size=CONFIG.block_size, top_k=CONFIG.top_k)
    # Replaces the hand-written FP32 reference and its assert_close: out judged at bf16, lse at fp32 (their dtypes),
    # the selection against fp32 index scores, each within 2x a naive evaluation at that precision.
    mo.check(inputs=inputs, outputs=dict(topk_indices=topk, out=out, lse=lse), config=CONFIG)
# docs:end check


def test_a_planted_bug_is_caught_and_its_row_named():
    lengths = SHAPES["chunked_prefill_and_decode"]
    inputs = random_inputs(lengths, seed=7)
    topk, out, lse = my_msa(**inputs, block_size=CONFIG.block_size, top_k=CONFIG.top_k, see_past_the_end=1)
    with pytest.raises(mo.OracleMismatch) as caught:
        mo.check(inputs=inputs, outputs=dict(topk_indices=topk, out=out, lse=lse), config=CONFIG)
    report = str(caught.value)
    # Every row the report lists must be one the bug touches: a query with a key after it (not its sequence's last).
    rows = [tuple(int(n) for n in match) for match in re.findall(r"seq (\d+) query (\d+) \(row \d+\)", report)]
    assert rows, report
    assert all(query < lengths[seq][0] - 1 for seq, query in rows), rows
    assert "reproduce: " in report

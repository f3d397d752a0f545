"""mo.layouts: paged caches in each project's layout (built here by scattering packed keys into shuffled pages, the
inverse of what from_paged does) come back as the packed keys; query-major selections and log2 lse convert."""
import math

import numpy as np
import pytest

import msa_oracle as mo
from conftest import CONFIG, prefix_sums

PAGE = 4
LENGTHS = [5, 8, 1, 0, 11]
HKV, D, DI = 2, 6, 5


def packed(seed=0, lengths=LENGTHS, hkv=HKV, d=D, di=DI):
    rng = np.random.default_rng(seed)
    total = sum(lengths)
    return rng.standard_normal((total, hkv, d)), rng.standard_normal((total, hkv, d)), \
        rng.standard_normal((total, 1, di))


def paged(k, v, index_k, layout, padding, seed=1, lengths=LENGTHS):
    """(k_cache, v_cache, index_cache, page_table) with every sequence's keys on shuffled pages; the unused table
    columns hold `padding`, the unused pages garbage."""
    rng = np.random.default_rng(seed)
    hkv, d, di = k.shape[1], k.shape[2], index_k.shape[2]
    pages_of = [-(-n // PAGE) for n in lengths]
    num_pages = sum(pages_of) + 3
    order = rng.permutation(num_pages)
    table = np.full((len(lengths), max(pages_of) + 2), padding, dtype=np.int32)
    k_nhd = rng.standard_normal((num_pages, PAGE, hkv, d)) * 1e6  # garbage where no key lands
    v_nhd = rng.standard_normal((num_pages, PAGE, hkv, d)) * 1e6
    index_cache = rng.standard_normal((num_pages, PAGE, di)) * 1e6
    cu = prefix_sums(lengths)
    next_page = 0
    for b, n in enumerate(lengths):
        for j in range(pages_of[b]):
            page = order[next_page]
            next_page += 1
            table[b, j] = page
            rows = slice(cu[b] + j * PAGE, min(cu[b] + (j + 1) * PAGE, cu[b + 1]))
            count = rows.stop - rows.start
            k_nhd[page, :count], v_nhd[page, :count] = k[rows], v[rows]
            index_cache[page, :count] = index_k[rows, 0]
    if layout == "flash_attn":
        return k_nhd, v_nhd, index_cache, table
    k_hnd, v_hnd = k_nhd.transpose(0, 2, 1, 3).copy(), v_nhd.transpose(0, 2, 1, 3).copy()
    if layout == "vllm":
        return np.concatenate([k_hnd, v_hnd], axis=-1), None, index_cache, table
    return k_hnd, v_hnd, index_cache[:, None], table


@pytest.mark.parametrize("layout,padding", [("official", 0), ("vllm", 0), ("flashinfer", -1), ("flash_attn", 0)])
def test_from_paged_recovers_the_packed_keys(layout, padding):
    k, v, index_k = packed()
    k_cache, v_cache, index_cache, table = paged(k, v, index_k, layout, padding)
    seq_lens = np.array(LENGTHS, dtype=np.int32)
    got_k, got_v, cu = mo.layouts.from_paged(k_cache, v_cache, table, seq_lens, layout=layout)
    assert np.array_equal(got_k, k) and np.array_equal(got_v, v)
    assert cu.dtype == np.int32 and np.array_equal(cu, prefix_sums(LENGTHS))
    *_, got_index_k, _ = mo.layouts.from_paged(k_cache, v_cache, table, seq_lens, layout=layout,
                                               index_cache=index_cache)
    assert np.array_equal(got_index_k, index_k)


def test_from_paged_on_torch_with_its_own_index_table():
    torch = pytest.importorskip("torch")
    k, v, index_k = packed(seed=2)
    k_cache, v_cache, _, table = paged(k, v, index_k, "official", -1)
    _, _, index_cache, index_table = paged(k, v, index_k, "official", -1, seed=7)  # other pages for index keys
    got = mo.layouts.from_paged(torch.from_numpy(k_cache), torch.from_numpy(v_cache), torch.from_numpy(table),
                                torch.tensor(LENGTHS, dtype=torch.int32), layout="official",
                                index_cache=torch.from_numpy(index_cache), index_page_table=index_table)
    assert all(isinstance(t, torch.Tensor) for t in got)
    assert np.array_equal(got[0].numpy(), k) and np.array_equal(got[2].numpy(), index_k)
    assert got[3].dtype == torch.int32


def test_fp8_index_keys_are_widened_exactly():
    torch = pytest.importorskip("torch")
    k, v, index_k = packed(seed=3)
    k_cache, v_cache, index_cache, table = paged(k, v, index_k, "flashinfer", -1)
    fp8 = torch.from_numpy(index_cache).to(torch.float8_e4m3fn)
    *_, got, _ = mo.layouts.from_paged(k_cache, v_cache, table, np.array(LENGTHS), layout="flashinfer",
                                       index_cache=fp8)
    assert got.dtype == torch.float32
    want = torch.from_numpy(index_k).to(torch.float8_e4m3fn).float()
    assert torch.equal(got, want)


def test_from_paged_refusals():
    k, v, index_k = packed()
    k_cache, v_cache, _, table = paged(k, v, index_k, "official", -1)
    with pytest.raises(ValueError, match=r"^page_table\[1, 0\] = -1: must be a page in \[0, 11\)"):
        bad = table.copy()
        bad[1, 0] = -1
        mo.layouts.from_paged(k_cache, v_cache, bad, np.array(LENGTHS), layout="official")
    with pytest.raises(ValueError, match=r"^seq_lens\[4\] = 40 needs 10 pages of 4 tokens but page_table has 5"):
        mo.layouts.from_paged(k_cache, v_cache, table, np.array(LENGTHS[:4] + [40]), layout="official")
    with pytest.raises(ValueError, match=r"^layout='sglang': must be one of official, vllm, flashinfer, flash_attn"):
        mo.layouts.from_paged(k_cache, v_cache, table, np.array(LENGTHS), layout="sglang")
    with pytest.raises(ValueError, match=r"^v_cache: layout 'vllm' packs K and V"):
        mo.layouts.from_paged(k_cache, v_cache, table, np.array(LENGTHS), layout="vllm")


def test_a_paged_cache_judged_end_to_end():
    """Keys from a vLLM cache, the selection in vLLM's query-major buffer order: mo.reference on the packed keys and
    mo.attend on the converted selection agree."""
    rng = np.random.default_rng(9)
    lengths = [13, 9]
    total = sum(lengths)
    k, v, index_k = packed(seed=4, lengths=lengths, hkv=2, d=16, di=12)
    kv_cache, _, _, table = paged(k, v, index_k, "vllm", 0, lengths=lengths)
    got_k, got_v, cu_k = mo.layouts.from_paged(kv_cache, None, table, np.array(lengths), layout="vllm")
    q = rng.standard_normal((total, 4, 16))
    index_q = rng.standard_normal((total, 2, 12))
    ref = mo.reference(q, got_k, got_v, index_q, index_k, cu_k, cu_k, config=CONFIG)
    query_major = np.ascontiguousarray(ref.topk_indices.transpose(1, 0, 2))
    att = mo.attend(q, got_k, got_v, mo.layouts.topk(query_major, layout="query_major"), cu_k, cu_k, config=CONFIG)
    assert np.array_equal(att.out, ref.out)


def test_topk_and_lse_conversions():
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    assert np.array_equal(mo.layouts.topk(x.transpose(1, 0, 2), layout="query_major"), x)
    assert mo.layouts.topk(x.transpose(1, 0, 2), layout="query_major").flags.c_contiguous
    assert mo.layouts.topk(x) is x
    lse = np.array([1.0, -2.5])
    assert np.allclose(mo.layouts.lse(lse / math.log(2), base="2"), lse, rtol=1e-15)
    with pytest.raises(ValueError, match=r"^base='10'"):
        mo.layouts.lse(lse, base="10")

"""Other projects' tensor layouts, turned into the ones this package takes (SPEC section 1): paged KV caches into
packed variable-length keys, query-major selections into head-major ones, log2 lse into natural lse.

Each known paged layout is an entry of PAGED_LAYOUTS, written from that project's public tests (docs/python.md
cites them). Selections everywhere hold LOGICAL block ids within the sequence (position // block_size): packing the
cache keeps them valid as they are."""
import dataclasses
import math

import numpy as np

from . import _arrays


@dataclasses.dataclass(frozen=True)
class PagedLayout:
    """How one project stores a paged KV cache."""

    name: str
    axes: str  # "HND": caches are [pages, heads, page_size, dim]; "NHD": [pages, page_size, heads, dim]
    packed_kv: bool  # K and V share one tensor [..., 2 * D] (K first); v_cache is None
    table: str  # what the project calls the page table, for messages
    lengths: str  # what it calls the per-sequence key lengths (each the TOTAL length, the new queries included)
    source: str  # where the convention is written


PAGED_LAYOUTS = {
    layout.name: layout
    for layout in (
        PagedLayout("official", "HND", False, "page_table", "seq_lens",
                    "MiniMax-AI/MSA inference/msa_v1 attention and indexer interfaces and their tests"),
        PagedLayout("vllm", "HND", True, "block_table", "seq_lens",
                    "vllm vllm/models/minimax_m3 (common/ops/sparse_attn.py), tests/kernels/attention/test_minimax_m3.py"),
        PagedLayout("flashinfer", "HND", False, "page_table", "seqused_k",
                    "flashinfer flashinfer/msa_ops (sparse_decode.py, sparse_prefill.py), tests/msa_ops"),
        PagedLayout("flash_attn", "NHD", False, "block_table", "cache_seqlens (+ seqlen_new)",
                    "Dao-AILab/flash-attention tests/test_flash_attn.py (paged KV cache)"),
    )
}

TOPK_LAYOUTS = ("head_major", "query_major")
LSE_BASES = ("e", "2")


class _Ops:
    """The few array operations the layouts need, for numpy arrays and torch tensors alike."""

    def __init__(self, example):
        self.torch = _arrays._torch() if _arrays.is_torch(example) else None

    def to_list(self, x):
        return x.tolist() if hasattr(x, "tolist") else list(x)

    def gather_pages(self, cache, pages):
        if self.torch is not None:
            return cache[self.torch.as_tensor(pages, dtype=self.torch.long, device=cache.device)]
        return cache[np.asarray(pages, dtype=np.int64)]

    def permute(self, x, order):
        return x.permute(*order) if self.torch is not None else x.transpose(order)

    def concatenate(self, parts, empty_shape, like):
        if parts:
            return self.torch.cat(parts) if self.torch is not None else np.concatenate(parts)
        if self.torch is not None:
            return like.new_empty(empty_shape)
        return np.empty(empty_shape, dtype=like.dtype)

    def contiguous(self, x):
        return x.contiguous() if self.torch is not None else np.ascontiguousarray(x)

    def prefix_sums(self, lengths, like):
        sums = np.zeros(len(lengths) + 1, dtype=np.int32)
        np.cumsum(lengths, out=sums[1:])
        if self.torch is not None:
            return self.torch.from_numpy(sums).to(like.device)
        return sums

    def exact_float(self, x):
        """fp8 values (no project's index cache carries a scale) widened to float32, exactly; other dtypes as they are."""
        if "float8" not in str(x.dtype):
            return x
        return x.float() if self.torch is not None else x.astype(np.float32)


def _lengths_and_pages(page_table, seq_lens, layout, num_pages, page_size, ops):
    lengths = [int(n) for n in ops.to_list(seq_lens)]
    table = ops.to_list(page_table)
    if len(table) != len(lengths) or (table and not isinstance(table[0], list)):
        raise ValueError(f"{layout.table}: must be [B, max_pages] with B = len({layout.lengths}) = {len(lengths)}")
    pages = []
    for b, (length, row) in enumerate(zip(lengths, table)):
        if length < 0:
            raise ValueError(f"{layout.lengths}[{b}] = {length}: must be >= 0")
        needed = -(-length // page_size)
        if needed > len(row):
            raise ValueError(f"{layout.lengths}[{b}] = {length} needs {needed} pages of {page_size} tokens but "
                             f"{layout.table} has {len(row)} columns")
        for j in range(needed):  # only the pages holding keys are read: unused columns may hold anything
            if not 0 <= row[j] < num_pages:
                raise ValueError(f"{layout.table}[{b}, {j}] = {row[j]}: must be a page in [0, {num_pages})")
        pages.append(row[:needed])
    return lengths, pages


def _sequences(cache, pages, lengths, axes, ops):
    """Per sequence, its keys [length, heads, dim] gathered from its pages of `cache` in `axes` order."""
    parts = []
    for row, length in zip(pages, lengths):
        if length == 0:
            continue
        gathered = ops.gather_pages(cache, row)  # [n, heads, page, dim] or [n, page, heads, dim]
        if axes == "HND":
            gathered = ops.permute(gathered, (0, 2, 1, 3))
        n, page, heads, dim = gathered.shape
        parts.append(gathered.reshape(n * page, heads, dim)[:length])
    return parts


def from_paged(k_cache, v_cache, page_table, seq_lens, layout="official", *, index_cache=None,
               index_page_table=None):
    """Packs a paged KV cache into k [total_k, Hkv, D], v [total_k, Hkv, Dv] and cu_seqlens_k int32 [B+1] (copies,
    of the caches' kind, dtype and device).

    layout: a key of PAGED_LAYOUTS. "official" and "flashinfer": k_cache and v_cache [pages, Hkv, page_size, D];
    "vllm": one packed cache [pages, Hkv, page_size, 2 * D] (K first) as k_cache, v_cache None; "flash_attn":
    [pages, page_size, Hkv, D]. page_table [B, max_pages]: row b's column j is the page holding keys [j * page_size,
    (j + 1) * page_size) of sequence b; only the columns that hold keys are read. seq_lens [B]: each sequence's key
    count, its new queries included (what the official tests and vLLM call seq_lens, FlashInfer seqused_k).

    index_cache: the single-head index-key cache, [pages, page_size, Di] or [pages, 1, page_size, Di], paged by
    index_page_table (default: page_table); then index_k [total_k, 1, Di] is returned too, after v. fp8 index keys
    (which carry no scale in any of these projects) are widened to float32 exactly."""
    if layout not in PAGED_LAYOUTS:
        raise ValueError(f"layout={layout!r}: must be one of {', '.join(PAGED_LAYOUTS)}")
    spec = PAGED_LAYOUTS[layout]
    ops = _Ops(k_cache)
    if k_cache.ndim != 4:
        raise ValueError(f"k_cache: shape {tuple(k_cache.shape)} must be rank 4 "
                         f"({'[pages, heads, page_size, dim]' if spec.axes == 'HND' else '[pages, page_size, heads, dim]'})")
    if spec.packed_kv:
        if v_cache is not None:
            raise ValueError(f"v_cache: layout {layout!r} packs K and V into k_cache [..., 2 * D]: pass v_cache=None")
        if k_cache.shape[-1] % 2:
            raise ValueError(f"k_cache: last axis {k_cache.shape[-1]} must be 2 * D (K then V)")
        d = k_cache.shape[-1] // 2
        v_cache, k_cache = k_cache[..., d:], k_cache[..., :d]
    elif v_cache is None or v_cache.ndim != 4 or v_cache.shape[:3] != k_cache.shape[:3]:
        raise ValueError(f"v_cache: shape {None if v_cache is None else tuple(v_cache.shape)} must match k_cache's "
                         f"{tuple(k_cache.shape[:3])} on every axis but the last")
    page_size = k_cache.shape[2] if spec.axes == "HND" else k_cache.shape[1]
    lengths, pages = _lengths_and_pages(page_table, seq_lens, spec, k_cache.shape[0], page_size, ops)
    heads = k_cache.shape[1] if spec.axes == "HND" else k_cache.shape[2]
    k = ops.concatenate(_sequences(k_cache, pages, lengths, spec.axes, ops), (0, heads, k_cache.shape[3]), k_cache)
    v = ops.concatenate(_sequences(v_cache, pages, lengths, spec.axes, ops), (0, heads, v_cache.shape[3]), v_cache)
    cu_seqlens_k = ops.prefix_sums(lengths, k_cache)
    if index_cache is None:
        return ops.contiguous(k), ops.contiguous(v), cu_seqlens_k
    if index_cache.ndim == 4:
        if index_cache.shape[1] != 1:
            raise ValueError(f"index_cache: shape {tuple(index_cache.shape)}: the index keys have ONE head "
                             "([pages, 1, page_size, Di])")
        index_cache = index_cache[:, 0]
    if index_cache.ndim != 3 or index_cache.shape[1] != page_size:
        raise ValueError(f"index_cache: shape {tuple(index_cache.shape)} must be [pages, {page_size}, Di] or "
                         f"[pages, 1, {page_size}, Di]")
    index_ops = _Ops(index_cache)
    index_table = page_table if index_page_table is None else index_page_table
    _, index_pages = _lengths_and_pages(index_table, seq_lens, spec, index_cache.shape[0], page_size, index_ops)
    index_parts = _sequences(index_cache[:, None], index_pages, lengths, "HND", index_ops)  # [pages, 1, page, Di]
    index_k = index_ops.concatenate(index_parts, (0, 1, index_cache.shape[2]), index_cache)
    return ops.contiguous(k), ops.contiguous(v), index_ops.contiguous(index_ops.exact_float(index_k)), cu_seqlens_k


def topk(x, layout="head_major"):
    """A selection in `layout` ("head_major" [Hidx, total_q, top_k] or "query_major" [total_q, Hidx, top_k], the
    official decode attention's and FlashInfer msa_topk_select's) as a C-contiguous head-major one (a copy only when
    it is not one already: vLLM's head-major views of a query-major buffer are copied)."""
    if layout not in TOPK_LAYOUTS:
        raise ValueError(f"layout={layout!r}: must be one of {', '.join(TOPK_LAYOUTS)}")
    ops = _Ops(x)
    if getattr(x, "ndim", None) != 3:
        raise ValueError(f"topk_indices: shape {tuple(getattr(x, 'shape', ()))} must be rank 3")
    return ops.contiguous(ops.permute(x, (1, 0, 2)) if layout == "query_major" else x)


def lse(x, base="e"):
    """An lse in `base` ("e", or "2" for log2-domain ports such as SGLang's) as a natural-log one."""
    if base not in LSE_BASES:
        raise ValueError(f"base={base!r}: must be one of {', '.join(LSE_BASES)}")
    return x if base == "e" else x * math.log(2.0)

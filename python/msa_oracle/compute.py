"""The FP64 reference through the package: selection, attention, or both, on the caller's arrays.

Every backend's exact mode computes the canonical FP64 order of SPEC section 4 bit for bit, so `backend="auto"`
(the fastest one available here) gives the reference's bits. Results are FP64 (int32 ids) and come back as the
inputs' kind: numpy for numpy, torch for torch (on the inputs' device). CUDA tensors are read on the device by the
gpu backend when it is here (the small cu_seqlens and selections are read on the host), else copied to the host."""
import dataclasses
from typing import Any

from . import _arrays, _core
from .config import Config


@dataclasses.dataclass
class Selection:
    topk_indices: Any  # [Hidx, total_q, top_k] int32, -1 after the valid prefix, the local block last
    block_scores: Any  # [Hidx, total_q, max_blocks] float64, -inf where invisible
    index_lse: Any  # [Hidx, total_q] float64, natural log
    backend: str  # the backend that computed them
    kernel_plan: str  # the kernels it ran ("" for a backend with no choice of kernels)


@dataclasses.dataclass
class Attention:
    out: Any  # [total_q, Hq, Dv] float64
    lse: Any  # [total_q, Hq] float64, natural log
    backend: str
    kernel_plan: str


@dataclasses.dataclass
class Reference:
    topk_indices: Any
    block_scores: Any
    index_lse: Any
    out: Any
    lse: Any
    backend: str
    kernel_plan: str


def _config(config):
    if config is None:
        return Config()
    if not isinstance(config, Config):
        raise ValueError(f"config: expected a msa_oracle.Config, got {type(config).__name__}")
    return config


_METADATA = ("cu_seqlens_q", "cu_seqlens_k", "topk_indices")  # small int32 arrays the module reads on the host


def _placed(named, backend, config):
    """(backend, {name: array} for the module). CUDA tensors are read where they are by the gpu backend (asked for,
    or "auto" with it available here, in index_format native); otherwise they are copied to the host first."""
    on_device = any(_arrays.is_cuda(value) for value in named.values())
    available = dict(backends())
    if on_device and backend in ("auto", "gpu") and available.get("gpu") and config.index_format == "native":
        _arrays.synchronize_cuda(named.values())
        return "gpu", {name: (_arrays.on_host if name in _METADATA else _arrays.for_module)(value, name)
                       for name, value in named.items()}
    return backend, {name: _arrays.on_host(value, name) for name, value in named.items()}


def _results(result, names, example):
    return {name: _arrays.like(result[name], example) for name in names}


def select(index_q, index_k, cu_seqlens_q, cu_seqlens_k, *, config=None, backend="auto") -> Selection:
    """The index branch (SPEC section 2): index_q [total_q, Hidx, Di], index_k [total_k, 1, Di], cu_seqlens_q and
    cu_seqlens_k int32 [B+1]."""
    config = _config(config)
    backend, args = _placed(dict(index_q=index_q, index_k=index_k, cu_seqlens_q=cu_seqlens_q,
                                 cu_seqlens_k=cu_seqlens_k), backend, config)
    result = _core.select(config.to_json(), **args, backend=backend)
    return Selection(**_results(result, ("topk_indices", "block_scores", "index_lse"), index_q),
                     backend=result["backend"], kernel_plan=result["kernel_plan"])


def attend(q, k, v, topk_indices, cu_seqlens_q, cu_seqlens_k, *, config=None, backend="auto",
           topk_layout="head_major") -> Attention:
    """The main branch (SPEC section 3) on any valid selection: q [total_q, Hq, D], k [total_k, Hkv, D], v [total_k,
    Hkv, Dv], topk_indices int32 in `topk_layout` (head_major [Hidx, total_q, top_k], or query_major, transposed
    here), its valid prefix of each row read as a set."""
    from . import layouts

    config = _config(config)
    topk_indices = layouts.topk(topk_indices, layout=topk_layout)
    backend, args = _placed(dict(q=q, k=k, v=v, topk_indices=topk_indices, cu_seqlens_q=cu_seqlens_q,
                                 cu_seqlens_k=cu_seqlens_k), backend, config)
    result = _core.attend(config.to_json(), **args, backend=backend)
    return Attention(**_results(result, ("out", "lse"), q), backend=result["backend"],
                     kernel_plan=result["kernel_plan"])


def reference(q, k, v, index_q, index_k, cu_seqlens_q, cu_seqlens_k, *, config=None, backend="auto") -> Reference:
    """Selection then attention on it: the whole layer's FP64 reference outputs."""
    config = _config(config)
    backend, args = _placed(dict(q=q, k=k, v=v, index_q=index_q, index_k=index_k, cu_seqlens_q=cu_seqlens_q,
                                 cu_seqlens_k=cu_seqlens_k), backend, config)
    result = _core.reference(config.to_json(), **args, backend=backend)
    names = ("topk_indices", "block_scores", "index_lse", "out", "lse")
    return Reference(**_results(result, names, q), backend=result["backend"], kernel_plan=result["kernel_plan"])


@dataclasses.dataclass
class Training:
    dq: Any  # [total_q, Hq, D] float64
    dk: Any  # [total_k, Hkv, D]
    dv: Any  # [total_k, Hkv, Dv]
    dqi: Any  # [total_q, Hidx, Di]
    dki: Any  # [total_k, 1, Di]
    kl_loss: Any  # a float64 scalar (0-d)
    teacher_lse: Any  # [total_q, Hq]: the main branch's lse
    indexer_lse: Any  # [Hidx, total_q]: logsumexp of the index scores over the key set
    backend: str


def training(q, k, v, index_q, index_k, topk_indices, cu_seqlens_q, cu_seqlens_k, dout, dlse=None, *, config=None,
             backend="auto", topk_layout="head_major") -> Training:
    """The training functions of SPEC section 8 on a given selection (held fixed): the main branch's backward (dq,
    dk, dv of sum(dout * out) + sum(dlse * lse)) and the indexer's KL distillation (kl_loss, dqi, dki). dout
    [total_q, Hq, Dv], dlse [total_q, Hq] or None."""
    from . import layouts

    config = _config(config)
    topk_indices = layouts.topk(topk_indices, layout=topk_layout)
    named = dict(q=q, k=k, v=v, index_q=index_q, index_k=index_k, topk_indices=topk_indices,
                 cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, dout=dout)
    if dlse is not None:
        named["dlse"] = dlse[..., None]  # [total_q, Hq, 1]: a view
    backend, args = _placed(named, backend, config)
    dlse = args.pop("dlse", None)
    result = _core.training(config.to_json(), **args, dlse=dlse, backend=backend)
    names = ("dq", "dk", "dv", "dqi", "dki", "kl_loss", "teacher_lse", "indexer_lse")
    return Training(**_results(result, names, q), backend=result["backend"])


def backends():
    """Every backend compiled into the module: [(name, available on this machine)], slowest first."""
    return [tuple(entry) for entry in _core.backends()]

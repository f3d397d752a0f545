"""msa_oracle: the FP64 reference and the judge of MiniMax Sparse Attention (MSA), for kernel authors' tests.

    import msa_oracle as mo
    cfg = mo.Config(block_size=128, top_k=16)
    ref = mo.reference(q, k, v, index_q, index_k, cu_seqlens_q, cu_seqlens_k, config=cfg)
    mo.check(inputs=dict(q=q, ...), outputs=dict(topk_indices=..., out=..., lse=...), config=cfg)

docs/python.md is the guide; SPEC.md section 5 the rules the judge applies."""
from . import golden, layouts
from ._core import Unsupported, version as __version__
from .compute import Attention, Reference, Selection, Training, attend, backends, reference, select, training
from .config import Config
from .judge import OracleMismatch, Verdict, check, msa_tool

__all__ = [
    "Attention", "Config", "OracleMismatch", "Reference", "Selection", "Training", "Unsupported", "Verdict", "attend",
    "backends", "check", "golden", "layouts", "msa_tool", "reference", "select", "training",
]

"""Independent numpy emulations of the MSA dialects of the known implementations (SPEC.md section 9).

Nothing here comes from this project's C++ code. Each dialect is written from the public conventions of the
implementation it imitates, cited where used:

  official           MiniMax-AI/MSA, tests/training/msa_v1/cute/testing.py: `indexer_reference` and
                     `attention_full_reference` are FP32 references that PRE-SCALE q (`q.float() * scale`, then the
                     einsum with k), rank fp32 block maxima (`torch.topk` of the non-local scores, descending), write
                     the local block in the last valid slot (`selected.scatter_(2, valid_count, local)`), return ids
                     head-major [Hidx, total_q, 16] and a natural-log `logsumexp` index_lse over the selected tokens,
                     and fp32 out / lse (`torch.softmax`, `torch.logsumexp`). GQA: `repeat_interleave(Q_HEADS //
                     KV_HEADS, dim=1)`, i.e. head h reads kv head h // G.
  official_fp16_score the same file, `assert_indexer_full_reference(..., use_fp16_score=True)`: block maxima stored as
                     fp16 (`block_scores.to(torch.float16).float()`) and ranked as such (ties by block id,
                     tests/training/msa_v1/cute/test_indexer.py `test_fp16_score_ties_use_block_id_order`),
                     index_lse = logsumexp over selected blocks of (fp16 max + log sum exp(x - exact max)) (SPEC 2).
  official_decode    MiniMax-AI/MSA, tests/inference/msa_v1/attention/decode/reference.py: the decode attention reads
                     `topk_indices.reshape(total_q * kv_heads, -1)` with row // kv_heads = query, row % kv_heads = head,
                     i.e. QUERY-MAJOR [total_q, Hkv, top_k]; scores are `einsum(q, k) * softmax_scale` (scale after the
                     dot), an online softmax per page with a running max, and the output is written in bf16.
  vllm               vllm-project/vllm, vllm/models/minimax_m3/common/ops/index_topk.py: index scores are the plain
                     fp32 `tl.dot(q, k)` with no scale ("decode only consumes block ordering"), init blocks get the
                     sentinel 1e30 and the local window 1e29, then a descending bitonic sort, so the row is init
                     blocks, local blocks, then history by score; ids head-major [num_heads, total_q, topk], -1 after
                     min(topk, valid_blocks). vllm/models/minimax_m3/common/ops/sparse_attn.py: base-2 online softmax
                     (`sm_scale * 1.4426950409`, `tl.exp2`), `p.to(v.dtype)` before the PV product, out in the input
                     dtype, no lse returned to the caller.
  sglang             sgl-project/sglang, python/sglang/srt/layers/attention/minimax_sparse_ops/prefill/
                     flash_with_topk_idx.py: block scores in the log2 domain (`tl.dot(q, k) * sm_scale_log2e`),
                     base-2 online softmax with `lse_i = m_ij + tl.log2(...)`, `p.to(v.dtype)`, ids head-major
                     (msa.py: `topk_idx [num_kv_heads, total_q, topk]`). The ids are a set sorted ascending and the lse
                     is log2-domain (SPEC section 9); the candidate declares `lse_base` 2 and `order` any.
  sglang_sentinel    the same, in the order SGLang's own top-k kernel and its naive reference write (sentinels 1e30
                     init / 1e29 local, descending: forced blocks first), which differs from SPEC section 9's
                     "sorted ids ascending".
  flashinfer         flashinfer, flashinfer/msa_ops/sparse_topk_select.py: `msa_topk_select` returns
                     (total_qo_len, num_qo_heads, topk) int32, QUERY-MAJOR, "Ascending KV-block indices; -1 entries are
                     tail-padded", from `msa_proxy_score` maxima of the UNSCALED causally-masked Q K^T logits; the
                     attention output is written in the input dtype.

Every emulation accumulates in fp32 (numpy float32 matmuls and reductions) from the inputs as stored, and writes a
candidate safetensors file (SPEC section 7) whose __metadata__ declares the dialect's conventions (`topk_layout`,
`lse_base`, `score_precision`, `order`).

Planted bugs are knob overrides of the same emulations (`Knobs`): a buggy kernel is the correct one with one
decision changed, and its attention runs on whatever selection it produced, as a real kernel's would.
"""
import dataclasses
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/

LOG2E = 1.4426950408889634

# safetensors (SPEC section 7), by hand: tests/safetensors_io.py
from safetensors_io import read_safetensors, sha256_of, write_safetensors  # noqa: E402,F401


# ----------------------------------------------------------------------------------------------------
# number formats
# ----------------------------------------------------------------------------------------------------
def bf16_bits(x32):
    """float32 -> bfloat16 bit patterns, round to nearest even (NaN stays NaN, inf stays inf)."""
    b = np.ascontiguousarray(x32, dtype=np.float32).view(np.uint32).astype(np.uint64)
    nan = np.isnan(np.ascontiguousarray(x32, dtype=np.float32))
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    r[nan] = 0x7FC0
    return r


def bf16_to_f32(bits):
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def round_bf16(x32):
    return bf16_to_f32(bf16_bits(x32))


def to_f32(dtype_name, arr):
    """A stored input tensor widened exactly to float32 (F64 inputs are rounded to float32: an fp32 kernel)."""
    if dtype_name == "BF16":
        return bf16_to_f32(arr)
    return np.asarray(arr).astype(np.float32)


def to_f64(dtype_name, arr):
    if dtype_name == "BF16":
        return bf16_to_f32(arr).astype(np.float64)
    return np.asarray(arr).astype(np.float64)


def encode_output(x32, dtype_name):
    """(storage array, dtype) for a float32 result written as dtype_name."""
    if dtype_name == "F32":
        return x32.astype(np.float32)
    if dtype_name == "BF16":
        return bf16_bits(x32)
    if dtype_name == "F16":
        with np.errstate(over="ignore"):
            return x32.astype(np.float16)
    if dtype_name == "F64":
        return x32.astype(np.float64)
    raise ValueError(dtype_name)


# ----------------------------------------------------------------------------------------------------
# a golden case, read
# ----------------------------------------------------------------------------------------------------
class Case:
    """The inputs of one golden case (inputs.safetensors), widened, plus its config and sequence bounds."""

    def __init__(self, name, inputs_path, outputs_path=None):
        self.name = name
        self.inputs_path = inputs_path
        self.outputs_path = outputs_path
        t, meta = read_safetensors(inputs_path)
        self.cfg = json.loads(meta["msa_config"])
        self.dtypes = {k: t[k][0] for k in ("q", "k", "v", "index_q", "index_k")}
        self.x32 = {k: to_f32(t[k][0], t[k][1]) for k in ("q", "k", "v", "index_q", "index_k")}
        self.x64 = {k: to_f64(t[k][0], t[k][1]) for k in ("q", "k", "v", "index_q", "index_k")}
        self.cu_q = t["cu_seqlens_q"][1].astype(np.int64)
        self.cu_k = t["cu_seqlens_k"][1].astype(np.int64)
        self.total_q, self.Hq, self.D = self.x32["q"].shape
        self.total_k = self.x32["k"].shape[0]
        self.Hkv, self.Dv = self.x32["k"].shape[1], self.x32["v"].shape[2]
        self.Hidx, self.Di = self.x32["index_q"].shape[1], self.x32["index_q"].shape[2]
        self.G = self.Hq // self.Hkv
        self.Bk = int(self.cfg["block_size"])
        self.top_k = int(self.cfg["top_k"])
        self.init_blocks = int(self.cfg.get("init_blocks", 0))
        self.local_blocks = int(self.cfg.get("local_blocks", 1))
        self.pooling = self.cfg.get("pooling", "max")
        self.score_format = self.cfg.get("score_format", "native")
        self.softmax_scale = float(self.cfg.get("softmax_scale", self.D ** -0.5))
        self.index_scale = float(self.cfg.get("index_scale", self.Di ** -0.5))
        self.input_dtype = self.dtypes["q"]
        kl = np.diff(self.cu_k)
        self.max_blocks = int(-(-int(kl.max()) // self.Bk)) if len(kl) else 0
        # per query row: sequence, position, local block, visible block count
        self.seq_of = np.zeros(self.total_q, dtype=np.int64)
        self.pos = np.zeros(self.total_q, dtype=np.int64)
        for b in range(len(self.cu_q) - 1):
            q0, q1 = int(self.cu_q[b]), int(self.cu_q[b + 1])
            kln = int(self.cu_k[b + 1] - self.cu_k[b])
            self.seq_of[q0:q1] = b
            self.pos[q0:q1] = kln - (q1 - q0) + np.arange(q1 - q0)
        self.local = self.pos // self.Bk
        self.visible = self.local + 1
        self._golden = None

    def seqs(self):
        for b in range(len(self.cu_q) - 1):
            q0, q1, k0, k1 = (int(self.cu_q[b]), int(self.cu_q[b + 1]), int(self.cu_k[b]), int(self.cu_k[b + 1]))
            if q1 > q0:
                yield b, q0, q1, k0, k1

    def golden(self):
        if self._golden is None:
            t, _ = read_safetensors(self.outputs_path)
            self._golden = {k: v[1] for k, v in t.items()}
        return self._golden

    def forced(self, t):
        """SPEC section 2: (init blocks present, other forced local blocks ascending, local block) of row t."""
        local = int(self.local[t])
        vis = local + 1
        init = [j for j in range(min(self.init_blocks, vis)) if j != local]
        lo = max(0, vis - self.local_blocks)
        locals_ = [j for j in range(lo, vis) if j not in init]
        return init, locals_, local


# ----------------------------------------------------------------------------------------------------
# knobs: one emulation, every decision explicit (a planted bug changes one)
# ----------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Knobs:
    # index branch
    index_scaling: str = "prescale"      # prescale (q * scale, then dot) | none | log2 (dot * scale * log2 e)
    index_causal_offset: int = 0         # bug: keys <= pos + offset count in the index branch
    index_block_causal: bool = False     # bug: the local block's future keys scored (causality by block only)
    score_storage: str = "f32"           # f32 | f16 (use_fp16_score) | bf16 (a declared bf16 indexer)
    order: str = "strict_desc"           # strict_desc | sentinel | ascending
    topk_layout: str = "head_major"      # head_major | query_major (what is written)
    index_lse: str = "none"              # none | f32 | f16_formula
    index_lse_over: str = "selected"     # selected | all_visible (bug)
    index_lse_scaled: bool = True        # bug: False = index_lse of the unscaled dot products
    # main branch
    attention: str = "dense"             # none | dense (torch.softmax, pre-scaled q) | online (running max)
    score_order: str = "prescale"        # prescale | after (scale after the dot)
    exp_base: str = "e"                  # e | 2 (exp2 with scale * log2 e)
    p_round_to_v: bool = False           # p.to(v.dtype) before the PV product (bf16/fp16 inputs)
    softmax_scale_rule: str = "config"   # config | one_over_d (bug: 1/D instead of 1/sqrt(D))
    gqa_map: str = "div"                 # div (h // G) | mod (bug: h % Hkv)
    selection_group_shift: int = 0       # bug: group r attends with the selection of group (r + shift) % Hidx
    v_row_shift: int = 0                 # bug: value row s + shift read for key s
    attn_causal_offset: int = 0          # bug: keys <= pos + offset attended (-1: the diagonal key left out)
    attend_all_visible: bool = False     # bug: attention over every causal key, the selection ignored
    attn_block_causal: bool = False      # bug: the local block attended whole (causality by block only)
    attn_skip_worst_block: bool = False  # bug: the worst-scoring selected history block left out of attention
    kv_offset_from_q: bool = False       # bug: sequence b's keys read from row cu_seqlens_q[b] (not cu_seqlens_k[b])
    index_group_shift: int = 0           # bug: group r ranks with index_q of group (r + shift) % Hidx
    index_lse_base: str = "same"         # same (the lse's base) | e (bug when lse is base 2: index_lse left natural)
    max_shift: bool = True               # bug: False = exp without subtracting the (running) max
    online_rescale: bool = True          # bug: False = running max kept but acc / l never rescaled
    lse_add_max: bool = True             # bug: False = lse = log(l) without adding the max back
    out_dtype: str = "F32"               # F32 | BF16 | F16 | input (the input dtype where bf16/fp16, else F32)
    lse: str = "none"                    # none | e | 2 (the base the written lse is in)
    unwritten_row: int = -1              # bug: query row t of out (and lse) left zero
    # the selection, edited after ranking (bugs; attention runs on the edited selection)
    selection_edit: str = "none"         # none | swap_below | wrong_local | local_first | missing_init | duplicate |
    #                                      beyond_visible | minus1_middle | pad_zero
    swap_gap: float = 5e-3
    edit_rows: int = 3                   # how many rows an edit touches (the hardest: few)
    # what the candidate declares (None = key absent)
    declare: dict = dataclasses.field(default_factory=dict)
    # ids written at all
    write_ids: bool = True


# The dialects: the emulation's knobs for each implementation, and where each applies.
DIALECTS = {
    # MiniMax-AI/MSA tests/training/msa_v1/cute/testing.py (indexer_reference, attention_full_reference)
    "official": dict(
        knobs=dict(index_scaling="prescale", order="strict_desc", index_lse="f32", attention="dense",
                   score_order="prescale", out_dtype="F32", lse="e",
                   declare={"topk_layout": "head_major", "lse_base": "e", "score_precision": "fp32",
                            "order": "strict"}),
        applies=lambda c: c.score_format == "native" and c.pooling == "max"),
    # the official indexer alone: I32 ids + F32 index_lse (indexer.forward), no attention outputs
    "official_indexer": dict(
        knobs=dict(index_scaling="prescale", order="strict_desc", index_lse="f32", attention="none", lse="none",
                   declare={}),
        applies=lambda c: c.score_format == "native" and c.pooling == "max"),
    # the same references, out written by a bf16 / fp16 kernel (the bf16 case is the old false pass)
    "official_bf16_out": dict(
        knobs=dict(index_scaling="prescale", order="strict_desc", index_lse="f32", attention="dense",
                   score_order="prescale", out_dtype="BF16", lse="e",
                   declare={"topk_layout": "head_major", "lse_base": "e", "order": "strict"}),
        applies=lambda c: c.score_format == "native" and c.pooling == "max"),
    "official_f16_out": dict(
        knobs=dict(index_scaling="prescale", order="strict_desc", index_lse="f32", attention="dense",
                   score_order="prescale", out_dtype="F16", lse="e", declare={}),
        applies=lambda c: c.score_format == "native" and c.pooling == "max" and not c.name.startswith(
            "dialect_m3_prefill")),  # (time: the bf16 variant covers the M3 prefill)
    # use_fp16_score (assert_indexer_full_reference(..., use_fp16_score=True))
    "official_fp16_score": dict(
        knobs=dict(index_scaling="prescale", score_storage="f16", order="strict_desc", index_lse="f16_formula",
                   attention="dense", score_order="prescale", out_dtype="F32", lse="e",
                   declare={"topk_layout": "head_major", "score_precision": "fp32"}),
        applies=lambda c: c.score_format == "fp16" and c.pooling == "max"),
    # tests/inference/msa_v1/attention/decode/reference.py: query-major ids, scale after the dot, bf16 out
    "official_decode": dict(
        knobs=dict(index_scaling="prescale", order="strict_desc", topk_layout="query_major", attention="online",
                   score_order="after", out_dtype="BF16", lse="none",
                   declare={"topk_layout": "query_major"}),
        applies=lambda c: c.score_format == "native" and c.pooling == "max"
        and int(np.diff(c.cu_q).max()) <= 16),
    # vllm/models/minimax_m3/common/ops/index_topk.py + sparse_attn.py
    "vllm": dict(
        knobs=dict(index_scaling="none", order="sentinel", attention="online", score_order="after", exp_base="2",
                   p_round_to_v=True, out_dtype="input", lse="none", declare={"order": "any"}),
        applies=lambda c: c.score_format == "native" and c.pooling == "max"),
    # python/sglang/srt/layers/attention/minimax_sparse_ops/prefill/flash_with_topk_idx.py
    "sglang": dict(
        knobs=dict(index_scaling="log2", order="ascending", attention="online", score_order="after",
                   exp_base="2", p_round_to_v=True, out_dtype="input", lse="2",
                   declare={"lse_base": "2", "order": "any"}),
        applies=lambda c: c.score_format == "native" and c.pooling == "max" and not c.name.startswith(
            "dialect_m3_prefill")),  # (time: vllm covers the M3 prefill's exp2 path)
    # SGLang's own Triton top-k (prefill/flash_with_topk_idx.py `_topk_index_kernel`, and the naive reference
    # naive/flash_with_topk_idx.py: INIT_SCORE = 1e30, LOCAL_SCORE = 1e29, torch.topk) writes the sentinel order
    # of vLLM, not an ascending one: the same set, forced blocks first. Both orders are emulated.
    "sglang_sentinel": dict(
        knobs=dict(index_scaling="log2", order="sentinel", attention="online", score_order="after",
                   exp_base="2", p_round_to_v=True, out_dtype="input", lse="2",
                   declare={"lse_base": "2", "order": "any"}),
        applies=lambda c: c.score_format == "native" and c.pooling == "max" and not c.name.startswith("dialect_m3")),
    # msa_topk_select alone: ids only, query-major, ascending (flashinfer/msa_ops/sparse_topk_select.py)
    "flashinfer_topk": dict(
        knobs=dict(index_scaling="none", order="ascending", topk_layout="query_major", attention="none",
                   lse="none", declare={"topk_layout": "query_major", "order": "any"}),
        applies=lambda c: c.score_format == "native" and c.pooling == "max" and not c.name.startswith("dialect_m3")),
    # a port that stores its block scores in bf16 and ranks those, and says so (SPEC 5: score_precision bf16 is
    # taken only when declared); no public port is claimed here, it is the declared path of the rule
    "declared_bf16_scores": dict(
        knobs=dict(index_scaling="prescale", score_storage="bf16", order="strict_desc", attention="online",
                   score_order="after", out_dtype="BF16", lse="none",
                   declare={"score_precision": "bf16"}),
        applies=lambda c: c.score_format == "native" and c.pooling == "max" and not c.name.startswith(
            "dialect_m3_prefill")),
    # flashinfer/msa_ops/sparse_topk_select.py (msa_topk_select), msa_proxy_score
    "flashinfer": dict(
        knobs=dict(index_scaling="none", order="ascending", topk_layout="query_major", attention="online",
                   score_order="after", out_dtype="input", lse="none",
                   declare={"topk_layout": "query_major", "order": "any"}),
        applies=lambda c: c.score_format == "native" and c.pooling == "max" and not c.name.startswith(
            "dialect_m3_prefill")),  # (time)
}


def dialect_knobs(dialect, **overrides):
    base = dict(DIALECTS[dialect]["knobs"])
    declare = dict(base.pop("declare", {}))
    if "declare" in overrides:
        # a dict of key -> value (None removes the key)
        for key, value in overrides.pop("declare").items():
            if value is None:
                declare.pop(key, None)
            else:
                declare[key] = value
    base.update(overrides)
    return Knobs(declare=declare, **base)


# ----------------------------------------------------------------------------------------------------
# the index branch
# ----------------------------------------------------------------------------------------------------
def exact_block_scores(case, causal_offset=0):
    """float64 max-pooled block scores [Hidx, total_q, max_blocks] (-inf where invisible), SPEC section 2."""
    iq, ik = case.x64["index_q"], case.x64["index_k"][:, 0, :]
    M = np.full((case.Hidx, case.total_q, case.max_blocks), -np.inf)
    for b, q0, q1, k0, k1 in case.seqs():
        kln = k1 - k0
        nb = -(-kln // case.Bk)
        pos = case.pos[q0:q1]
        vis = np.arange(nb * case.Bk)[None, :] <= pos[:, None] + causal_offset
        vis &= np.arange(nb * case.Bk)[None, :] < kln
        kpad = np.zeros((nb * case.Bk, case.Di))
        kpad[:kln] = ik[k0:k1]
        for r in range(case.Hidx):
            x = (iq[q0:q1, r] @ kpad.T) * case.index_scale
            x = np.where(vis, x, -np.inf).reshape(q1 - q0, nb, case.Bk)
            M[r, q0:q1, :nb] = x.max(axis=2)
    return M


def index_token_scores32(case, knobs, r, q0, q1, k0, k1):
    """fp32 token scores [ql, kl] of group r in the dialect's scaling, -inf where not causal."""
    iq = case.x32["index_q"][q0:q1, r]
    ik = case.x32["index_k"][k0:k1, 0]
    s32 = np.float32(case.index_scale)
    if knobs.index_scaling == "prescale":        # q.float() * scale, then the einsum (official)
        x = (iq * s32) @ ik.T
    elif knobs.index_scaling == "none":          # plain tl.dot(q, k) (vLLM, FlashInfer proxy score)
        x = iq @ ik.T
    elif knobs.index_scaling == "log2":          # tl.dot(q, k) * sm_scale_log2e (SGLang)
        x = (iq @ ik.T) * np.float32(case.index_scale * LOG2E)
    else:
        raise ValueError(knobs.index_scaling)
    pos = case.pos[q0:q1]
    keys = np.arange(k1 - k0)
    causal = keys[None, :] <= pos[:, None] + knobs.index_causal_offset
    if knobs.index_block_causal:
        causal = keys[None, :] // case.Bk <= pos[:, None] // case.Bk
    return np.where(causal, x, np.float32(-np.inf)).astype(np.float32)


def block_max32(x, Bk):
    ql, kl = x.shape
    nb = -(-kl // Bk)
    pad = np.full((ql, nb * Bk), -np.inf, dtype=np.float32)
    pad[:, :kl] = x
    return pad.reshape(ql, nb, Bk).max(axis=2)


def _rank(cands, scores):
    """cands sorted by score descending, then id ascending."""
    cands = np.asarray(cands, dtype=np.int64)
    if len(cands) == 0:
        return cands
    order = np.lexsort((cands, -np.asarray(scores, dtype=np.float64)))
    return cands[order]


def row_of(case, knobs, t, M_row, local_override=None):
    """One selection row (a python list of valid ids, in the dialect's slot order) from the ranked block scores
    M_row (the dialect's stored scores, -inf where invisible)."""
    init, locals_, local = case.forced(t)
    if local_override is not None:  # the index branch's own (possibly off-by-one) idea of the local block
        local = local_override
        vis = local + 1
        init = [j for j in range(min(case.init_blocks, vis)) if j != local]
        lo = max(0, vis - case.local_blocks)
        locals_ = [j for j in range(lo, vis) if j not in init and j != local]
    else:
        locals_ = [j for j in locals_ if j != local]
    forced = set(init) | set(locals_) | {local}
    vis = local + 1
    cands = [j for j in range(vis) if j not in forced]
    ranked = list(_rank(cands, M_row[cands]))
    take = max(0, case.top_k - len(forced))
    hist = ranked[:take]
    if knobs.order == "strict_desc":      # history by score, init ascending, other local ascending, local last
        row = hist + init + locals_ + [local]
    elif knobs.order == "sentinel":       # 1e30 init, 1e29 local window, then history, one descending sort
        row = init + sorted(locals_ + [local]) + hist
    elif knobs.order == "ascending":      # a set, sorted ascending
        row = sorted(hist + init + locals_ + [local])
    else:
        raise ValueError(knobs.order)
    return row[:case.top_k]


def select(case, knobs):
    """Returns (sel [Hidx, total_q, top_k] int64 head-major with -1 padding, stored scores [Hidx, total_q,
    max_blocks] float32, and the per-row token scores for index_lse)."""
    sel = np.full((case.Hidx, case.total_q, case.top_k), -1, dtype=np.int64)
    stored = np.full((case.Hidx, case.total_q, case.max_blocks), -np.inf, dtype=np.float32)
    exact_max = np.full((case.Hidx, case.total_q, case.max_blocks), -np.inf, dtype=np.float32)
    for b, q0, q1, k0, k1 in case.seqs():
        for r in range(case.Hidx):
            x = index_token_scores32(case, knobs, (r + knobs.index_group_shift) % case.Hidx, q0, q1, k0, k1)
            M = block_max32(x, case.Bk)
            nb = M.shape[1]
            exact_max[r, q0:q1, :nb] = M
            if knobs.score_storage == "f16":
                with np.errstate(over="ignore"):
                    Ms = M.astype(np.float16).astype(np.float32)
            elif knobs.score_storage == "bf16":
                Ms = round_bf16(M)
            else:
                Ms = M
            stored[r, q0:q1, :nb] = Ms
            for i in range(q1 - q0):
                t = q0 + i
                override = None
                if knobs.index_causal_offset:
                    kln = k1 - k0
                    override = min(int(case.pos[t]) + knobs.index_causal_offset, kln - 1) // case.Bk
                row = row_of(case, knobs, t, stored[r, t], override)
                sel[r, t, :len(row)] = row
    return sel, stored, exact_max


# ----------------------------------------------------------------------------------------------------
# selection edits (planted selection bugs), chosen on exact scores
# ----------------------------------------------------------------------------------------------------
def _history(case, t, row):
    init, locals_, local = case.forced(t)
    forced = set(init) | set(locals_) | {local}
    return [j for j in row if j >= 0 and j not in forced], forced


def edit_selection(case, knobs, sel, rank_scores):
    """Applies knobs.selection_edit to at most knobs.edit_rows rows of sel (in place). rank_scores: the exact
    scores the function ranks (float64 block maxima, fp16-rounded under score_format fp16). Returns the rows
    edited, [(r, t, before, after)]."""
    e = knobs.selection_edit
    if e == "none":
        return []
    picks = []  # (priority, r, t, new_row)
    for r in range(case.Hidx):
        for t in range(case.total_q):
            row = [int(j) for j in sel[r, t] if j >= 0]
            full = list(sel[r, t])
            init, locals_, local = case.forced(t)
            vis = int(case.visible[t])
            hist, forced = _history(case, t, row)
            unsel = [j for j in range(vis) if j not in set(row)]
            new = None
            prio = 0.0
            if e == "swap_below" and hist:
                # the worst selected history block, swapped for the best unselected block scoring more than
                # swap_gap below it (the official validator: every selected block >= threshold - 5e-3)
                worst = min(hist, key=lambda j: (rank_scores[r, t, j], -j))
                w = rank_scores[r, t, worst]
                below = [j for j in unsel if j not in forced and rank_scores[r, t, j] < w - knobs.swap_gap]
                if below:
                    u = max(below, key=lambda j: (rank_scores[r, t, j], -j))
                    new = [u if j == worst else j for j in full]
                    prio = w - rank_scores[r, t, u]           # the smallest gaps first: the hardest to see
            elif e == "swap_within" and hist:
                # a control: the worst history block swapped for the best unselected one at most swap_gap below it
                # (a near-tie flip, which the rules allow)
                worst = min(hist, key=lambda j: (rank_scores[r, t, j], -j))
                w = rank_scores[r, t, worst]
                near = [j for j in unsel if j not in forced and w - knobs.swap_gap <= rank_scores[r, t, j] <= w]
                if near:
                    u = max(near, key=lambda j: (rank_scores[r, t, j], -j))
                    new = [u if j == worst else j for j in full]
            elif e == "reverse_history" and len(hist) >= 2:
                # a control: the history entries in reverse slot order (a set; forced slots kept)
                slots = [i for i, j in enumerate(full) if j in set(hist)]
                new = list(full)
                for i, jj in zip(slots, reversed([full[i] for i in slots])):
                    new[i] = jj
            elif e == "wrong_local" and len(unsel) > 0:
                # the local block replaced by the nearest unselected visible block
                u = max(unsel)
                new = [u if j == local else j for j in full]
            elif e == "local_first" and len(row) >= 2 and row[-1] == local:
                # local block moved from the last valid slot to the first (a valid set in the wrong slots)
                n = len(row)
                new = [local] + row[:-1] + list(full[n:])
            elif e == "missing_init" and case.init_blocks > 0 and init and unsel:
                # init block 0 (a forced sink block, not the local one) replaced by the best unselected block
                if 0 in init and 0 != local:
                    u = max(unsel, key=lambda j: (rank_scores[r, t, j], -j))
                    new = [u if j == 0 else j for j in full]
            elif e == "duplicate" and len(hist) >= 2:
                # one history id written twice (the second copy replaces another history id)
                a, b2 = hist[0], hist[1]
                new = [a if j == b2 else j for j in full]
            elif e == "beyond_visible" and hist and vis < case.max_blocks:
                # a history id replaced by the first invisible block (vis): a future block
                new = [vis if j == hist[0] else j for j in full]
            elif e == "pad_zero" and len(row) < case.top_k:
                # the -1 padding written as block 0 (a duplicate, or a block beyond the valid count)
                new = row + [0] * (case.top_k - len(row))
            elif e == "minus1_middle" and len(row) >= 3:
                # a -1 in the middle of the valid prefix (slot 1), the row otherwise intact
                new = list(full)
                new[1] = -1
            if new is not None and list(new) != list(full):
                picks.append((prio, r, t, new))
    if not picks:
        return []
    picks.sort(key=lambda p: (p[0], p[2], p[1]))
    if e not in ("swap_below", "swap_within"):
        # spread the edits: rows far apart (first, middle, last eligible)
        idx = sorted(set(np.linspace(0, len(picks) - 1, min(knobs.edit_rows, len(picks))).round().astype(int)))
        chosen = [picks[i] for i in idx]
    else:
        chosen = picks[:knobs.edit_rows]
    edits = []
    for _, r, t, new in chosen:
        before = [int(j) for j in sel[r, t]]
        if knobs.order == "ascending" and e in ("swap_below", "swap_within", "wrong_local", "missing_init",
                                                 "beyond_visible", "duplicate"):
            # an ascending dialect writes its (wrong) set ascending too: the planted fault is the set alone
            n = sum(1 for j in new if j >= 0)
            new = sorted(new[:n]) + list(new[n:])
        sel[r, t] = new
        edits.append((r, t, before, [int(j) for j in new]))
    return edits


# ----------------------------------------------------------------------------------------------------
# index_lse (the indexer's selected-LSE)
# ----------------------------------------------------------------------------------------------------
def index_lse(case, knobs, sel, stored, exact_max32):
    out = np.full((case.Hidx, case.total_q), np.nan, dtype=np.float32)
    iscale_knobs = knobs if knobs.index_lse_scaled else dataclasses.replace(knobs, index_scaling="none")
    for b, q0, q1, k0, k1 in case.seqs():
        kl = k1 - k0
        kblock = np.arange(kl) // case.Bk
        for r in range(case.Hidx):
            x = index_token_scores32(case, iscale_knobs, r, q0, q1, k0, k1)   # [ql, kl], -inf not causal
            for i in range(q1 - q0):
                t = q0 + i
                if knobs.index_lse_over == "all_visible":
                    blocks = np.arange(int(case.visible[t]))
                else:
                    blocks = np.array(sorted(set(int(j) for j in sel[r, t] if j >= 0)), dtype=np.int64)
                blocks = blocks[blocks * case.Bk < kl]
                if knobs.index_lse == "f32":
                    # torch.logsumexp(scores.masked_fill(~selected_tokens, -inf)) in fp32
                    m = np.isin(kblock, blocks)
                    xs = x[i][m]
                    xs = xs[np.isfinite(xs)]
                    mx = xs.max()
                    out[r, t] = mx + np.log(np.sum(np.exp(xs - mx), dtype=np.float32))
                elif knobs.index_lse == "f16_formula":
                    # per selected block: stored fp16 max + log(sum exp(x - exact max)); then logsumexp over blocks
                    terms = []
                    for bb in blocks:
                        xs = x[i, bb * case.Bk:min((bb + 1) * case.Bk, kl)]
                        xs = xs[np.isfinite(xs)]
                        if xs.size == 0:
                            continue
                        mb = exact_max32[r, t, bb]
                        terms.append(np.float32(stored[r, t, bb]) + np.log(np.sum(np.exp(xs - mb),
                                                                                     dtype=np.float32)))
                    terms = np.array(terms, dtype=np.float32)
                    mx = terms.max()
                    out[r, t] = mx + np.log(np.sum(np.exp(terms - mx), dtype=np.float32))
                else:
                    raise ValueError(knobs.index_lse)
    return out


# ----------------------------------------------------------------------------------------------------
# the main branch
# ----------------------------------------------------------------------------------------------------
def attend(case, knobs, sel):
    """out [total_q, Hq, Dv] float32 and lse [total_q, Hq] float32 (in the knobs' exp base) on selection sel."""
    q32, k32, v32 = case.x32["q"], case.x32["k"], case.x32["v"]
    out = np.zeros((case.total_q, case.Hq, case.Dv), dtype=np.float32)
    lse = np.zeros((case.total_q, case.Hq), dtype=np.float32)
    scale = case.softmax_scale if knobs.softmax_scale_rule == "config" else 1.0 / case.D
    s32 = np.float32(scale)
    s32_log2 = np.float32(scale * LOG2E)
    v_dtype = case.dtypes["v"]
    if knobs.attn_skip_worst_block:
        M64 = exact_block_scores(case)
        sel = sel.copy()
        for r in range(case.Hidx):
            for t in range(case.total_q):
                init, locals_, local = case.forced(t)
                forced = set(init) | set(locals_) | {local}
                hist = [int(j) for j in sel[r, t] if j >= 0 and j not in forced]
                if hist:
                    worst = min(hist, key=lambda j: M64[r, t, j])
                    sel[r, t] = [-1 if j == worst else j for j in sel[r, t]]
    for b, q0, q1, k0, k1 in case.seqs():
        if knobs.kv_offset_from_q:
            k0, k1 = int(case.cu_q[b]), int(case.cu_q[b]) + (k1 - k0)
            if k1 > case.total_k:
                k0, k1 = case.total_k - (k1 - k0), case.total_k
        kl = k1 - k0
        ql = q1 - q0
        pos = case.pos[q0:q1]
        kblock = np.arange(kl) // case.Bk
        causal = np.arange(kl)[None, :] <= pos[:, None] + knobs.attn_causal_offset
        if knobs.attn_block_causal:
            causal = np.arange(kl)[None, :] // case.Bk <= pos[:, None] // case.Bk
        vrows = np.clip(np.arange(kl) + knobs.v_row_shift, 0, kl - 1) + k0
        for h in range(case.Hq):
            g = h // case.G if knobs.gqa_map == "div" else h % case.Hkv
            rsel = (g + knobs.selection_group_shift) % case.Hidx
            rows = sel[rsel, q0:q1]                                     # [ql, top_k]
            insel = np.zeros((ql, kl), dtype=bool)
            for j in range(rows.shape[1]):
                col = rows[:, j]
                insel |= (col[:, None] == kblock[None, :]) & (col[:, None] >= 0)
            mask = (insel | knobs.attend_all_visible) & causal
            qh = q32[q0:q1, h]
            kg = k32[k0:k1, g]
            vg = v32[vrows, g]
            if knobs.exp_base == "2":
                s = (qh @ kg.T) * s32_log2                               # tl.dot(q, k) * sm_scale_log2e
                expf, logf = np.exp2, np.log2
            else:
                if knobs.score_order == "prescale":
                    s = (qh * s32) @ kg.T                                # q.float() * scale, then the einsum
                else:
                    s = (qh @ kg.T) * s32                                # einsum(q, k) * softmax_scale
                expf, logf = np.exp, np.log
            s = np.where(mask, s, np.float32(-np.inf)).astype(np.float32)
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                if knobs.attention == "dense":
                    m = s.max(axis=1) if knobs.max_shift else np.zeros(ql, dtype=np.float32)
                    p = expf(s - m[:, None]).astype(np.float32)
                    l = p.sum(axis=1, dtype=np.float32)
                    pv = round_bf16(p) if (knobs.p_round_to_v and v_dtype == "BF16") else (
                        p.astype(np.float16).astype(np.float32) if (knobs.p_round_to_v and v_dtype == "F16") else p)
                    o = (pv @ vg) / l[:, None]
                    ls = (m if knobs.lse_add_max else 0) + logf(l)
                elif knobs.attention == "online":
                    # flash-style: blocks in ascending order, running max m, rescaled acc and l
                    m = np.full(ql, -np.inf, dtype=np.float32)
                    l = np.zeros(ql, dtype=np.float32)
                    acc = np.zeros((ql, case.Dv), dtype=np.float32)
                    nb = -(-kl // case.Bk)
                    for c in range(nb):
                        c0, c1 = c * case.Bk, min((c + 1) * case.Bk, kl)
                        sc = s[:, c0:c1]
                        live = np.isfinite(sc).any(axis=1)
                        if not live.any():
                            continue
                        if knobs.max_shift:
                            m_new = np.maximum(m, np.where(live, sc.max(axis=1), -np.inf)).astype(np.float32)
                        else:
                            m_new = np.zeros(ql, dtype=np.float32)
                        safe = np.where(np.isfinite(m_new), m_new, np.float32(0)).astype(np.float32)
                        if knobs.online_rescale:
                            corr = expf(np.where(np.isfinite(m), m - safe, -np.inf)).astype(np.float32)
                        else:
                            corr = np.where(np.isfinite(m), np.float32(1), np.float32(0)).astype(np.float32)
                        p = expf(sc - safe[:, None]).astype(np.float32)
                        pv = round_bf16(p) if (knobs.p_round_to_v and v_dtype == "BF16") else (
                            p.astype(np.float16).astype(np.float32) if (knobs.p_round_to_v and v_dtype == "F16")
                            else p)
                        l = (l * corr + p.sum(axis=1, dtype=np.float32)).astype(np.float32)
                        acc = (acc * corr[:, None] + pv @ vg[c0:c1]).astype(np.float32)
                        m = m_new
                    o = acc / l[:, None]
                    ls = (m if knobs.lse_add_max else 0) + logf(l)
                else:
                    raise ValueError(knobs.attention)
            out[q0:q1, h] = o
            lse[q0:q1, h] = ls
    if knobs.unwritten_row >= 0:
        t = min(knobs.unwritten_row, case.total_q - 1)
        out[t] = 0
        lse[t] = 0
    return out, lse


# ----------------------------------------------------------------------------------------------------
# one candidate
# ----------------------------------------------------------------------------------------------------
def emulate(case, knobs):
    """Runs the emulation; returns (tensors for the candidate file, metadata, info)."""
    info = {}
    sel, stored, exact_max = select(case, knobs)
    if knobs.selection_edit != "none":
        M64 = exact_block_scores(case)
        if case.score_format == "fp16":
            with np.errstate(over="ignore"):
                M64 = M64.astype(np.float16).astype(np.float64)
        info["edits"] = edit_selection(case, knobs, sel, M64)
        if knobs.selection_edit in ("swap_below", "swap_within") and info["edits"]:
            gaps = []
            for r, t, before, after in info["edits"]:
                old = [j for j in before if j not in after][0]
                new = [j for j in after if j not in before][0]
                gaps.append(M64[r, t, old] - M64[r, t, new])
            info["edit_note"] = (f"; block scores {min(gaps):.4g} to {max(gaps):.4g} below the block they replace "
                                 f"(float64)")
    tensors = []
    if knobs.write_ids:
        ids = sel.astype(np.int32)
        if knobs.topk_layout == "query_major":
            ids = np.ascontiguousarray(ids.transpose(1, 0, 2))
        tensors.append(("topk_indices", "I32", ids))
    if knobs.index_lse != "none":
        il = index_lse(case, knobs, sel, stored, exact_max)
        if knobs.lse == "2" and knobs.index_lse_base == "same":  # a log2 candidate writes both lse tensors in base 2
            il = (il * np.float32(LOG2E)).astype(np.float32)
        tensors.append(("index_lse", "F32", il))
    if knobs.attention != "none":
        out, lse = attend(case, knobs, sel)
        od = knobs.out_dtype
        if od == "input":
            od = case.input_dtype if case.input_dtype in ("BF16", "F16") else "F32"
        tensors.append(("out", od, encode_output(out, od)))
        if knobs.lse != "none":
            # lse in the base computed: exp2-domain kernels hold a log2 lse; others natural
            if knobs.exp_base == "2" and knobs.lse == "e":
                lse = (lse / np.float32(LOG2E)).astype(np.float32)
            elif knobs.exp_base == "e" and knobs.lse == "2":
                lse = (lse * np.float32(LOG2E)).astype(np.float32)
            tensors.append(("lse", "F32", lse.astype(np.float32)))
    meta = {k: v for k, v in knobs.declare.items() if v is not None}
    meta["backend"] = "dialect-emulation"
    meta["inputs_sha256"] = sha256_of(case.inputs_path)
    info["sel"] = sel
    return tensors, meta, info

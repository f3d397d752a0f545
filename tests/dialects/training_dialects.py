"""Independent numpy emulations of MSA training kernels (SPEC.md section 8): the main-branch backward (dq, dk, dv)
and the indexer's KL distillation (dqi, dki, kl_loss), computed on a GIVEN selection (a training kernel receives
topk_indices as an input; the selection is not differentiable).

Nothing here comes from this project's C++ code. The conventions are those of MiniMax-AI/MSA's training kernels and
their FP32 references (tests/training/msa_v1/cute/testing.py, test_kl_loss.py):

  fp32   `attention_full_reference(..., dout)` and `kl_full_reference` without their final bf16 casts: fp32 tensors
         widened from the inputs, scores from the PRE-SCALED query (`q_rows * scale`, then the einsum), torch.softmax,
         `dp = dout . v`, `ds = P * (dp - Delta)`, `dq = (ds K) * scale`, `dk = (ds^T q) * scale` summed over the
         group's heads (`.view(..., KV_HEADS, Q_HEADS // KV_HEADS, ...).sum(dim=2)`), `dv = P^T dout` likewise; the
         teacher mean `teacher_probability.view(q, INDEX_HEADS, G, k).mean(dim=2)`, the student `softmax(qi * scale
         . ki)`, `dqi = ((rho - pbar) ki) * grad_scale`, `dki = ((rho - pbar)^T qi) * grad_scale` with
         `grad_scale = scale / INDEX_HEADS / total_q`. Gradients written F32, kl_loss F32.
  bf16   the CuTe kernels (`attention` backward, `kl.backward`, which return bf16 `dqi`, `dki`): fp32 accumulation
         from the inputs as given (bf16 in the official tests), the score scaled after the dot, the forward's out
         stored in bf16 (Delta = rowsum(dout * out) from it), P rounded to bf16 for the dV GEMM and dS for the dQ / dK
         GEMMs (FlashAttention-2's backward), `(rho - pbar).to(torch.bfloat16)` before the KL products
         (kl_full_reference, test_kl_single_owner_padded_store_matches_reference), gradients written BF16, kl_loss
         F32.

`dlse` (this project's extension, SPEC 8) adds P * dlse to dS. Planted bugs and controls are knob overrides of the
same emulation (`Knobs`): a buggy kernel is the correct one with one decision changed.
"""
import dataclasses
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import msa_dialects as md  # noqa: E402  (number formats, the forward-case reader, safetensors by hand)

TRAINING_OUTPUTS = ("dq", "dk", "dv", "dqi", "dki", "kl_loss")
KEY_MAJOR = ("dk", "dv", "dki")  # rows are key rows; dq and dqi rows are query rows


# ----------------------------------------------------------------------------------------------------
# a training case: the inputs, dout / dlse, and the reference selection it is computed on
# ----------------------------------------------------------------------------------------------------

def sequential_sum_of_outer_products(a, b):
    """sum_i outer(a[i], b[i]) for a [n, m], b [n, d] -> [m, d], added first to last in their dtype (numpy's cumsum
    adds in order; its sum and matmul do not promise one)."""
    return np.cumsum(a[:, :, None] * b[:, None, :], axis=0)[-1]

class TrainingCase(md.Case):
    def __init__(self, name, inputs_path, reference_path):
        super().__init__(name, inputs_path, reference_path)
        tensors, _ = md.read_safetensors(inputs_path)
        self.dout32 = md.to_f32(*tensors["dout"])                                          # [total_q, Hq, Dv]
        self.dlse32 = md.to_f32(*tensors["dlse"]) if "dlse" in tensors else None           # [total_q, Hq]
        self.selection = self.golden()["topk_indices"].astype(np.int64)                   # [Hidx, total_q, top_k]
        self.kl_rows = self.Hidx * max(self.total_q, 1)                                    # N of SPEC 8


# ----------------------------------------------------------------------------------------------------
# knobs: one emulation, every decision explicit (a planted bug or a control changes one)
# ----------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Knobs:
    arithmetic: str = "fp32"            # fp32 | bf16 (bf16 intermediate GEMM operands, fp32 accumulation)
    grad_dtype: str = "F32"             # the dtype dq, dk, dv, dqi, dki are written in
    kl_dtype: str = "F32"               # the dtype kl_loss is written in
    score_order: str = "prescale"       # prescale: (q * scale) . k | after: (q . k) * scale
    # controls: other orders and formulas the rules allow
    delta_rule: str = "dout_out"        # dout_out: rowsum(dout * out) | p_dp: rowsum(P * dP) (attention_full_reference)
    query_side_scale: str = "after"     # after: scale * (dS K) | before: (scale * dS) K (dq and dk alike)
    key_sum_order: str = "ascending"    # ascending | reversed: the contributors of dk, dv and dki summed last to first
    kl_grad_scaling: str = "after"      # after: ((rho - pbar) ki) * (index_scale / N) | divide_first: g = (rho - pbar)
    #                                     / N, then index_scale * (g ki) (SPEC 8's canonical order)
    # bugs
    use_delta: bool = True              # False: dS = P * dP
    use_dlse: bool = True               # False: dlse ignored
    dk_scaled: bool = True              # False: dk without the softmax scale
    dv_probabilities: str = "normalized"  # normalized: exp(s - lse) | unnormalized: exp(s - max), never divided by l
    key_grad_group_shift: int = 0       # dk, dv of group r written from the heads (and selection) of group r + shift
    dq_head_shift: int = 0              # dq of head h from the dS of the group's head (h + shift) (same key set)
    backward_causal_offset: int = 0     # the backward's key set takes keys <= pos + offset (the forward's is right)
    tail_block_written: bool = True     # False: dk, dv of the keys in a sequence's partial last block left zero
    key_rows_from: str = "cu_seqlens_k"  # cu_seqlens_k | cu_seqlens_q (sequence b's dk, dv written from row
    #                                      cu_seqlens_q[b]: a batch bug)
    unwritten: tuple = ()               # (output name, row): that row of dq, dk, dv, dqi or dki left zero
    pbar_reduce: str = "mean"           # mean | sum (the teacher not averaged over the group's G heads)
    dqi_index_scaled: bool = True       # False: dqi without the index scale
    kl_sign: int = 1                    # -1: (pbar - rho) instead of (rho - pbar)
    kl_divided_by_n: bool = True        # False: kl_loss not divided by N
    kl_key_set: str = "selected"        # selected | all_visible (the student's softmax over every causal key)
    dki_groups: str = "all"             # all | first (dki summed over the rows of group 0 only)


DIALECTS = {
    "fp32": dict(arithmetic="fp32", grad_dtype="F32", kl_dtype="F32", score_order="prescale"),
    "bf16": dict(arithmetic="bf16", grad_dtype="BF16", kl_dtype="F32", score_order="after"),
}


def dialect_knobs(dialect, **overrides):
    return Knobs(**{**DIALECTS[dialect], **overrides})


# ----------------------------------------------------------------------------------------------------
# key sets
# ----------------------------------------------------------------------------------------------------
def causal_keys(case, q0, q1, k0, k1, offset=0):
    """bool [ql, kl]: key s <= pos + offset."""
    return np.arange(k1 - k0)[None, :] <= case.pos[q0:q1, None] + offset


def selected_keys(case, q0, q1, k0, k1, offset=0):
    """bool [Hidx, ql, kl]: key s in a block the (query, group) row selected, and s <= pos + offset."""
    blocks = np.arange(k1 - k0) // case.Bk
    ids = case.selection[:, q0:q1, :]                                   # [Hidx, ql, top_k], -1 padding
    in_selection = (ids[..., None] == blocks[None, None, None, :]).any(axis=2)
    return in_selection & causal_keys(case, q0, q1, k0, k1, offset)[None]


# ----------------------------------------------------------------------------------------------------
# the emulation
# ----------------------------------------------------------------------------------------------------
class Emulation:
    """One training kernel run over a case: the outputs in float32 (before their storage rounding)."""

    def __init__(self, case, knobs):
        self.case, self.knobs = case, knobs
        c = case
        # the inputs as given (widened to fp32); bf16 kernels round their intermediate GEMM operands
        self.operand = md.round_bf16 if knobs.arithmetic == "bf16" else (lambda x: x)
        self.q, self.k, self.v = c.x32["q"], c.x32["k"], c.x32["v"]
        self.index_q, self.index_k = c.x32["index_q"], c.x32["index_k"][:, 0]
        self.dout, self.dlse = c.dout32, c.dlse32
        self.scale = np.float32(c.softmax_scale)
        self.index_scale = np.float32(c.index_scale)
        f32 = np.float32
        self.dq = np.zeros((c.total_q, c.Hq, c.D), f32)
        self.dk = np.zeros((c.total_k, c.Hkv, c.D), f32)
        self.dv = np.zeros((c.total_k, c.Hkv, c.Dv), f32)
        self.dqi = np.zeros((c.total_q, c.Hidx, c.Di), f32)
        self.dki = np.zeros((c.total_k, c.Di), f32)
        self.row_kl = np.zeros((c.total_q, c.Hidx), f32)                     # per (t, r) KL sums
        for _, q0, q1, k0, k1 in c.seqs():
            self.sequence(q0, q1, k0, k1)
        n = f32(c.kl_rows)
        kl = self.row_kl.sum(dtype=f32)
        self.kl_loss = kl / n if knobs.kl_divided_by_n else kl
        if knobs.unwritten:
            name, row = knobs.unwritten
            getattr(self, name)[row] = 0

    # --- scores and the forward -------------------------------------------------------------------
    def scores(self, q0, q1, k0, k1, mask):
        """s [Hq, ql, kl] float32, -inf outside each head's group key set mask [Hidx, ql, kl]."""
        c = self.case
        s = np.empty((c.Hq, q1 - q0, k1 - k0), np.float32)
        for h in range(c.Hq):
            qh, kr = self.q[q0:q1, h], self.k[k0:k1, h // c.G]
            s[h] = (qh * self.scale) @ kr.T if self.knobs.score_order == "prescale" else (qh @ kr.T) * self.scale
        return np.where(np.repeat(mask, c.G, axis=0), s, np.float32(-np.inf))

    def forward(self, q0, q1, k0, k1, s):
        """The forward the backward reuses: row max m and lse [Hq, ql, 1], out [ql, Hq, Dv] (bf16 kernels store it
        in bf16)."""
        c = self.case
        m = s.max(axis=2, keepdims=True)
        e = np.exp(s - m)                                                   # 0 outside the key set
        l = e.sum(axis=2, keepdims=True, dtype=np.float32)
        out = np.empty((q1 - q0, c.Hq, c.Dv), np.float32)
        for h in range(c.Hq):
            out[:, h] = (self.operand(e[h]) @ self.v[k0:k1, h // c.G]) / l[h]
        return m, m + np.log(l), self.operand(out)

    # --- one sequence -----------------------------------------------------------------------------
    def sequence(self, q0, q1, k0, k1):
        kn = self.knobs
        forward_mask = selected_keys(self.case, q0, q1, k0, k1)
        s = self.scores(q0, q1, k0, k1, forward_mask)
        m, lse, out = self.forward(q0, q1, k0, k1, s)
        teacher = np.exp(s - lse)                                           # P of the forward's key set
        backward_mask = selected_keys(self.case, q0, q1, k0, k1, kn.backward_causal_offset)
        if kn.backward_causal_offset:
            s = self.scores(q0, q1, k0, k1, backward_mask)
        p = np.exp(s - lse)                                                 # [Hq, ql, kl]
        self.main_backward(q0, q1, k0, k1, p, np.exp(s - m), out)
        self.indexer_kl(q0, q1, k0, k1, forward_mask, teacher)

    def main_backward(self, q0, q1, k0, k1, p, p_unnormalized, out):
        c, kn = self.case, self.knobs
        dout = self.dout[q0:q1].transpose(1, 0, 2)                          # [Hq, ql, Dv]
        dp = np.stack([dout[h] @ self.v[k0:k1, h // c.G].T for h in range(c.Hq)])   # [Hq, ql, kl]
        if kn.delta_rule == "dout_out":
            delta = (dout * out.transpose(1, 0, 2)).sum(axis=2, keepdims=True, dtype=np.float32)
        else:
            delta = (p * dp).sum(axis=2, keepdims=True, dtype=np.float32)
        centered = dp - delta if kn.use_delta else dp
        if self.dlse is not None and kn.use_dlse:
            centered = centered + self.dlse[q0:q1].T[:, :, None]
        ds = p * centered
        ds_operand = self.operand(ds)
        p_operand = self.operand(p if kn.dv_probabilities == "normalized" else p_unnormalized)
        for h in range(c.Hq):
            r = h // c.G
            source = r * c.G + (h % c.G + kn.dq_head_shift) % c.G
            self.dq[q0:q1, h] = self.query_side(ds_operand[source], self.k[k0:k1, r], self.scale)
        q = self.q[q0:q1].transpose(1, 0, 2)                                # [Hq, ql, D]
        dk = np.empty((k1 - k0, c.Hkv, c.D), np.float32)
        dv = np.empty((k1 - k0, c.Hkv, c.Dv), np.float32)
        for r in range(c.Hkv):
            source = (r + kn.key_grad_group_shift) % c.Hkv
            heads = slice(source * c.G, (source + 1) * c.G)
            dk_scale = self.scale if kn.dk_scaled else np.float32(1)
            dk[:, r] = self.key_side(ds_operand[heads], q[heads], dk_scale)
            dv[:, r] = self.key_side(p_operand[heads], dout[heads], None)
        if not kn.tail_block_written:
            tail = (k1 - k0) % c.Bk
            dk[k1 - k0 - tail:] = dv[k1 - k0 - tail:] = 0
        first = k0 if kn.key_rows_from == "cu_seqlens_k" else q0
        self.dk[first:first + k1 - k0], self.dv[first:first + k1 - k0] = dk, dv

    def query_side(self, grad, keys, scale):
        """scale * (grad keys) or (scale * grad) keys: grad [ql, kl], keys [kl, d]."""
        if self.knobs.query_side_scale == "before":
            return (grad * scale) @ keys
        return (grad @ keys) * scale

    def key_side(self, grad, rows, scale):
        """sum over the contributing (query, head) pairs, one after the other in (t, h) order (or reversed): grad
        [n_heads, ql, kl], rows [n_heads, ql, d] -> [kl, d]; scale None for dv. Not a matrix product: BLAS picks its
        own summation order by CPU, which would make the order knob (and the bits) depend on the machine."""
        flat_grad = grad.transpose(1, 0, 2).reshape(-1, grad.shape[2])      # [(t, h), kl]
        flat_rows = rows.transpose(1, 0, 2).reshape(-1, rows.shape[2])      # [(t, h), d]
        if self.knobs.key_sum_order == "reversed":
            flat_grad, flat_rows = flat_grad[::-1], flat_rows[::-1]
        if scale is None:
            return sequential_sum_of_outer_products(flat_grad, flat_rows)
        if self.knobs.query_side_scale == "before":
            return sequential_sum_of_outer_products(flat_grad, flat_rows * scale)
        return sequential_sum_of_outer_products(flat_grad, flat_rows) * scale

    # --- the indexer's KL -------------------------------------------------------------------------
    def indexer_kl(self, q0, q1, k0, k1, mask, teacher):
        """mask [Hidx, ql, kl]: the selected key sets; teacher [Hq, ql, kl]: the forward's P."""
        c, kn = self.case, self.knobs
        ql, kl = q1 - q0, k1 - k0
        pbar = teacher.reshape(c.Hidx, c.G, ql, kl).sum(axis=1, dtype=np.float32)
        if kn.pbar_reduce == "mean":
            pbar = pbar / np.float32(c.G)
        student_mask = mask if kn.kl_key_set == "selected" else np.broadcast_to(
            causal_keys(c, q0, q1, k0, k1)[None], mask.shape)
        index_q = self.index_q[q0:q1].transpose(1, 0, 2)                    # [Hidx, ql, Di]
        index_k = self.index_k[k0:k1]                                       # [kl, Di]
        x = np.stack([(index_q[r] * self.index_scale) @ index_k.T for r in range(c.Hidx)])
        x = np.where(student_mask, x, np.float32(-np.inf))
        x_max = x.max(axis=2, keepdims=True)
        ilse = x_max + np.log(np.exp(x - x_max).sum(axis=2, keepdims=True, dtype=np.float32))
        log_rho = x - ilse
        rho = np.exp(log_rho)
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(pbar > 0, pbar * (np.log(pbar) - log_rho), np.float32(0))
        self.row_kl[q0:q1] = terms.sum(axis=2, dtype=np.float32).T
        diff = self.operand(np.float32(kn.kl_sign) * (rho - pbar))          # [Hidx, ql, kl], 0 outside the set
        n = np.float32(c.kl_rows)
        if kn.kl_grad_scaling == "after":
            grad, factor = diff, self.index_scale / n
        else:
            grad, factor = diff / n, self.index_scale
        for r in range(c.Hidx):
            dqi_factor = factor if kn.dqi_index_scaled else factor / self.index_scale
            self.dqi[q0:q1, r] = self.query_side(grad[r], index_k, dqi_factor)
        groups = slice(None) if kn.dki_groups == "all" else slice(0, 1)
        self.dki[k0:k1] = self.key_side(grad[groups], index_q[groups], factor)


# ----------------------------------------------------------------------------------------------------
# one candidate
# ----------------------------------------------------------------------------------------------------
def emulate(case, knobs):
    """Returns (tensors for the candidate file, metadata, {name: the stored values widened to float64})."""
    run = Emulation(case, knobs)
    results = {"dq": run.dq, "dk": run.dk, "dv": run.dv, "dqi": run.dqi, "dki": run.dki[:, None, :]}
    tensors = [("topk_indices", "I32", case.selection.astype(np.int32))]
    stored = {}
    for name, value in results.items():
        data = md.encode_output(value, knobs.grad_dtype)
        tensors.append((name, knobs.grad_dtype, data))
        stored[name] = md.to_f64(knobs.grad_dtype, data)
    kl = md.encode_output(np.asarray(run.kl_loss, np.float32), knobs.kl_dtype)
    tensors.append(("kl_loss", knobs.kl_dtype, kl))
    stored["kl_loss"] = md.to_f64(knobs.kl_dtype, kl)
    meta = {"backend": "training-emulation", "inputs_sha256": md.sha256_of(case.inputs_path)}
    return tensors, meta, stored


def touched_rows(base, mutated):
    """{name: the (row, head) pairs whose stored values a planted change altered}: rows are query rows (dq, dqi) or
    key rows (dk, dv, dki); the scalar kl_loss is {()} when it changed."""
    touched = {}
    for name in TRAINING_OUTPUTS:
        changed = base[name] != mutated[name]
        if name == "kl_loss":
            touched[name] = {()} if changed else set()
        else:
            touched[name] = {(int(row), int(head)) for row, head in np.argwhere(changed.any(axis=2))}
    return touched

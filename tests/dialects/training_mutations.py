"""The judge's mutation table for training outputs (SPEC.md section 8): planted bugs as data (training_dialects.Knobs
overrides), each on many (dialect, case) pairs.

Each row: kind; expect, the report lines that must FAIL (dq, dk, dv, dqi, dki, kl_loss), each with a `worst:`
location among the (row, head) pairs the plant changed; or "pass" for a control (a change the rules allow: exit 0,
every line PASS); the knob overrides that plant it; optional flags for `msa check`; the (dialect, case) pairs where
it is planted: every pair but those named, each omission with its reason (the plant changes nothing there, or the
change is not detectable at that precision). training_check.py checks that every plant takes (changes each expected
tensor; a control changes the candidate file).

Dialects: fp32 (F32 gradients) and bf16 (BF16 gradients, kl_loss F32), training_dialects.DIALECTS.
Cases: training_check.CASES.
"""

DIALECTS = ("fp32", "bf16")
CASES = ("prefill_f32", "chunked_bf16", "ragged_f32", "gqa4_dlse_bf16", "decode_dlse_f32", "large_bf16")
# stored bf16 gradients round away last-bit changes of fp32 arithmetic: a bf16 control that changes the order or
# place of one rounding alone leaves these cases' candidate files bit-identical (nothing planted)
BF16_SAME_BITS = [("bf16", "prefill_f32"), ("bf16", "chunked_bf16"), ("bf16", "ragged_f32"),
                  ("bf16", "decode_dlse_f32")]


def every(but=(), dialects=DIALECTS, cases=CASES):
    """The (dialect, case) pairs of `dialects` x `cases` except those in `but`."""
    return [(d, c) for d in dialects for c in cases if (d, c) not in but]


def both(*cases):
    return [(d, c) for d in DIALECTS for c in cases]


MUTATIONS = [
    # --- controls: orders and formulas the rules allow; each must PASS ---------------------------------------
    # dk, dv and dki summed over their contributing (query, head) pairs last to first. Not on bf16 large_bf16
    # either: its reversed fp32 sums round to the same bf16 gradients.
    dict(kind="ok_key_sums_reversed", expect="pass", knobs=dict(key_sum_order="reversed"),
         on=every(but=BF16_SAME_BITS + [("bf16", "large_bf16")])),
    # the scale applied to dS (and to the KL's rho - pbar) before the product instead of after it. Not on
    # large_bf16: D = 16 and N = 64 make both scales powers of two (the same bits either way).
    dict(kind="ok_scale_before_product", expect="pass", knobs=dict(query_side_scale="before"),
         on=every(but=BF16_SAME_BITS + both("large_bf16"))),
    # Delta = rowsum(P * dP), as attention_full_reference computes it, instead of rowsum(dout * out)
    dict(kind="ok_delta_from_p_dp", expect="pass", knobs=dict(delta_rule="p_dp"), on=every()),
    # SPEC 8's canonical KL order: g = (rho - pbar) / N first, then index_scale * (g index_k). Not on large_bf16
    # (N = 64: dividing first is exact).
    dict(kind="ok_kl_divide_first", expect="pass", knobs=dict(kl_grad_scaling="divide_first"),
         on=every(but=BF16_SAME_BITS + both("large_bf16"))),
    # a bf16-output kernel that keeps every intermediate in fp32 (no bf16 out, P, dS or rho - pbar operands)
    dict(kind="ok_fp32_internals_bf16_out", expect="pass", knobs=dict(arithmetic="fp32"),
         on=every(dialects=("bf16",))),
    # a kernel with bf16 intermediates (the bf16 dialect's arithmetic) writing F32 gradients, judged at bf16 because
    # it says so (`msa check --precision bf16`)
    dict(kind="ok_bf16_internals_declared", expect="pass", knobs=dict(arithmetic="bf16"),
         flags=["--precision", "bf16"], on=every(dialects=("fp32",))),
    # --- precision --------------------------------------------------------------------------------------------
    # the same kernel undeclared: F32 gradients are judged at fp32 (SPEC 5), where bf16 intermediates are far off
    # (relative L2 1e-3 to 6e-3 on every gradient, against 1e-7 to 1e-6 for the fp32 kernel)
    dict(kind="bf16_internals_f32_gradients", expect=("dq", "dk", "dv", "dqi", "dki"), knobs=dict(arithmetic="bf16"),
         on=every(dialects=("fp32",))),
    # --- the main branch ------------------------------------------------------------------------------------
    # dS = P * dP: Delta (rowsum(dout * out)) never subtracted
    dict(kind="missing_delta", expect=("dq", "dk"), knobs=dict(use_delta=False), on=every()),
    # dk and dv of group r accumulated from the heads of group r + 1 (on group r + 1's key sets)
    dict(kind="dk_dv_from_next_group", expect=("dk", "dv"), knobs=dict(key_grad_group_shift=1), on=every()),
    # dq of head h from the dS of the next head of its group (every case has G >= 2)
    dict(kind="dq_from_next_head", expect=("dq",), knobs=dict(dq_head_shift=1), on=every()),
    # dlse (this project's extension) ignored: only the cases with dlse
    dict(kind="dlse_ignored", expect=("dq", "dk"), knobs=dict(use_dlse=False),
         on=both("gqa4_dlse_bf16", "decode_dlse_f32")),
    dict(kind="dk_missing_softmax_scale", expect=("dk",), knobs=dict(dk_scaled=False), on=every()),
    # dv from exp(s - max) never divided by the row sum l
    dict(kind="dv_unnormalized_probabilities", expect=("dv",), knobs=dict(dv_probabilities="unnormalized"),
         on=every()),
    # the backward's key set takes key pos + 1 (the forward's lse and out are right): dq gains a term, the key at
    # pos + 1 gains dk and dv (every case has a query whose next key lies in its selected local block)
    dict(kind="backward_causal_off_by_one", expect=("dq", "dv"), knobs=dict(backward_causal_offset=1), on=every()),
    # --- localized bugs: few rows change, so the worst: line must find them -------------------------------------
    # the tail tile skipped: dk and dv of the keys in each sequence's partial last block (k_len % block_size keys)
    # left zero; only cases with such a block (prefill_f32, gqa4_dlse_bf16, large_bf16 have k_len multiples of Bk)
    dict(kind="tail_block_key_grads_unwritten", expect=("dk", "dv"), knobs=dict(tail_block_written=False),
         on=both("chunked_bf16", "ragged_f32", "decode_dlse_f32")),
    # sequence b's dk and dv written from row cu_seqlens_q[b] instead of cu_seqlens_k[b]: differs from the first
    # sequence whose offsets differ (after a sequence with q_len < k_len); only the batches of several sequences
    dict(kind="key_grads_at_query_offset", expect=("dk", "dv"), knobs=dict(key_rows_from="cu_seqlens_q"),
         on=both("ragged_f32", "decode_dlse_f32")),
    # one row never written (zeros): query row 7 of dq or dqi, key row 13 of dki. Not on ragged_f32 and
    # decode_dlse_f32 for dki: no selected key set holds their key row 13 (its dki is 0 already).
    dict(kind="dq_row_unwritten", expect=("dq",), knobs=dict(unwritten=("dq", 7)), on=every()),
    dict(kind="dqi_row_unwritten", expect=("dqi",), knobs=dict(unwritten=("dqi", 7)), on=every()),
    dict(kind="dki_row_unwritten", expect=("dki",), knobs=dict(unwritten=("dki", 13)),
         on=every(but=both("ragged_f32", "decode_dlse_f32"))),
    # --- the indexer's KL -----------------------------------------------------------------------------------
    # the teacher summed over the group's G heads instead of averaged
    dict(kind="pbar_not_averaged", expect=("dqi", "dki", "kl_loss"), knobs=dict(pbar_reduce="sum"), on=every()),
    dict(kind="dqi_missing_index_scale", expect=("dqi",), knobs=dict(dqi_index_scaled=False), on=every()),
    # (pbar - rho) instead of (rho - pbar): the gradients ascend the KL
    dict(kind="kl_sign_flipped", expect=("dqi", "dki"), knobs=dict(kl_sign=-1), on=every()),
    # dki summed over the (query, group) rows of group 0 only (the other groups' index queries never reach it)
    dict(kind="dki_first_group_only", expect=("dki",), knobs=dict(dki_groups="first"), on=every()),
    dict(kind="kl_loss_not_divided_by_n", expect=("kl_loss",), knobs=dict(kl_divided_by_n=False), on=every()),
    # the student's softmax over every causal key, the selection ignored: differs only where a row's visible blocks
    # outnumber top_k (not gqa4_dlse_bf16: 3 blocks, top_k 3). Not bf16 on large_bf16: the unselected keys' rho is
    # small there and the change of dqi (3.5e-4) and dki (8e-3) is inside the bf16 yardstick's own error (naive
    # 5.3e-4 and 1.2e-2).
    dict(kind="kl_student_all_visible", expect=("dqi", "dki", "kl_loss"), knobs=dict(kl_key_set="all_visible"),
         on=every(but=both("gqa4_dlse_bf16") + [("bf16", "large_bf16")])),
]

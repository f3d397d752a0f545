"""The judge's mutation table: planted bugs as data (msa_dialects.Knobs overrides), each on several cases.

Each row: kind, the report line that must FAIL (`selection`, `order`, `layout`, `out`, `lse`, `index_lse`; or
`error` for a bad-input exit 2 whose message names the flag), the dialect emulation it is planted in, the knob
overrides that plant it, and the (dialect, case) pairs where it must be caught. A pair is listed only where the bug
is detectable in principle at that precision; the omissions and their reasons are written next to each row.

Case keys: the `msa golden generate --suite dialects` cases (m3_decode, m3_prefill, init_local, large_logits,
square, fp16_scores, chunked) and this folder's own small inputs (x_*, dialect_check.EXTRA_CASES).
"""

SWAP = dict(selection_edit="swap_below", swap_gap=5e-3, edit_rows=3)

MUTATIONS = [
    # --- controls: changes the rules allow; each must PASS (a judge that fails them is too strict) ----------
    # exactly tied block scores (few-valued inputs): the tie resolved by the higher id instead of the lower one
    dict(kind="ok_tie_flip", expect="pass", knobs=dict(selection_edit="swap_within", swap_gap=0.0, edit_rows=3),
         on=[("official", "x_ties_f32"), ("vllm", "x_ties_f32"), ("official_fp16_score", "x_fp16_ties")]),
    # the history entries in another slot order (a set; only the local block's slot is positional under strict)
    dict(kind="ok_history_reordered", expect="pass", knobs=dict(selection_edit="reverse_history", edit_rows=3),
         on=[("official", "chunked"), ("official", "init_local"), ("official_indexer", "square"),
             ("official_decode", "x_decode_f16")]),
    # a declared bf16 indexer swapping blocks less than 0.02 apart: inside its declared bf16 tau (0.036 to 0.09 on
    # these cases, as the reports print)
    dict(kind="ok_declared_bf16_swap_2e-2", expect="pass",
         knobs=dict(selection_edit="swap_within", swap_gap=2e-2, edit_rows=3),
         on=[("declared_bf16_scores", "m3_decode"), ("declared_bf16_scores", "init_local"),
             ("declared_bf16_scores", "chunked")]),
    # --- the selection ------------------------------------------------------------------------------------------
    # The official validator's band: a selected history block more than 5e-3 below the threshold is wrong
    # (MiniMax-AI/MSA tests/training/msa_v1/cute/testing.py: selected_min >= threshold - 5e-3). The judge's old
    # false pass took tau from bf16 scores when out was BF16; the swap is planted at every output dtype. Not on
    # m3_prefill or fp16_scores: every row there has visible <= top_k (all blocks selected, nothing to swap).
    dict(kind="swap_5e-3_f32_out", expect="selection", knobs=SWAP,
         on=[("official", "m3_decode"), ("official", "chunked"), ("official", "init_local"),
             ("official", "square"), ("official", "x_decode_f16"), ("official_indexer", "x_large_bf16")]),
    dict(kind="swap_5e-3_bf16_out", expect="selection", knobs=SWAP,
         on=[("official_bf16_out", "m3_decode"), ("official_bf16_out", "chunked"),
             ("official_bf16_out", "init_local"), ("official_bf16_out", "square")]),
    dict(kind="swap_5e-3_f16_out", expect="selection", knobs=SWAP,
         on=[("official_f16_out", "m3_decode"), ("official_f16_out", "chunked"), ("official_f16_out", "square"),
             ("official_f16_out", "x_decode_f16")]),
    # one row swapped in the whole case
    dict(kind="swap_5e-3_one_row", expect="selection", knobs=dict(selection_edit="swap_below", edit_rows=1),
         on=[("official", "init_local"), ("flashinfer_topk", "chunked"), ("vllm", "x_large_bf16"),
             ("official_bf16_out", "large_logits")]),
    # a candidate that declares bf16 scores gets a bf16 tau (SPEC 5): a 5e-3 swap is inside it (not a bug by the
    # rule, so not planted), a swap 0.5 below is outside it
    dict(kind="swap_0.5_declared_bf16", expect="selection",
         knobs=dict(selection_edit="swap_below", swap_gap=0.5, edit_rows=3),
         on=[("declared_bf16_scores", "chunked"), ("declared_bf16_scores", "init_local"),
             ("declared_bf16_scores", "square"), ("declared_bf16_scores", "x_decode_f16")]),
    # a smaller swap, 1e-3 below: inside the official validator's 5e-3 band, but ~100x the fp32 tau of SPEC 5
    dict(kind="swap_1e-3", expect="selection", knobs=dict(selection_edit="swap_below", swap_gap=1e-3, edit_rows=3),
         on=[("official", "x_large_bf16"), ("official_bf16_out", "chunked"), ("vllm", "init_local"),
             ("official_indexer", "square"), ("flashinfer", "x_decode_f16")]),
    # the same swap in the ports' set-valued dialects and on fp16-stored scores (5e-3 below on the fp16 values)
    dict(kind="swap_5e-3_ports", expect="selection", knobs=SWAP,
         on=[("vllm", "chunked"), ("sglang", "square"), ("flashinfer", "init_local"), ("vllm", "x_large_bf16"),
             ("official_fp16_score", "x_fp16_decode"), ("official_fp16_score", "x_fp16_ties")]),
    # the local block replaced by the nearest unselected visible block
    dict(kind="wrong_local_block", expect="selection", knobs=dict(selection_edit="wrong_local", edit_rows=3),
         on=[("official", "chunked"), ("vllm", "init_local"), ("sglang", "square"), ("flashinfer", "x_init_f16"),
             ("official_decode", "x_decode_f16")]),
    # init (sink) block 0 dropped for the best unselected block: only cases with init_blocks > 0
    dict(kind="missing_init_block", expect="selection", knobs=dict(selection_edit="missing_init", edit_rows=3),
         on=[("official", "init_local"), ("vllm", "x_init_f16"), ("sglang", "x_large_bf16"),
             ("flashinfer", "init_local"), ("official_fp16_score", "x_fp16_ties")]),
    # the -1 padding written as block 0 (rows with visible < top_k)
    dict(kind="pad_with_zero", expect="selection", knobs=dict(selection_edit="pad_zero", edit_rows=3),
         on=[("official", "chunked"), ("vllm", "init_local"), ("sglang", "x_init_f16"),
             ("official_indexer", "x_fp16_prefill")]),
    # group r ranked with group r+1's index query (ids valid, the wrong ones)
    dict(kind="index_group_shift", expect="selection", knobs=dict(index_group_shift=1),
         on=[("official", "chunked"), ("vllm", "square"), ("flashinfer", "init_local"),
             ("official_indexer", "x_decode_f16")]),
    dict(kind="duplicate_id", expect="selection", knobs=dict(selection_edit="duplicate", edit_rows=3),
         on=[("official", "chunked"), ("vllm", "square"), ("sglang", "init_local"), ("flashinfer", "x_decode_f16")]),
    # a future block (id == visible) in place of a history block
    dict(kind="id_beyond_visible", expect="selection", knobs=dict(selection_edit="beyond_visible", edit_rows=3),
         on=[("official", "init_local"), ("vllm", "chunked"), ("sglang", "square"), ("flashinfer", "large_logits")]),
    dict(kind="minus1_in_middle", expect="selection", knobs=dict(selection_edit="minus1_middle", edit_rows=3),
         on=[("official", "square"), ("vllm", "large_logits"), ("sglang", "chunked"), ("flashinfer", "init_local")]),
    # --- the order and the layout -------------------------------------------------------------------------------
    # a right set with the local block first, declared (or defaulting to) order strict: an ORDER fault
    dict(kind="local_first_strict", expect="order", knobs=dict(selection_edit="local_first", edit_rows=3),
         on=[("official", "chunked"), ("official", "init_local"), ("official", "square"),
             ("official", "large_logits")]),
    # vLLM's sentinel order (init, local, then history) without its `order: any` declaration
    dict(kind="sentinel_order_undeclared", expect="order", knobs=dict(declare={"order": None}),
         on=[("vllm", "chunked"), ("vllm", "init_local"), ("vllm", "x_init_f16"), ("vllm", "square"),
             ("sglang_sentinel", "large_logits")]),
    # query-major ids without the topk_layout declaration where total_q == Hidx: must be the layout error
    dict(kind="query_major_undeclared_square", expect="layout", knobs=dict(declare={"topk_layout": None}),
         on=[("official_decode", "square"), ("flashinfer", "square"), ("official_decode", "x_square_f32"),
             ("flashinfer", "x_square_f32")]),
    # head-major ids declared query-major on total_q == Hidx: the other way round
    dict(kind="head_major_declared_query_major", expect="layout", knobs=dict(declare={"topk_layout": "query_major"}),
         on=[("official", "square"), ("vllm", "x_square_f32")]),
    # query-major ids undeclared where the shape tells (total_q != Hidx): exit 2 naming --topk-layout
    dict(kind="query_major_undeclared_shape", expect="error", knobs=dict(declare={"topk_layout": None}),
         on=[("official_decode", "x_decode_f16"), ("flashinfer", "chunked"), ("flashinfer", "init_local")]),
    # --- the main branch ----------------------------------------------------------------------------------------
    # exp without the running max: overflows to inf / NaN only where logits pass ~88 (fp32 exp range); on the
    # ordinary cases the unshifted softmax is the same function to a few ulps, so it is planted on large logits only
    dict(kind="dropped_running_max", expect="out", knobs=dict(max_shift=False),
         on=[("official", "large_logits"), ("official", "x_large_bf16"), ("vllm", "large_logits"),
             ("sglang", "x_large_bf16"), ("flashinfer", "large_logits")]),
    # the running max kept but acc and l never rescaled when it grows (online kernels)
    dict(kind="online_no_rescale", expect="out", knobs=dict(online_rescale=False),
         on=[("vllm", "chunked"), ("sglang", "init_local"), ("flashinfer", "large_logits"),
             ("official_decode", "square"), ("vllm", "x_decode_f16")]),
    # keys <= pos + 1 attended: no effect on a sequence's last query, so on cases with several queries per sequence
    dict(kind="attn_causal_off_by_one", expect="out", knobs=dict(attn_causal_offset=1),
         on=[("official", "chunked"), ("vllm", "init_local"), ("sglang", "large_logits"),
             ("flashinfer", "x_init_f16"), ("official_decode", "x_decode_f16")]),
    # the diagonal key (s == pos) left out: every query, decode included
    dict(kind="attn_excludes_diagonal", expect="out", knobs=dict(attn_causal_offset=-1),
         on=[("official", "square"), ("vllm", "chunked"), ("official_decode", "x_decode_f16"),
             ("sglang", "large_logits")]),
    # attention over every causal key, the selection ignored (differs where visible > top_k)
    dict(kind="attend_all_visible", expect="out", knobs=dict(attend_all_visible=True),
         on=[("official", "chunked"), ("vllm", "x_decode_f16"), ("flashinfer", "square"),
             ("official_decode", "x_square_f32")]),
    # the local block attended whole: keys past pos inside it (causality checked per block only)
    dict(kind="local_block_unmasked", expect="out", knobs=dict(attn_block_causal=True),
         on=[("official", "chunked"), ("vllm", "init_local"), ("flashinfer", "x_large_bf16"),
             ("declared_bf16_scores", "x_init_f16")]),
    # the worst selected history block left out of the attention (the ids written are right): a 1/16-ish share of
    # the softmax mass, planted where out is BF16 (vLLM, SGLang and the decode kernel write the input dtype)
    dict(kind="attention_skips_a_block", expect="out", knobs=dict(attn_skip_worst_block=True),
         on=[("vllm", "m3_decode"), ("official_decode", "square"), ("sglang", "init_local"),
             ("official_bf16_out", "chunked"), ("flashinfer", "x_decode_f16")]),
    # a batch bug: sequence b's keys and values read from row cu_seqlens_q[b] instead of cu_seqlens_k[b] (differs
    # from the second sequence on, where an earlier sequence has q_len != k_len)
    dict(kind="kv_offset_from_cu_seqlens_q", expect="out", knobs=dict(kv_offset_from_q=True),
         on=[("official", "chunked"), ("vllm", "x_decode_f16"), ("official_decode", "square"),
             ("flashinfer", "x_square_f32")]),
    dict(kind="softmax_scale_1_over_D", expect="out", knobs=dict(softmax_scale_rule="one_over_d"),
         on=[("official", "chunked"), ("vllm", "square"), ("sglang", "init_local"), ("flashinfer", "x_decode_f16")]),
    # head h reads kv head h % Hkv instead of h // G (differs whenever G > 1 and Hkv > 1)
    dict(kind="gqa_map_mod", expect="out", knobs=dict(gqa_map="mod"),
         on=[("official", "chunked"), ("vllm", "init_local"), ("sglang", "square"), ("flashinfer", "x_init_f16")]),
    # group r attends with group r+1's selection (the ids written are right)
    dict(kind="other_group_selection", expect="out", knobs=dict(selection_group_shift=1),
         on=[("official", "chunked"), ("vllm", "square"), ("sglang", "init_local"), ("flashinfer", "large_logits")]),
    dict(kind="value_rows_shifted", expect="out", knobs=dict(v_row_shift=1),
         on=[("official", "chunked"), ("vllm", "large_logits"), ("sglang", "square"), ("flashinfer", "init_local")]),
    # one query row of out (and lse) never written (zeros)
    dict(kind="row_unwritten", expect="out", knobs=dict(unwritten_row=2),
         on=[("official", "chunked"), ("vllm", "square"), ("sglang", "init_local"), ("flashinfer", "x_decode_f16"),
             ("official_decode", "square")]),
    # --- lse ----------------------------------------------------------------------------------------------------
    # lse = log(l): the max never added back
    dict(kind="lse_missing_max", expect="lse", knobs=dict(lse_add_max=False),
         on=[("official", "chunked"), ("sglang", "init_local"), ("official", "square"), ("sglang", "large_logits")]),
    # a natural-log lse declared base 2
    dict(kind="natural_lse_declared_log2", expect="lse", knobs=dict(declare={"lse_base": "2"}),
         on=[("official", "chunked"), ("official", "init_local"), ("official", "large_logits"),
             ("official", "square")]),
    # SGLang's log2 lse without its lse_base declaration
    dict(kind="log2_lse_declared_natural", expect="lse", knobs=dict(declare={"lse_base": None}),
         on=[("sglang", "chunked"), ("sglang", "init_local"), ("sglang", "large_logits"), ("sglang", "square"),
             ("sglang", "x_decode_f16"), ("sglang_sentinel", "x_init_f16")]),
    # --- index_lse ----------------------------------------------------------------------------------------------
    # lse written base 2 (declared), index_lse left natural
    dict(kind="index_lse_base_mixed", expect="index_lse",
         knobs=dict(lse="2", index_lse_base="e", declare={"lse_base": "2"}),
         on=[("official", "chunked"), ("official", "init_local"), ("official", "x_decode_f16")]),
    # over every visible block instead of the selected ones (differs where visible > top_k). Not on large_logits:
    # there the unselected blocks' terms are exp(-thousands) = 0 in fp32, the same index_lse to the last bit.
    dict(kind="index_lse_all_visible", expect="index_lse", knobs=dict(index_lse_over="all_visible"),
         on=[("official", "chunked"), ("official", "init_local"), ("official", "square"),
             ("official", "x_decode_f16"), ("official_indexer", "x_init_f16")]),
    # the index scale forgotten in index_lse (the ranking is unchanged: the scale is positive)
    dict(kind="index_lse_unscaled", expect="index_lse", knobs=dict(index_lse_scaled=False),
         on=[("official", "chunked"), ("official", "init_local"), ("official", "square"),
             ("official_indexer", "x_decode_f16"), ("official_indexer", "large_logits")]),
    # key pos + 1 scored by the index branch: index_lse takes one future key; not on decode-only cases (q_len 1:
    # pos + 1 is past the sequence, nothing changes)
    dict(kind="index_causal_off_by_one", expect="index_lse", knobs=dict(index_causal_offset=1),
         on=[("official", "chunked"), ("official", "init_local"), ("official", "large_logits"),
             ("official", "x_init_f16")]),
    # the index branch scores the local block's future keys: index_lse takes them (the local block is forced, so
    # the selection is unchanged); not on decode-only cases, where no key of the local block lies past pos
    dict(kind="index_local_block_unmasked", expect="index_lse", knobs=dict(index_block_causal=True),
         on=[("official", "chunked"), ("official", "init_local"), ("official_indexer", "x_large_bf16"),
             ("official_fp16_score", "x_fp16_prefill")]),
    # use_fp16_score's index_lse computed as a plain fp32 logsumexp (the exact maxima, not the fp16 ones): off by
    # up to |fp16(M) - M| ~ 1e-3 where index_lse ~ 5, far above fp32 error. (Ranking by fp32 instead of fp16 is
    # NOT in the table: rounding is monotonic, so it changes only rows whose fp16 values tie at the threshold,
    # which the selection rule passes as near-ties by design.) Not on x_fp16_ties: its few-valued scores are
    # multiples of 1/4, exact in fp16, so fp16(M) == M and both formulas give the same index_lse.
    dict(kind="fp16_index_lse_native", expect="index_lse", knobs=dict(index_lse="f32"),
         on=[("official_fp16_score", "fp16_scores"), ("official_fp16_score", "x_fp16_decode"),
             ("official_fp16_score", "x_fp16_prefill")]),
]

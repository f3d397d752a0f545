#!/usr/bin/env python3
"""Two implementations judged in their own dialects (docs/checking-your-kernel.md, sections 4 and 5).

vllm: a selection in vLLM's sentinel order (init blocks scored 1e30, local blocks 1e29, then a descending sort,
      so the forced blocks come FIRST) with bf16 attention, on a case with one init block and two forced local
      blocks: under the default order (strict: the local block in the last valid slot) every reordered row is an
      ORDER fault, not an invalid row; declared `order = any` in the file's metadata, it passes.
fp16: an indexer in the official use_fp16_score mode (block maxima stored as fp16 and ranked so, fp32 arithmetic,
      index_lse = logsumexp over the selected blocks of fp16(max) + log(sum exp(x - max))), writing its ids and an
      F32 index_lse, on a case whose msa_config says score_format fp16.

Usage: MSA=path/to/msa judge_two_dialects.py vllm|fp16   (run in a scratch directory: it writes its files there)
Prints what `msa check` prints; exits 0 when every verdict was the expected one.
Every number is computed deterministically (Python's double arithmetic, rounded to fp32 wherever a kernel would
store an fp32), so the printed reports are the same on every machine.
"""
import json
import math
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_a_bf16_kernel import bf16_bits, read_safetensors, write_safetensors  # noqa: E402

MSA = os.environ.get("MSA", "msa")


def f32(x):
    """x rounded to the nearest fp32, as a Python float."""
    return float(np.float32(x))


def golden(suite, prefix):
    """Generates `suite` into ./goldens-SUITE once and returns the inputs path of its case named PREFIX*."""
    out = f"goldens-{suite}"
    if not os.path.isdir(out):
        subprocess.run([MSA, "golden", "generate", "--suite", suite, "--dir", out], check=True, stdout=subprocess.DEVNULL)
    (name,) = [n for n in sorted(os.listdir(out)) if n.startswith(prefix)]
    return os.path.join(out, name)


def check(case, outputs, *flags):
    print(f"$ msa check --inputs {case}/inputs.safetensors --outputs {outputs} {' '.join(flags)}".rstrip())
    sys.stdout.flush()
    return subprocess.run([MSA, "check", "--inputs", f"{case}/inputs.safetensors", "--outputs", outputs, *flags]).returncode


# --- vLLM: the sentinel order -----------------------------------------------------------------------------------
def vllm():
    case = golden("dialects", "dialect_init_local")
    config = json.loads(read_safetensors(f"{case}/inputs.safetensors")[1]["msa_config"])
    reference, _ = read_safetensors(f"{case}/outputs.safetensors")
    ids = reference["topk_indices"].copy()  # [Hidx, total_q, top_k], canonical slots: ranked, init, local
    init, local_blocks = config["init_blocks"], config["local_blocks"]
    for row in ids.reshape(-1, ids.shape[-1]):
        valid = [b for b in row if b >= 0]
        local = max(valid)
        forced = sorted(b for b in valid if b < init or b > local - local_blocks)
        history = [b for b in valid if b not in forced]  # already by score descending
        row[: len(valid)] = forced + history
    out = bf16_bits(reference["out"])
    write_safetensors("vllm.safetensors", {"topk_indices": ("I32", ids), "out": ("BF16", out)})
    strict = check(case, "vllm.safetensors")
    print()
    write_safetensors("vllm_any.safetensors", {"topk_indices": ("I32", ids), "out": ("BF16", out)},
                      metadata={"order": "any"})
    declared = check(case, "vllm_any.safetensors")
    return strict == 1 and declared == 0


# --- the official use_fp16_score indexer --------------------------------------------------------------------------
def fp16_indexer():
    case = golden("smoke", "fp16_scores_ties")
    tensors, metadata = read_safetensors(f"{case}/inputs.safetensors")
    config = json.loads(metadata["msa_config"])
    iq, ik = tensors["index_q"], tensors["index_k"][:, 0, :]
    cu_q, cu_k = tensors["cu_seqlens_q"], tensors["cu_seqlens_k"]
    hidx, di = iq.shape[1], iq.shape[2]
    bk, top_k, init = config["block_size"], config["top_k"], config["init_blocks"]
    scale = f32(1 / math.sqrt(di))
    total_q = iq.shape[0]
    ids = np.full((hidx, total_q, top_k), -1, dtype=np.int32)
    index_lse = np.zeros((hidx, total_q), dtype=np.float64)
    for b in range(len(cu_q) - 1):
        q_len, k_len = cu_q[b + 1] - cu_q[b], cu_k[b + 1] - cu_k[b]
        for i in range(q_len):
            t, pos = cu_q[b] + i, k_len - q_len + i
            local = pos // bk
            for r in range(hidx):
                x = []  # fp32 token scores: a sequential fp32 dot, then the scale
                for s in range(pos + 1):
                    acc = 0.0
                    for d in range(di):
                        acc = f32(acc + f32(float(iq[t, r, d]) * float(ik[cu_k[b] + s, d])))
                    x.append(f32(acc * scale))
                block_max = [max(x[blk * bk:(blk + 1) * bk]) for blk in range(local + 1)]
                stored = [float(np.float16(m)) for m in block_max]  # scores stored (and ranked) as fp16
                forced = list(range(min(init, local))) + [local]
                history = sorted((blk for blk in range(local + 1) if blk not in forced), key=lambda blk: (-stored[blk], blk))
                chosen = history[: top_k - len(forced)] + forced
                ids[r, t, : len(chosen)] = chosen
                terms = []
                for blk in sorted(chosen):
                    shifted = sum(math.exp(v - block_max[blk]) for v in x[blk * bk:(blk + 1) * bk])
                    terms.append(f32(stored[blk] + f32(math.log(f32(shifted)))))
                m = max(terms)
                index_lse[r, t] = f32(m + f32(math.log(f32(sum(math.exp(v - m) for v in terms)))))
    write_safetensors("fp16_indexer.safetensors", {"topk_indices": ("I32", ids), "index_lse": ("F32", index_lse)})
    return check(case, "fp16_indexer.safetensors") == 0


if __name__ == "__main__":
    dialect = sys.argv[1] if len(sys.argv) > 1 else ""
    runs = {"vllm": vllm, "fp16": fp16_indexer}
    if dialect not in runs:
        sys.exit("usage: judge_two_dialects.py vllm|fp16")
    sys.exit(0 if runs[dialect]() else 1)

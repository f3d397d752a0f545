#!/usr/bin/env python3
"""Check "your kernel" against the oracle, the way an outside implementation would (docs/checking-your-kernel.md).

1. `msa golden generate` writes golden cases: inputs + FP64 reference outputs (safetensors, SPEC section 7).
2. This script loads one case's inputs with numpy, runs "your kernel" -- here a numpy version of MSA written the
   way bf16 kernels are: bf16 inputs, fp32 accumulation of every dot product (index and main scores stay fp32),
   softmax in fp32, the probabilities rounded to bf16 for the product with V, out stored as BF16 and lse as F32
   -- and writes its outputs.
3. `msa check` judges them: the selection against the fp32 score precision (every known kernel accumulates
   index scores in fp32: near-tie flips within tau are counted, not failed), out at bf16 and lse at fp32 (each
   output at its own dtype), within 2x the error of a naive evaluation at that precision.

Usage: check_a_bf16_kernel.py --msa PATH/TO/msa --workdir DIR
Prints the oracle's report; exits with msa check's code (0 pass, 1 fail, 2 bad input).
"""
import argparse
import json
import os
import struct
import subprocess
import sys

import numpy as np

DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I32": "<i4", "I64": "<i8"}


# --- the safetensors format: u64 header length, JSON header, raw little-endian C-order data ---------------
def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (header_length,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + header_length])
    metadata = header.pop("__metadata__", {})
    data = blob[8 + header_length:]
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        array = np.frombuffer(data[begin:end], dtype=DTYPES[entry["dtype"]]).reshape(entry["shape"])
        if entry["dtype"] == "BF16":  # bf16 is the top half of a float32
            array = (array.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = array.astype(np.float64) if array.dtype.kind == "f" else array
    return tensors, metadata


def write_safetensors(path, tensors, metadata=None):
    """tensors: {name: (dtype, array)}; BF16 arrays are given as uint16 bit patterns. metadata: {str: str}."""
    header, chunks, offset = ({"__metadata__": metadata} if metadata else {}), [], 0
    for name, (dtype, array) in tensors.items():
        raw = np.ascontiguousarray(array, dtype=DTYPES[dtype]).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


# --- bf16 helpers ------------------------------------------------------------------------------------------
def bf16_bits(x):
    """float -> bf16 bit patterns, round to nearest even."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def bf16(x):
    """Round to bf16, returned as float32."""
    return (bf16_bits(x).astype(np.uint32) << 16).view(np.float32)


# --- "your kernel": MSA on bf16 inputs with fp32 accumulation, bf16 probabilities and out ----------------------
def my_bf16_msa(t, config):
    q, k, v = bf16(t["q"]), bf16(t["k"]), bf16(t["v"])
    index_q, index_k = bf16(t["index_q"]), bf16(t["index_k"][:, 0, :])
    cu_q, cu_k = t["cu_seqlens_q"], t["cu_seqlens_k"]
    hq, hkv, dim = q.shape[1], k.shape[1], q.shape[2]
    bk, top_k = config["block_size"], config["top_k"]
    scale = np.float32(1 / np.sqrt(dim))
    index_scale = np.float32(1 / np.sqrt(index_q.shape[2]))
    total_q = q.shape[0]
    topk = np.full((hkv, total_q, top_k), -1, dtype=np.int32)
    out = np.zeros((total_q, hq, v.shape[2]), dtype=np.float32)
    lse = np.zeros((total_q, hq), dtype=np.float32)
    for b in range(len(cu_q) - 1):
        q_len, k_len = cu_q[b + 1] - cu_q[b], cu_k[b + 1] - cu_k[b]
        keys = slice(cu_k[b], cu_k[b + 1])
        for i in range(q_len):
            row, pos = cu_q[b] + i, k_len - q_len + i
            local = pos // bk
            for r in range(hkv):
                # index branch: fp32 token scores, block max, top-(k-1) history blocks + the local block last
                scores = index_k[keys][: pos + 1] @ index_q[row, r] * index_scale
                block_max = [scores[blk * bk:(blk + 1) * bk].max() for blk in range(local + 1)]
                history = sorted(range(local), key=lambda blk: (-block_max[blk], blk))[: top_k - 1]
                chosen = history + [local]
                topk[r, row, : len(chosen)] = chosen
                # main branch over the chosen blocks, for every query head of group r
                token_ids = np.concatenate([np.arange(blk * bk, min((blk + 1) * bk, pos + 1)) for blk in sorted(chosen)])
                for h in range(r * (hq // hkv), (r + 1) * (hq // hkv)):
                    s = k[keys][token_ids, r] @ q[row, h] * scale
                    m = s.max()
                    p = np.exp(s - m, dtype=np.float32)
                    out[row, h] = bf16(bf16(p / p.sum()) @ v[keys][token_ids, r])
                    lse[row, h] = m + np.log(p.sum())
    return topk, out, lse


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--msa", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--case", default="chunked_b2_hq4_hkv1_d64_bs32_k4_i0_max_bf16")
    args = parser.parse_args()
    goldens = os.path.join(args.workdir, "goldens")
    subprocess.run([args.msa, "golden", "generate", "--suite", "smoke", "--dir", goldens], check=True,
                   stdout=subprocess.DEVNULL)

    inputs = os.path.join(goldens, args.case, "inputs.safetensors")
    tensors, metadata = read_safetensors(inputs)
    topk, out, lse = my_bf16_msa(tensors, json.loads(metadata["msa_config"]))

    theirs = os.path.join(args.workdir, "my_kernel_outputs.safetensors")
    write_safetensors(theirs, {"topk_indices": ("I32", topk), "out": ("BF16", bf16_bits(out)), "lse": ("F32", lse)})
    return subprocess.run([args.msa, "check", "--inputs", inputs, "--outputs", theirs]).returncode


if __name__ == "__main__":
    sys.exit(main())

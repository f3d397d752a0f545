"""safetensors by hand (SPEC section 7: an 8-byte little-endian header length, a JSON header, raw little-endian
C-order data), for the project's numpy tests: the independent model and the dialect emulations read and write the
file contract through these, not through the C++ code they check."""
import hashlib
import json
import struct

import numpy as np

_NP_OF = {"F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
          "BF16": np.dtype("<u2"), "I32": np.dtype("<i4"), "I64": np.dtype("<i8"), "U8": np.dtype("u1")}


def read_safetensors(path):
    """Returns ({name: (dtype_string, ndarray)}, metadata)."""
    with open(path, "rb") as f:
        data = f.read()
    (hlen,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + hlen].decode("utf-8"))
    meta = header.pop("__metadata__", {}) or {}
    base = 8 + hlen
    out = {}
    for name, info in header.items():
        dt, shape, (b, e) = info["dtype"], info["shape"], info["data_offsets"]
        npdt = _NP_OF[dt]
        n = int(np.prod(shape, dtype=np.int64))
        if e - b != n * npdt.itemsize or base + e > len(data):
            raise ValueError(f"{path}: tensor {name}: bad data_offsets {b},{e} for {dt}{shape}")
        out[name] = (dt, np.frombuffer(data, dtype=npdt, count=n, offset=base + b).reshape(shape))
    return out, meta


def write_safetensors(path, tensors, metadata):
    """tensors: list of (name, dtype_string, ndarray already in the storage dtype; BF16 as uint16 bits).
    metadata: {str: str}. Header padded with spaces to a multiple of 8 bytes."""
    header = {"__metadata__": {k: str(v) for k, v in metadata.items()}}
    blobs, off = [], 0
    for name, dt, arr in tensors:
        raw = np.ascontiguousarray(arr).astype(_NP_OF[dt], copy=False).tobytes(order="C")
        header[name] = {"dtype": dt, "shape": [int(s) for s in arr.shape], "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * ((-len(hjson)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for raw in blobs:
            f.write(raw)


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()

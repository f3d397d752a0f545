"""Golden suites from Python: load one (every file's SHA-256 checked against MANIFEST.json first), read a case's
inputs and expected outputs as numpy arrays or torch tensors, generate one, or keep one generated on first use in a
cache directory keyed by the package's version (what the pytest plugin does)."""
import dataclasses
import fcntl
import hashlib
import json
import os

import numpy as np

from . import _arrays, _core
from .config import Config

MANIFEST = "MANIFEST.json"


class GoldenError(ValueError):
    """A golden directory that cannot be trusted: a manifest that does not parse, a file missing or changed."""


def _read(path):
    """{name: numpy array} of a safetensors file (bf16 as ml_dtypes bf16 when it is installed) and its metadata."""
    tensors, metadata = _core.read_safetensors(os.fspath(path))
    return {name: (_arrays.bf16_array(array) if dtype == "BF16" else array) for name, dtype, array in tensors}, metadata


def _as_kind(array, like):
    """`array` as the kind of `like` (None: numpy), on its device; bf16 stays bf16."""
    if like is None or not _arrays.is_torch(like):
        return array
    torch = _arrays._torch()
    if array.dtype == np.uint16 or array.dtype == _arrays._BF16:  # bf16 (bit patterns without ml_dtypes)
        tensor = torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    else:
        tensor = torch.from_numpy(array)
    return tensor.to(like.device)


@dataclasses.dataclass
class Case:
    """One golden case: its name, config, lengths [(q_len, k_len)], input dtype and seed, and its two files."""

    name: str
    config: Config
    lengths: list
    dtype: str
    seed: int
    directory: str

    def inputs(self, like=None) -> dict:
        """q, k, v, index_q, index_k, cu_seqlens_q, cu_seqlens_k (and a training case's dout, dlse): numpy arrays, or
        torch tensors on `like`'s device."""
        tensors, _ = _read(os.path.join(self.directory, "inputs.safetensors"))
        return {name: _as_kind(array, like) for name, array in tensors.items()}

    def expected(self, like=None) -> dict:
        """The FP64 reference outputs: topk_indices, block_scores, index_lse, out, lse (and a training case's dq, dk,
        dv, dqi, dki, kl_loss)."""
        tensors, _ = _read(os.path.join(self.directory, "outputs.safetensors"))
        return {name: _as_kind(array, like) for name, array in tensors.items()}


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def load(directory) -> list:
    """The cases of the golden suite in `directory`, in manifest order, after checking the SHA-256 of every file
    MANIFEST.json lists (GoldenError names the first file missing or changed)."""
    directory = os.fspath(directory)
    manifest_path = os.path.join(directory, MANIFEST)
    try:
        with open(manifest_path) as f:
            manifest = json.load(f)
    except (OSError, ValueError) as error:
        raise GoldenError(f"{manifest_path}: cannot read the manifest: {error}") from None
    if manifest.get("format") != "msa-golden" or not isinstance(manifest.get("cases"), list):
        raise GoldenError(f"{manifest_path}: not an msa golden manifest (format {manifest.get('format')!r})")
    cases = []
    for entry in manifest["cases"]:
        case_dir = os.path.join(directory, entry["name"])
        for file_name, want in entry["files"].items():
            path = os.path.join(case_dir, file_name)
            if not os.path.exists(path):
                raise GoldenError(f"{path}: missing (MANIFEST.json lists it)")
            got = _sha256(path)
            if got != want:
                raise GoldenError(f"{path}: SHA-256 {got} but MANIFEST.json records {want}: the file changed")
        _, metadata = _read(os.path.join(case_dir, "inputs.safetensors"))
        cases.append(Case(name=entry["name"], config=Config.from_json(metadata["msa_config"]),
                          lengths=[tuple(pair) for pair in entry["lengths"]], dtype=entry["dtype"], seed=entry["seed"],
                          directory=case_dir))
    return cases


def case_names(suite="smoke") -> list:
    """The names of a suite's cases (a name of _core.golden_suites: "smoke", "full", "dialects", "training", "long"), in
    order."""
    return list(_core.golden_case_names(suite))


def _shard(shard):
    """(index, count) of shard=None (the whole run), "I/N" or (I, N)."""
    if shard is None:
        return 0, 1
    if isinstance(shard, str):
        index, slash, count = shard.partition("/")
        if not slash or not index.strip().isdigit() or not count.strip().isdigit():
            raise ValueError(f"shard={shard!r}: must be \"I/N\" (shard I of N, counted from 0) or (I, N)")
        return int(index), int(count)
    index, count = shard
    return int(index), int(count)


def generate(directory, suite="smoke", names=None, progress=None, shard=None, backend="reference", resume=False):
    """Writes the suite's cases (or those named) under `directory`, as `msa golden generate` does: MANIFEST.json for
    the whole run; for shard="I/N" (or (I, N)) only the cases at positions p with p % N == I and the record
    SHARD-I-of-N.json, which merge() reads. backend: the exact backend that computes the outputs (every exact
    backend gives the reference's bits and the same files); resume: keep the cases an earlier run of this shard
    finished, once their files' SHA-256 match its record. progress(index, count, name, seconds) after each case."""
    index, count = _shard(shard)
    on_case = None if progress is None else lambda i, n, name, seconds, reused: progress(i, n, name, seconds)
    _core.generate_golden(os.fspath(directory), suite, None if names is None else list(names), on_case,
                          shard_index=index, shard_count=count, backend=backend, resume=resume)


def merge(directory, shard_directories) -> str:
    """Merges the shards generated into `shard_directories` into `directory` (which may be one of them), as `msa
    golden merge` does: MANIFEST.json byte-identical to the whole run's. Refuses (GoldenError) shards that overlap,
    are missing or incomplete, whose files changed, or that come from another version or suite. Returns a summary."""
    try:
        return _core.merge_golden(os.fspath(directory), [os.fspath(d) for d in shard_directories])
    except ValueError as error:
        raise GoldenError(str(error)) from None


def cache_directory() -> str:
    """Where generated suites are kept: $MSA_ORACLE_CACHE, else $XDG_CACHE_HOME/msa_oracle, else ~/.cache/msa_oracle."""
    root = os.environ.get("MSA_ORACLE_CACHE")
    if not root:
        root = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "msa_oracle")
    return root


def cached(suite="smoke", progress=None) -> str:
    """The directory of `suite` generated by this version of the package, generated on first use (one process at a
    time: others wait on a lock, then find it)."""
    directory = os.path.join(cache_directory(), _core.version, suite)
    os.makedirs(os.path.dirname(directory), exist_ok=True)
    with open(directory + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(os.path.join(directory, MANIFEST)):
            generate(directory, suite, progress=progress)
    return directory

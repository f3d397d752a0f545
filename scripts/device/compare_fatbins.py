#!/usr/bin/env python3
"""Compares the device code of two builds of gpu/ (or a build against a saved baseline).

Usage:
  compare_fatbins.py save BUILD_DIR BASELINE_DIR     save every CUDA object's .nv_fatbin section
  compare_fatbins.py compare OLD NEW [--map old.cu=new.cu ...] [--exclude source.cu ...]
      OLD and NEW: build dirs or saved baselines. Compares (1) each object's .nv_fatbin bytes, keyed by kernel
      source (renamed sources through --map), and (2) every kernel of every architecture across all objects, by the
      bytes of each ELF section of each cubin, with the per-file tag nvcc puts in anonymous-namespace names
      (_GLOBAL__N__<path hash>_<len>_<file>_cu_<content hash>) normalized. (2) is the proof that no kernel changed
      when (1) differs only because a source file moved or its host code changed: that tag hashes the source's path
      and its whole text, host code included.
Needs objcopy. Exit status 0 when (2) finds no difference.
"""
import hashlib
import os
import re
import struct
import subprocess
import sys

ANON = re.compile(rb"\d+_GLOBAL__N__[0-9a-f]{8}_\d+_\w+?_cu_[0-9a-f]{8}|_INTERNAL_[0-9a-f]{8}_\d+_\w+?_cu_[0-9a-f]{8}")


def cuda_objects(build_dir):
    """{source basename key: object path} for every *.cu.o under build_dir (key: path under CMakeFiles/*.dir)."""
    found = {}
    for root, _, files in os.walk(build_dir):
        for name in files:
            if name.endswith(".cu.o"):
                path = os.path.join(root, name)
                rel = path.split(".dir/", 1)[-1][: -len(".o")]
                found[rel] = path
    return found


def load(where):
    """{source key: fatbin bytes} from a build dir (objcopy) or a saved baseline (*.fatbin files)."""
    result = {}
    if os.path.exists(os.path.join(where, "BASELINE")):
        for root, _, files in os.walk(where):
            for name in files:
                if name.endswith(".fatbin"):
                    path = os.path.join(root, name)
                    with open(path, "rb") as f:
                        result[os.path.relpath(path, where)[: -len(".fatbin")]] = f.read()
        return result
    for key, obj in sorted(cuda_objects(where).items()):
        out = subprocess.run(["objcopy", "--only-section=.nv_fatbin", "-O", "binary", obj, "/dev/stdout"],
                             check=True, capture_output=True).stdout
        result[key] = out
    return result


def save(build_dir, baseline_dir):
    fatbins = load(build_dir)
    for key, data in fatbins.items():
        path = os.path.join(baseline_dir, key + ".fatbin")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    with open(os.path.join(baseline_dir, "BASELINE"), "w") as f:
        f.write("\n".join(f"{hashlib.sha256(d).hexdigest()}  {k}" for k, d in sorted(fatbins.items())) + "\n")
    print(f"saved {len(fatbins)} fatbins to {baseline_dir}")


def cubins(fatbin):
    """Yields (sm, ELF bytes) of each entry of a fatbin (uncompressed ELF entries; PTX entries yield kind 'ptx')."""
    at = 0
    while at + 16 <= len(fatbin):
        magic, _version, header_size, body_size = struct.unpack_from("<IHHQ", fatbin, at)
        if magic != 0xBA55ED50:
            raise ValueError(f"bad fatbin magic at {at}")
        entry = at + header_size
        end = entry + body_size
        while entry < end:
            kind, _unknown, ehs, size = struct.unpack_from("<HHIQ", fatbin, entry)
            # the entry header: kind (2: ELF), ?, header size, payload size, ..., the architecture (sm) at offset 28
            sm = struct.unpack_from("<I", fatbin, entry + 28)[0]
            payload = fatbin[entry + ehs: entry + ehs + size]
            if kind == 2 and payload[:4] == b"\x7fELF":
                yield sm, "elf", payload
            else:  # PTX or a compressed entry: compared as the bytes they are
                yield sm, "ptx" if kind == 1 else "compressed", payload
            entry += ehs + size
        at = end


def elf_sections(elf):
    """{normalized section name: bytes} of an ELF64 cubin; symbol tables as (name, value, size, info, shndx) lists."""
    (shoff,) = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    names = elf[headers[shstrndx][4]: headers[shstrndx][4] + headers[shstrndx][5]]

    def name_at(table, offset):
        return table[offset: table.index(b"\0", offset)]

    result = {}
    for h in headers:
        name = ANON.sub(b"<anon>", name_at(names, h[0]))
        sh_type, offset, size, link = h[1], h[4], h[5], h[6]
        body = elf[offset: offset + size] if sh_type != 8 else b"<nobits %d>" % size  # SHT_NOBITS
        if sh_type == 2:  # SHT_SYMTAB: names through its string table, normalized
            strtab = headers[link]
            strings = elf[strtab[4]: strtab[4] + strtab[5]]
            entries = []
            for i in range(0, size, 24):
                st_name, st_info, st_other, st_shndx, st_value, st_size = struct.unpack_from("<IBBHQQ", body, i)
                symbol = ANON.sub(b"<anon>", name_at(strings, st_name))
                # A translation unit's internal objects (the CUDA headers' empty customization-point objects) are
                # laid out in the order of their tagged names: their offsets follow the tag, not the code.
                internal = symbol != name_at(strings, st_name) and (st_info & 0xF) == 1
                entries.append((symbol, st_info, st_other, st_shndx, None if internal else st_value, st_size))
            body = repr(entries).encode()
        elif sh_type == 3:  # SHT_STRTAB: names only, compared through the symbols and section names
            body = repr(sorted(ANON.sub(b"<anon>", s) for s in elf[offset: offset + size].split(b"\0"))).encode()
        result[name] = (sh_type, body)
    return result


def sections(fatbins, renamed):
    """{(sm, normalized section name, object): (type, bytes)} over every cubin of every object. A section named after
    a kernel (.text._Z..., .nv.info._Z..., ...) is keyed without its object, so a kernel may move between sources."""
    result = {}
    for key, fatbin in fatbins.items():
        obj = renamed.get(key, key)
        for sm, kind, payload in cubins(fatbin):
            if kind != "elf":
                result[(sm, kind, obj)] = payload
                continue
            for name, body in elf_sections(payload).items():
                kernel_keyed = b"._Z" in name
                result[(sm, name.decode(), "" if kernel_keyed else obj)] = body
    return result


def compare(old_dir, new_dir, mapping, excluded):
    old = {k: v for k, v in load(old_dir).items() if k not in excluded}
    new = {k: v for k, v in load(new_dir).items() if k not in excluded}
    renamed = {new_key: old_key for old_key, new_key in mapping}
    print("== whole .nv_fatbin sections, keyed by kernel source")
    for key in sorted(set(old) | {renamed.get(k, k) for k in new}):
        new_key = next((n for n, o in renamed.items() if o == key), key)
        a, b = old.get(key), new.get(new_key)
        label = key if new_key == key else f"{key} -> {new_key}"
        if a is None or b is None:
            print(f"  {'only old' if b is None else 'only new'}: {label}")
        else:
            print(f"  {'identical' if a == b else 'bytes differ'}: {label} ({len(a)} / {len(b)} bytes)")
    print("== every ELF section of every cubin, anonymous-namespace tags normalized")
    sa, sb = sections(old, {}), sections(new, renamed)
    kernel_count = len({k for k in sa if k[1].startswith(".text._Z")})
    print(f"  {len(sa)} sections ({kernel_count} kernel .text sections over all architectures) in the old build,"
          f" {len(sb)} in the new")
    differ = sorted(k for k in sa if k in sb and sa[k] != sb[k])
    only_a, only_b = sorted(set(sa) - set(sb)), sorted(set(sb) - set(sa))
    for what, keys in (("DIFFERENT", differ), ("ONLY OLD", only_a), ("ONLY NEW", only_b)):
        for k in keys:
            print(f"  {what}: sm_{k[0]} {k[1]} {k[2]}")
    same = not differ and not only_a and not only_b
    print("RESULT: device code identical" if same else "RESULT: device code DIFFERS")
    return 0 if same else 1


def main(argv):
    if len(argv) >= 3 and argv[0] == "save":
        save(argv[1], argv[2])
        return 0
    if len(argv) >= 3 and argv[0] == "compare":
        mapping, excluded = [], set()
        rest = argv[3:]
        while rest:
            if rest[0] == "--map" and len(rest) > 1 and "=" in rest[1]:
                mapping.append(tuple(rest[1].split("=", 1)))
                rest = rest[2:]
            elif rest[0] == "--exclude" and len(rest) > 1:
                excluded.add(rest[1])
                rest = rest[2:]
            else:
                print(f"unknown argument {rest[0]}", file=sys.stderr)
                return 2
        return compare(argv[1], argv[2], mapping, excluded)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

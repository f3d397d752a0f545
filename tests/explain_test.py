#!/usr/bin/env python3
"""`msa explain` checked by an independent route: numpy recomputes every step of the trace (token scores,
block scores, forced blocks, ranking, selection, softmax weights, output, lse) from the inputs the trace
prints, and the --image PNG is decoded with zlib and checked for its size and its cells' colours.
One number is worked by hand below (the default case, key 0)."""
import argparse
import math
import pathlib
import re
import struct
import subprocess
import sys
import zlib

import numpy as np

TOL = 2e-6  # the trace prints 6 decimals

RANKED, INIT, LOCAL, UNSELECTED, INVISIBLE = (48, 96, 192), (64, 160, 64), (224, 128, 32), (216, 216, 216), (255, 255, 255)
CELL = 12
PICTURE_ARGS = ["--keys", "64", "--block-size", "4", "--top-k", "4", "--q-heads", "4", "--kv-heads", "2",
                "--head-dim", "8", "--seed", "1"]


def vector(text):
    return np.array([float(x) for x in text.split(",")], dtype=np.float64)


def parse(trace):
    """Groups: {r: {index_q, keys: {s: (index_k, x)}, blocks: {b: M}, row, heads: {h: {...}}}}."""
    groups, group, head = {}, None, None
    for line in trace.splitlines():
        if m := re.match(r"index_q\[t=(\d+), r=(\d+)\] = \[(.*)\]$", line):
            group = groups.setdefault(int(m[2]), {"t": int(m[1]), "index_q": vector(m[3]), "keys": {}, "blocks": {},
                                                  "heads": {}})
        elif m := re.match(r"  key (\d+) \(block \d+\) index_k = \[(.*)\]  x = (\S+)$", line):
            group["keys"][int(m[1])] = (vector(m[2]), float(m[3]))
        elif m := re.match(r"  block (\d+) \(keys [^)]*\)(?: mean index_k = \[(.*)\])? M = (\S+)$", line):
            group["blocks"][int(m[1])] = float(m[3])
            if m[2]:
                group.setdefault("mean_keys", {})[int(m[1])] = vector(m[2])
        elif m := re.match(r"step 5\. .* = \[(.*)\]$", line):
            group["row"] = [int(x) for x in m[1].split(",")]
        elif m := re.match(r"step 6\. head h = (\d+): q\[t, h\] = \[(.*)\]; .*scale = (\S+)$", line):
            head = group["heads"].setdefault(int(m[1]), {"q": vector(m[2]), "keys": {}})
        elif m := re.match(r"  key (\d+) k = \[(.*)\] v = \[(.*)\]  score = (\S+)  weight = (\S+)$", line):
            head["keys"][int(m[1])] = (vector(m[2]), vector(m[3]), float(m[4]), float(m[5]))
        elif m := re.match(r"  out\[t, h\] = sum of weight \* v = \[(.*)\]  lse = (\S+)$", line):
            head["out"], head["lse"] = vector(m[1]), float(m[2])
    return groups


def expected_row(scores, visible, top_k, init_blocks):
    local = visible - 1
    init = min(init_blocks, local)
    ranked = sorted(range(init, local), key=lambda b: (-scores[b], b))
    take = min(top_k - (init + 1), len(ranked))
    row = ranked[:take] + list(range(init)) + [local]
    return row + [-1] * (top_k - len(row))


def check_trace(trace, pooling, block_size, top_k, init_blocks, group_size):
    groups = parse(trace)
    assert groups, "no group in the trace:\n" + trace
    for r, g in groups.items():
        t = g["t"]
        keys = sorted(g["keys"])
        assert keys == list(range(t + 1)), f"group {r}: keys {keys}"
        index_k = np.array([g["keys"][s][0] for s in keys])
        di = len(g["index_q"])
        x = index_k @ g["index_q"] / math.sqrt(di)
        np.testing.assert_allclose([g["keys"][s][1] for s in keys], x, atol=TOL, err_msg=f"token scores, group {r}")
        visible = t // block_size + 1
        scores = []
        for b in range(visible):
            part = slice(b * block_size, min((b + 1) * block_size, t + 1))
            if pooling == "max":
                scores.append(x[part].max())
            elif pooling == "lse":
                m = x[part].max()
                scores.append(m + math.log(np.exp(x[part] - m).sum()))
            else:
                np.testing.assert_allclose(g["mean_keys"][b], index_k[part].mean(axis=0), atol=TOL)
                scores.append(float(g["index_q"] @ index_k[part].mean(axis=0)) / math.sqrt(di))
        np.testing.assert_allclose([g["blocks"][b] for b in range(visible)], scores, atol=TOL,
                                   err_msg=f"block scores, group {r}")
        row = expected_row(scores, visible, top_k, init_blocks)
        assert g["row"] == row, f"group {r}: selection {g['row']}, numpy says {row}"
        selected_keys = [s for b in sorted(b for b in row if b >= 0)
                         for s in range(b * block_size, min((b + 1) * block_size, t + 1))]
        assert sorted(g["heads"]) == list(range(r * group_size, (r + 1) * group_size)), f"heads of group {r}"
        for h, head in g["heads"].items():
            assert sorted(head["keys"]) == selected_keys, f"head {h}: keys {sorted(head['keys'])} != {selected_keys}"
            k = np.array([head["keys"][s][0] for s in selected_keys])
            v = np.array([head["keys"][s][1] for s in selected_keys])
            logits = k @ head["q"] / math.sqrt(len(head["q"]))
            weights = np.exp(logits - logits.max())
            lse = logits.max() + math.log(weights.sum())
            weights /= weights.sum()
            np.testing.assert_allclose([head["keys"][s][2] for s in selected_keys], logits, atol=TOL)
            np.testing.assert_allclose([head["keys"][s][3] for s in selected_keys], weights, atol=TOL)
            np.testing.assert_allclose(head["out"], weights @ v, atol=TOL, err_msg=f"out, head {h}")
            assert abs(head["lse"] - lse) <= TOL, f"lse of head {h}: {head['lse']} vs {lse}"
    return groups


def read_png(path):
    data = pathlib.Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
    pos, chunks = 8, {}
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert zlib.crc32(kind + body) == crc, f"bad CRC in chunk {kind}"
        chunks[kind] = chunks.get(kind, b"") + body
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert (depth, colour) == (8, 2), "expected 8-bit RGB"
    raw = zlib.decompress(chunks[b"IDAT"])
    assert len(raw) == height * (1 + 3 * width)
    rows = [raw[y * (1 + 3 * width) + 1:(y + 1) * (1 + 3 * width)] for y in range(height)]
    return width, height, lambda x, y: tuple(rows[y][3 * x:3 * x + 3])


def run(msa, args):
    result = subprocess.run([msa, "explain", *args], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--msa", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--committed-image", help="docs/images/selection-pattern.png: must be what msa draws today")
    options = parser.parse_args()
    workdir = pathlib.Path(options.workdir)
    workdir.mkdir(parents=True, exist_ok=True)

    # The default case: 12 keys, Bk 4, top_k 2, Hq 2, Hkv 1, D 4, max pooling, seed 1; query 11.
    trace = run(options.msa, [])
    check_trace(trace, "max", 4, 2, 0, 2)
    # By hand: index_q[11, 0] = [-1.5, 0.2, 1.2, -1.6], index_k[0] = [2.1, -1.4, -1.3, 1.9],
    # x = (-3.15 - 0.28 - 1.56 - 3.04) / sqrt(4) = -8.03 / 2 = -4.015.
    assert "index_q[t=11, r=0] = [-1.5, 0.2, 1.2, -1.6]" in trace, trace
    assert "key 0 (block 0) index_k = [2.1, -1.4, -1.3, 1.9]  x = -4.015000" in trace, trace
    # Block maxima 1.055 (key 2), 1.085 (key 7), 2.67 (key 10, local): block 1 beats block 0, so [1, 2].
    assert "= [1, 2]" in trace, trace

    # Every pooling mode, init blocks, two groups, a query in the middle, and the image.
    for pooling in ("max", "lse", "mean"):
        image = workdir / f"selection_{pooling}.png"
        args = ["--keys", "30", "--block-size", "4", "--top-k", "4", "--init-blocks", "1", "--q-heads", "4",
                "--kv-heads", "2", "--head-dim", "3", "--pooling", pooling, "--query", "25", "--seed", "5",
                "--image", str(image)]
        groups = check_trace(run(options.msa, args), pooling, 4, 4, 1, 2)
        width, height, pixel = read_png(image)
        blocks = (30 + 3) // 4
        assert (width, height) == (2 * blocks * CELL + CELL, 30 * CELL), (width, height)
        for r, g in groups.items():  # the traced query's row of each panel: colours follow the selection
            for b in range(blocks):
                colour = pixel(r * (blocks + 1) * CELL + b * CELL + 2, 25 * CELL + 2)
                want = (INVISIBLE if b > 25 // 4 else LOCAL if b == 25 // 4 else INIT if b == 0
                        else RANKED if b in g["row"] else UNSELECTED)
                assert colour == want, f"{pooling}: group {r} block {b}: colour {colour}, want {want}"
    # Bad input: one line naming the flag and the value, exit 2, no image written.
    for args, message in ((["--query", "12"], "msa: error: --query 12: must be below --keys 12\n"),
                          (["--top-k", "1", "--init-blocks", "1"],
                           "msa: error: --top-k 1: must be at least --init-blocks + 1 = 2 (the forced blocks)\n")):
        image = workdir / "refused.png"
        result = subprocess.run([options.msa, "explain", *args, "--image", str(image)], capture_output=True, text=True)
        assert (result.returncode, result.stderr) == (2, message), (args, result.returncode, result.stderr)
        assert not image.exists(), image

    if options.committed_image:  # the picture in docs/what-is-msa.md, made by the command written there
        image = workdir / "selection-pattern.png"
        run(options.msa, [*PICTURE_ARGS, "--image", str(image)])
        assert image.read_bytes() == pathlib.Path(options.committed_image).read_bytes(), \
            f"{options.committed_image} is stale: regenerate it with msa explain {' '.join(PICTURE_ARGS)} --image ..."
    print("msa explain: trace and image agree with numpy")
    return 0


if __name__ == "__main__":
    sys.exit(main())

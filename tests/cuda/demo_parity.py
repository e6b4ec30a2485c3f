#!/usr/bin/env python3
"""The trained demo model on the GPU (bf16) against the CPU engine (float32) through the
`m3-engine` CLI, for device runs where the doctest suite cannot be built: the prompts of
tests/cuda/demo_prompts.cpp (chat-template ids made by `m3-gateway prepare`, the m3-tiny golden
pictures and video as media) are written as model-input files; for each, the prompt logits
(relative L2, GPU against CPU), the MSA block selections (--capture) and 24 greedy tokens are
compared. Plain Python (no numpy): safetensors is read and written by hand.

usage: demo_parity.py M3_ENGINE REPO_ROOT WORK_DIR [DEVICE (cuda)]   (exit 1 when a check fails)"""
import array
import json
import math
import os
import struct
import subprocess
import sys

TOL = 2e-2
HEAD = [3, 1, 94, 100, 94, 324, 88, 210, 399, 382, 268, 431, 438, 25, 2, 210, 1, 96, 411, 210]
TAIL = [2, 210, 1, 76, 84, 210, 4, 210]
COLOUR = [343, 351, 270, 340, 394, 356, 340, 352, 42]
IMAGE, VIDEO, START, END = 6, 7, 8, 9
CODES = {"F32": "f", "I64": "q", "I32": "i"}


def read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a = array.array(CODES[t["dtype"]])
        a.frombytes(data[t["data_offsets"][0]:t["data_offsets"][1]])
        out[name] = (t["dtype"], t["shape"], a)
    return out


def write(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, (dtype, shape, a) in tensors.items():
        b = a.tobytes()
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def media(body, token, grid):
    g = list(grid)
    for i in range(0, len(g), 3):
        body += [START] + [token] * (g[i] * g[i + 1] * g[i + 2] // 4) + [END]


def prompts(root):
    cases = read(os.path.join(root, "tests/data/m3-tiny/model_cases.safetensors"))
    out = [("text-ball", HEAD + [343, 285, 270, 268, 271, 76, 312, 42] + TAIL, {}),
           ("text-describe", HEAD + [372, 340, 434, 25] + TAIL, {}),
           ("text-sky", HEAD + [343, 351, 270, 340, 272, 86, 100, 42] + TAIL, {})]
    for prefix, pix, grid, token in (("image", "pixel_values", "image_grid_thw", IMAGE),
                                     ("image2", "pixel_values", "image_grid_thw", IMAGE),
                                     ("video", "pixel_values_videos", "video_grid_thw", VIDEO)):
        body = []
        media(body, token, cases[prefix + "." + grid][2])
        out.append((prefix, HEAD + body + COLOUR + TAIL,
                    {pix: cases[prefix + "." + pix], grid: cases[prefix + "." + grid]}))
    return out


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stderr[-3000:])
        raise SystemExit("failed: " + " ".join(cmd))
    return r.stdout


def rel_l2(a, b):
    num = sum((x - y) ** 2 for x, y in zip(a, b))
    den = sum(y * y for y in b)
    return math.sqrt(num / den) if den else math.inf


def selections_differing(a, b):
    diff = total = 0
    for name, (_, shape, x) in a.items():
        if not name.startswith("block_indices."):
            continue
        y, k = b[name][2], shape[2]
        for r in range(len(x) // k):
            diff += sorted(x[r * k:(r + 1) * k]) != sorted(y[r * k:(r + 1) * k])
            total += 1
    return diff, total


def main():
    engine, root, work = sys.argv[1], sys.argv[2], sys.argv[3]
    target = sys.argv[4] if len(sys.argv) > 4 else "cuda"
    model = os.path.join(root, "tests/data/demo-model/model")
    os.makedirs(work, exist_ok=True)
    failed = 0
    worst = 0.0
    for name, ids, extra in prompts(root):
        inputs = os.path.join(work, name + ".inputs.safetensors")
        t = {"input_ids": ("I64", [len(ids)], array.array("q", ids))}
        t.update(extra)
        write(inputs, t)
        got = {}
        for device in ("cpu", target):
            out = os.path.join(work, "%s.%s.safetensors" % (name, device))
            run([engine, "logits", "--model", model, "--inputs", inputs, "--output", out,
                 "--device", device, "--capture"])
            gen = run([engine, "generate", "--model", model, "--inputs", inputs,
                       "--max-new-tokens", "24", "--temperature", "0", "--device", device])
            got[device] = (read(out), json.loads(gen.strip().splitlines()[-1])["tokens"])
        (c, ct), (g, gt) = got["cpu"], got[target]
        err = rel_l2(g["logits"][2], c["logits"][2])
        v = c["logits"][1][1]
        last = rel_l2(g["logits"][2][-v:], c["logits"][2][-v:])
        diff, total = selections_differing(g, c)
        ok = err <= TOL and gt == ct
        failed += not ok
        worst = max(worst, err)
        print("demo %-14s %3d rows: logits rel L2 %.3e (last row %.3e), MSA selections differing "
              "%d of %d, greedy %s (%d tokens)%s" % (name, len(ids), err, last, diff, total,
                                                    "equal" if gt == ct else "DIFFERENT", len(ct),
                                                    "" if ok else "  FAILED"), flush=True)
        if gt != ct:
            print("  cpu  %s\n  cuda %s" % (ct, gt))
    print("demo parity: worst logits rel L2 %.3e; %d of 6 prompts failed" % (worst, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Times the reference (Hugging Face) MiniMax-M3 VL image processor on one CPU thread, for the
comparison in docs/PERF.md. Medians of RUNS, torch.set_num_threads(1).

Without --images: a 1920x1080 and a 3840x2160 synthetic frame (frame() below), already decoded
(uint8 HWC), and the same frame from JPEG q90 and PNG bytes (PIL decode + processor).

With --images DIR: for each DIR/*.jpg (read into memory once): the processor on the decoded
frame, the JPEG end to end (PIL open + convert RGB + np.asarray + processor), PIL's decode alone
(open + convert + asarray) and PIL's draft decode (im.draft("RGB", (w//8, h//8)), the DCT-scaled
1/8 decode, then load), for the same-bytes comparison with m3-bench-jpeg
(scripts/device/bench_images.sh).

--write-images DIR first writes the test JPEGs there (all 1920x1080, PIL quality 90):
frame_1920x1080_q90.jpg (exactly the frame timed without --images), astronaut_1920x1080_q90.jpg
(the golden astronaut photo upscaled by PIL bicubic: a smooth photo) and
noise12_1920x1080_q90.jpg (the frame with noise sigma 12 instead of 6); they are then timed as
with --images DIR unless --images names another directory. Writing needs only numpy and PIL.

Usage: hf_image_processor_bench.py OUT.json [--images DIR] [--write-images DIR] [--runs N]
"""
import argparse
import io
import json
import os
import statistics
import sys
import time

import numpy as np
from PIL import Image

RUNS = 15
# The repository root: this file is tests/bench/torch/hf_image_processor_bench.py.
ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
ASTRONAUT = os.path.join(ROOT, "tests/data/m3-tiny/images/photo_astronaut_512x512.png")


def frame(h, w, sigma=6):
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.stack([127 + 120 * np.sin(x / w * 6), 127 + 120 * np.cos(y / h * 5), 255 * (x + y) / (h + w)], -1)
    img += np.random.default_rng(0).normal(0, sigma, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def median_ms(fn):
    fn()
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def write_images(directory):
    os.makedirs(directory, exist_ok=True)
    pictures = {
        "frame_1920x1080_q90.jpg": Image.fromarray(frame(1080, 1920)),
        "astronaut_1920x1080_q90.jpg": Image.open(ASTRONAUT).convert("RGB").resize((1920, 1080), Image.BICUBIC),
        "noise12_1920x1080_q90.jpg": Image.fromarray(frame(1080, 1920, sigma=12)),
    }
    for name, im in pictures.items():
        im.save(os.path.join(directory, name), format="JPEG", quality=90)
    print(f"wrote {len(pictures)} JPEGs to {directory}", file=sys.stderr)


def load_rgb(jpeg):
    return np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGB"))


def draft_rgb(jpeg):
    im = Image.open(io.BytesIO(jpeg))
    im.draft("RGB", (im.width // 8, im.height // 8))
    im.load()
    return np.asarray(im.convert("RGB"))


def bench_files(ip, directory):
    files = {}
    for name in sorted(os.listdir(directory)):
        if not name.lower().endswith(".jpg"):
            continue
        jpeg = open(os.path.join(directory, name), "rb").read()
        arr = load_rgb(jpeg)
        files[name] = {
            "bytes": len(jpeg),
            "size": [arr.shape[1], arr.shape[0]],
            "draft_size": list(draft_rgb(jpeg).shape[1::-1]),
            "grid_thw": ip(images=[arr], return_tensors="pt")["image_grid_thw"].tolist(),
            "decoded_ms": median_ms(lambda: ip(images=[arr], return_tensors="pt")),
            "jpeg_end_to_end_ms": median_ms(lambda: ip(images=[load_rgb(jpeg)], return_tensors="pt")),
            "pil_decode_ms": median_ms(lambda: load_rgb(jpeg)),
            "pil_draft_1_8_decode_ms": median_ms(lambda: draft_rgb(jpeg)),
        }
    return files


def bench_synthetic(ip, out):
    for name, (h, w) in {"1920x1080": (1080, 1920), "3840x2160": (2160, 3840)}.items():
        arr = frame(h, w)
        buf = io.BytesIO()
        Image.fromarray(arr).save(buf, format="JPEG", quality=90)
        jpeg = buf.getvalue()
        buf = io.BytesIO()
        Image.fromarray(arr).save(buf, format="PNG")
        png = buf.getvalue()
        grid = ip(images=[arr], return_tensors="pt")["image_grid_thw"].tolist()
        out[name] = {
            "grid_thw": grid,
            "decoded_ms": median_ms(lambda: ip(images=[arr], return_tensors="pt")),
            "jpeg_end_to_end_ms": median_ms(lambda: ip(images=[load_rgb(jpeg)], return_tensors="pt")),
            "png_end_to_end_ms": median_ms(lambda: ip(images=[np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))], return_tensors="pt")),
        }


def main():
    global RUNS
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="where the JSON results go")
    parser.add_argument("--images", help="time every *.jpg in this directory instead of the synthetic frames")
    parser.add_argument("--write-images", help="write the test JPEGs here first (and time them)")
    parser.add_argument("--runs", type=int, default=RUNS, help=f"timed runs per figure (default {RUNS})")
    args = parser.parse_args()
    RUNS = max(1, args.runs)
    if args.write_images:
        write_images(args.write_images)
    directory = args.images or args.write_images

    import PIL
    import torch
    import transformers
    from PIL import features
    from transformers.models.minimax_m3_vl.image_processing_minimax_m3_vl import MiniMaxM3VLImageProcessor

    torch.set_num_threads(1)
    ip = MiniMaxM3VLImageProcessor()
    out = {
        "torch_threads": torch.get_num_threads(),
        "runs": RUNS,
        "versions": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "pillow": PIL.__version__,
            "pillow_libjpeg_turbo": features.version("libjpeg_turbo"),
            "numpy": np.__version__,
        },
    }
    if directory:
        out["files"] = bench_files(ip, directory)
    else:
        bench_synthetic(ip, out)
    json.dump(out, open(args.out, "w"), indent=1)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Times the reference (Hugging Face) MiniMax-M3 VL image processor on one CPU thread, for the
comparison in docs/PERF.md: a 1920x1080 frame already decoded (uint8 HWC), and the same frame
from JPEG bytes (PIL decode + processor). Median of RUNS. Usage: hf_image_processor_bench.py OUT.json
"""
import io
import json
import statistics
import sys
import time

import numpy as np
import torch
from PIL import Image
from transformers.models.minimax_m3_vl.image_processing_minimax_m3_vl import MiniMaxM3VLImageProcessor

torch.set_num_threads(1)
RUNS = 15


def frame(h, w):
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.stack([127 + 120 * np.sin(x / w * 6), 127 + 120 * np.cos(y / h * 5), 255 * (x + y) / (h + w)], -1)
    img += np.random.default_rng(0).normal(0, 6, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def median_ms(fn):
    fn()
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    ip = MiniMaxM3VLImageProcessor()
    out = {"torch_threads": torch.get_num_threads(), "runs": RUNS}
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
            "jpeg_end_to_end_ms": median_ms(lambda: ip(images=[np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGB"))], return_tensors="pt")),
            "png_end_to_end_ms": median_ms(lambda: ip(images=[np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))], return_tensors="pt")),
        }
    json.dump(out, open(sys.argv[1], "w"), indent=1)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""PyTorch SDPA (flash backend) at the shapes of m3-bench-cuda-attention, on the same GPU in the
same device call: decode (one query per sequence) at batch 1 and 32 and causal prefill of one
prompt, at 8K / 32K / 128K context; 64 q / 4 KV heads of 128 (GQA through enable_gqa, so K/V
are read once per KV head), bf16. Fresh random data per size; CUDA-event medians after warm-up; decode both eagerly and
replayed from a CUDA graph of 20 calls (per call), as m3-bench-cuda-attention times it.
Usage: python3 tests/bench/torch/sdpa_bench.py [--quick]   (--quick: 8K and 32K only)"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from cuda_timing import graph_median_ms, median_ms

HQ, HKV, D = 64, 4, 128


def sdpa(q, k, v, causal):
    # Flash first; the backend that ran is reported (efficient attention when flash refuses).
    for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION):
        try:
            with sdpa_kernel(backend):
                F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
            return backend.name, lambda: _run(q, k, v, causal, backend)
        except RuntimeError:
            continue
    raise RuntimeError("no SDPA backend takes these shapes")


def _run(q, k, v, causal, backend):
    with sdpa_kernel(backend):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)


def main():
    quick = "--quick" in sys.argv
    ctxs = [8192, 32768] + ([] if quick else [131072])
    dev = torch.device("cuda")
    print(f"device {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    torch.manual_seed(0)
    for batch in (1, 32):
        for ctx in ctxs:
            q = torch.randn(batch, HQ, 1, D, device=dev, dtype=torch.bfloat16)
            k = torch.randn(batch, HKV, ctx + 1, D, device=dev, dtype=torch.bfloat16)
            v = torch.randn_like(k)
            name, fn = sdpa(q, k, v, False)
            eager = median_ms(fn, 3, 15)
            ms = graph_median_ms(fn, 9)
            gbs = batch * (ctx + 1) * HKV * D * 2 * 2 / ms / 1e6
            print(f"sdpa decode  batch {batch:<3} ctx {ctx:<7} graph {ms:9.4f} ms ({gbs:6.0f} GB/s)"
                  f" | eager {eager:9.4f} ms [{name}]")
            del q, k, v
    for t in ctxs:
        q = torch.randn(1, HQ, t, D, device=dev, dtype=torch.bfloat16)
        k = torch.randn(1, HKV, t, D, device=dev, dtype=torch.bfloat16)
        v = torch.randn_like(k)
        name, fn = sdpa(q, k, v, True)
        ms = median_ms(fn, 1, 3 if t > 32768 else 5)
        flop = 4.0 * HQ * D * t * (t + 1) / 2
        print(f"sdpa prefill tokens {t:<7} {ms:9.2f} ms ({flop / ms / 1e9:5.0f} TFLOP/s) [{name}]")
        del q, k, v
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

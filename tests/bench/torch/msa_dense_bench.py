#!/usr/bin/env python3
"""The dense side of the MSA benchmark: PyTorch SDPA (flash backend) on the same GPU at the
shapes of tests/bench/cuda_msa_bench.cu (64 query / 4 KV heads of 128, GQA): decode at batch 1
and 32 (one query per sequence against ctx keys) and a causal whole-prompt prefill, at 8K, 32K
and 128K. Medians of CUDA-event timings after warm-up, fresh random data per size; decode per
call from a CUDA graph of 20 calls (and eager), prefill eager. Decode calls rotate through
enough K/V sets that none finds its data in L2, as m3-bench-cuda-msa's do (--warm-l2: one set).

With --m3-json (the output of m3-bench-cuda-msa --json) it prints the side-by-side table: MSA
time (indexer + block-sparse attention) against SDPA, and the ratio against the byte roofline
of the decode step (dense K/V bytes over index-key + selected K/V bytes), its 80% goal.

Usage: msa_dense_bench.py [--contexts 8192,32768,131072] [--batches 1,32] [--warm-l2]
                          [--json OUT] [--m3-json M3.json]
"""
import argparse
import itertools
import json
import math
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from cuda_timing import graph_median_ms, median_ms

Q_HEADS, KV_HEADS, DIM = 64, 4, 128


def sdpa(q, k, v, causal):
    # The flash backend only: a run that falls back to another kernel fails instead of being
    # timed under the flash label.
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)


def data_sets(bytes_per_call, warm_l2):
    """m3-bench-cuda-msa's DataSets: 1 where a call reads more than twice the L2, else enough
    sets that the calls between two uses of one read twice the L2."""
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    if warm_l2 or bytes_per_call >= 2 * l2:
        return 1
    return min(32, 1 + math.ceil(2 * l2 / bytes_per_call))


def run(kind, ctx, batch, seed, warm_l2):
    g = torch.Generator(device="cuda").manual_seed(seed)
    rows = 1 if kind == "decode" else ctx

    def rand(*shape):
        return (torch.rand(*shape, generator=g, device="cuda", dtype=torch.float32) * 2 - 1).to(
            torch.bfloat16)

    q = rand(batch, Q_HEADS, rows, DIM)
    kv_bytes = 2 * batch * KV_HEADS * ctx * DIM * 2
    sets = data_sets(kv_bytes, warm_l2) if kind == "decode" else 1
    kvs = [(rand(batch, KV_HEADS, ctx, DIM), rand(batch, KV_HEADS, ctx, DIM)) for _ in range(sets)]
    causal = kind == "prefill"
    calls = itertools.count()

    def fn():
        k, v = kvs[next(calls) % sets]
        return sdpa(q, k, v, causal)

    if kind == "decode":
        out = {"sdpa_ms": graph_median_ms(fn), "eager_sdpa_ms": median_ms(fn, 5, 30)}
    else:
        out = {"sdpa_ms": median_ms(fn, 2, 5)}
    del q, kvs
    torch.cuda.empty_cache()
    return {"kind": kind, "ctx": ctx, "batch": batch, "data_sets": sets, **out}


def step_columns(s, r):
    """Decode in a step's order: the step's key write, then MSA (the write's time included)."""
    step16, step8 = r.get("step_msa_bf16_ms"), r.get("step_msa_fp8_ms")
    if not step16 or not step8:
        return ""
    return (f" | {step16:9.4f} {s['sdpa_ms'] / step16:7.2f} | "
            f"{step8:8.4f} {s['sdpa_ms'] / step8:7.2f}")


def table(sdpa_rows, m3):
    by_key = {(r["kind"], r["ctx"], r["batch"]): r for r in m3["results"]}
    print("\nMSA (indexer + block-sparse attention) against dense attention, ms (median)")
    print(f"{'kind':8} {'ctx':>7} {'batch':>5} | {'SDPA':>8} {'ours dense':>10} | "
          f"{'MSA bf16':>9} {'x SDPA':>7} {'goal':>6} | {'MSA fp8':>8} {'x SDPA':>7} {'goal':>6} | "
          f"{'step bf16':>9} {'x SDPA':>7} | {'step fp8':>8} {'x SDPA':>7}")
    for s in sdpa_rows:
        r = by_key.get((s["kind"], s["ctx"], s["batch"]))
        if r is None:
            continue
        # Decode: the indexer and the attention captured back to back in one graph, as a step
        # runs them (older JSON: the sum of their separate timings).
        msa16 = r.get("msa_bf16_ms") or r["indexer_bf16_ms"] + r["sparse_attention_ms"]
        msa8 = r.get("msa_fp8_ms") or r["indexer_fp8_ms"] + r["sparse_attention_ms"]
        if s["kind"] == "decode":
            # 80% of the byte-roofline ratio: dense K/V bytes over the bytes MSA must read.
            goal16 = 0.8 * r["dense_kv_bytes"] / (r["index_bytes_bf16"] + r["sparse_kv_bytes"])
            goal8 = 0.8 * r["dense_kv_bytes"] / (r["index_bytes_fp8"] + r["sparse_kv_bytes"])
        else:
            goal16 = goal8 = 8.0
        dense = f"{r['dense_ms']:10.3f}" if r["dense_reps"] else f"{'-':>10}"
        print(f"{s['kind']:8} {s['ctx']:7d} {s['batch']:5d} | {s['sdpa_ms']:8.3f} {dense} | "
              f"{msa16:9.3f} {s['sdpa_ms'] / msa16:7.2f} {goal16:6.2f} | "
              f"{msa8:8.3f} {s['sdpa_ms'] / msa8:7.2f} {goal8:6.2f}" + step_columns(s, r))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--contexts", default="8192,32768,131072")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--no-prefill", action="store_true")
    ap.add_argument("--warm-l2", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--m3-json")
    a = ap.parse_args()
    try:
        contexts = [int(x) for x in a.contexts.split(",")]
        batches = [int(x) for x in a.batches.split(",")]
    except ValueError:
        sys.exit(f"msa_dense_bench: bad --contexts / --batches: {a.contexts} / {a.batches}")
    if not torch.cuda.is_available():
        sys.exit("msa_dense_bench: no CUDA GPU")
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
    rows, seed = [], 100
    for ctx in contexts:
        runs = [("decode", b) for b in batches] + ([] if a.no_prefill else [("prefill", 1)])
        for kind, b in runs:
            seed += 1
            r = run(kind, ctx, b, seed, a.warm_l2)
            eager = f" (eager {r['eager_sdpa_ms']:.4f} ms)" if "eager_sdpa_ms" in r else ""
            print(f"SDPA flash {kind:8} ctx {ctx:7d} batch {b:3d}: {r['sdpa_ms']:.4f} ms{eager}"
                  f" ({r['data_sets']} data sets)", flush=True)
            rows.append(r)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "results": rows}, f, indent=1)
    if a.m3_json:
        with open(a.m3_json) as f:
            table(rows, json.load(f))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""One MiniMax-M3 MSA + MoE decoder layer in PyTorch bf16 on the GPU, the side-by-side of
m3-bench-cuda-layer (tests/bench/cuda_layer_bench.cpp): the same shapes (hidden 6144, 64 q / 4 KV
heads of 128, rotary 64, index 4 x 128, MSA block 128, top-16 with 1 local block, 128 experts of
3072, top-4, shared expert, swigluoai), random bf16 weights made on the device, decode at batch
1 / 8 / 64 over a random 32K context and prefill of an 8K prompt, medians of CUDA-event timings
after warm-up.

An equivalent of the reference module written for speed with stock PyTorch: Gemma RMSNorm and
partial rotate-half RoPE in f32, the lightning indexer as a bf16 matmul with block max and top-k
(the local block forced), decode attention by gathering the selected K/V blocks into flash SDPA
(the KV group's 16 query heads folded into the query length), prefill attention as SDPA with
the selection as a boolean mask (dense masked attention: stock PyTorch has no block-sparse
kernel), the router in f32, and the routed experts through torch._grouped_mm (one grouped GEMM
per projection, no host synchronization; a per-expert loop where it is missing). Decode is timed
eagerly and, where capture works, replayed as a CUDA graph. Usage:
  python3 tests/bench/torch/layer_bench.py [--batches 1,8,64] [--context 32768] [--prefill 8192]
      [--json OUT] [--cpp-json m3-bench-cuda-layer's --json file, for the ratios]
"""
import argparse
import json
import sys

import torch
import torch.nn.functional as F

from cuda_timing import median_ms

H, HQ, HKV, D, ROT = 6144, 64, 4, 128, 64
HI, DI, BLK, TOPK, LOCAL = 4, 128, 128, 16, 1
E, I, K, S = 128, 3072, 4, 3072
ALPHA, LIMIT, SCALE, EPS, THETA = 1.702, 7.0, 2.0, 1e-6, 5e6
BF = torch.bfloat16


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", default="1,8,64")
    p.add_argument("--context", type=int, default=32768)
    p.add_argument("--prefill", type=int, default=8192)
    p.add_argument("--decode-iters", type=int, default=20)
    p.add_argument("--prefill-iters", type=int, default=5)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--json")
    p.add_argument("--cpp-json")
    a = p.parse_args()
    try:
        a.batches = [int(b) for b in a.batches.split(",")]
    except ValueError:
        p.error("--batches: comma-separated integers")
    if a.context % BLK or a.prefill % BLK or any(b < 1 for b in a.batches):
        p.error("--context and --prefill must be multiples of 128, batches positive")
    return a


def uniform(shape, scale, dtype=BF):
    return torch.empty(shape, device="cuda", dtype=dtype).uniform_(-scale, scale)


def fan(k):
    return (3.0 / k) ** 0.5


def rms(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * (1.0 + w)).to(BF)


def rope(x, cos, sin):
    # x [T, heads, dim]; cos / sin [T, ROT] ([freqs, freqs]); rotate-half on the first ROT.
    xr = x[..., :ROT].float()
    x1, x2 = xr.chunk(2, -1)
    rotated = torch.cat((-x2, x1), -1)
    c, s = cos[:, None, :], sin[:, None, :]
    return torch.cat(((xr * c + rotated * s).to(BF), x[..., ROT:]), -1)


def swiglu(gu):
    g, u = gu.float().chunk(2, -1)
    g = g.clamp(max=LIMIT)
    u = u.clamp(-LIMIT, LIMIT)
    return ((u + 1.0) * g * torch.sigmoid(ALPHA * g)).to(BF)


class Layer:
    def __init__(self):
        self.in_norm = uniform((H,), 0.1, torch.float32)
        self.post_norm = uniform((H,), 0.1, torch.float32)
        self.qkv = uniform(((HQ + 2 * HKV) * D + (HI + 1) * DI, H), fan(H))
        self.o = uniform((H, HQ * D), fan(HQ * D))
        self.q_norm, self.k_norm = uniform((D,), 0.1, torch.float32), uniform((D,), 0.1, torch.float32)
        self.iq_norm, self.ik_norm = uniform((DI,), 0.1, torch.float32), uniform((DI,), 0.1, torch.float32)
        self.router = uniform((E, H), fan(H), torch.float32)
        self.router_bias = uniform((E,), 0.05, torch.float32)
        self.gu = uniform((E, 2 * I, H), fan(H))
        self.down = uniform((E, H, I), fan(I))
        self.s_gu = uniform((2 * S, H), fan(H))
        self.s_down = uniform((H, S), fan(S))
        inv = THETA ** (-torch.arange(0, ROT, 2, device="cuda", dtype=torch.float32) / ROT)
        self.inv_freq = inv
        self.grouped = hasattr(torch, "_grouped_mm")

    def cos_sin(self, pos):
        ang = pos.float()[:, None] * self.inv_freq[None, :]
        ang = torch.cat((ang, ang), -1)
        return ang.cos(), ang.sin()

    def project(self, x, pos):
        qkv = x @ self.qkv.t()
        T = x.shape[0]
        q, k, v, iq, ik = qkv.split([HQ * D, HKV * D, HKV * D, HI * DI, DI], -1)
        cos, sin = self.cos_sin(pos)
        q = rope(rms(q.view(T, HQ, D), self.q_norm), cos, sin)
        k = rope(rms(k.view(T, HKV, D), self.k_norm), cos, sin)
        iq = rope(rms(iq.reshape(T, HI, DI), self.iq_norm), cos, sin)
        ik = rope(rms(ik.reshape(T, 1, DI), self.ik_norm), cos, sin)[:, 0]
        return q, k, v.reshape(T, HKV, D), iq, ik

    def moe(self, x):
        T = x.shape[0]
        s = torch.sigmoid(F.linear(x.float(), self.router))
        ids = torch.topk(s + self.router_bias, K, dim=-1).indices
        w = s.gather(1, ids)
        w = w / w.sum(-1, keepdim=True)
        shared = swiglu(x @ self.s_gu.t()) @ self.s_down.t()
        flat = ids.flatten()
        order = torch.argsort(flat, stable=True)
        rows = order // K
        xs = x[rows]
        if self.grouped:
            counts = torch.zeros(E, device="cuda", dtype=torch.int32)
            counts.scatter_add_(0, flat.int(), torch.ones_like(flat, dtype=torch.int32))
            offs = torch.cumsum(counts, 0, dtype=torch.int32)
            act = swiglu(torch._grouped_mm(xs, self.gu.transpose(-2, -1), offs=offs))
            y = torch._grouped_mm(act, self.down.transpose(-2, -1), offs=offs)
        else:
            counts = torch.bincount(flat, minlength=E).tolist()
            y = torch.empty(T * K, H, device="cuda", dtype=BF)
            start = 0
            for e, n in enumerate(counts):
                if n:
                    seg = slice(start, start + n)
                    y[seg] = swiglu(xs[seg] @ self.gu[e].t()) @ self.down[e].t()
                    start += n
        routed = torch.zeros(T, H, device="cuda", dtype=torch.float32)
        routed.index_add_(0, rows, y.float() * w.flatten()[order][:, None])
        return (routed * SCALE + shared.float()).to(BF)

    def decode(self, h, cache, pos, ctx_tokens):
        """h [B, H]; cache: k, v [B, ctx, HKV, D], ik [B, ctx, DI]; pos [B] (all equal)."""
        B = h.shape[0]
        x = rms(h, self.in_norm)
        q, k, v, iq, ik = self.project(x, pos)
        bi = torch.arange(B, device="cuda")
        cache["k"][bi, pos] = k
        cache["v"][bi, pos] = v
        cache["ik"][bi, pos] = ik
        nblk = ctx_tokens // BLK
        scores = torch.bmm(iq, cache["ik"].transpose(1, 2)).float()  # [B, HI, ctx]
        blocks = scores.view(B, HI, nblk, BLK).amax(-1)
        qb = (pos // BLK)[:, None, None].expand(B, HI, 1)
        for j in range(LOCAL):
            blocks.scatter_(2, (qb - j).clamp(min=0), float("inf"))
        sel = torch.topk(blocks, TOPK, dim=-1).indices  # [B, HI, TOPK]
        kb = cache["k"].view(B, nblk, BLK, HKV, D)
        vb = cache["v"].view(B, nblk, BLK, HKV, D)
        gi = torch.arange(HKV, device="cuda")[None, :, None]
        ks = kb[bi[:, None, None], sel, :, gi, :].reshape(B * HKV, 1, TOPK * BLK, D)
        vs = vb[bi[:, None, None], sel, :, gi, :].reshape(B * HKV, 1, TOPK * BLK, D)
        # Every selected key precedes the query (it ends its block): no mask; the group's 16
        # heads ride as 16 queries of one head.
        qg = q.view(B * HKV, 1, HQ // HKV, D)
        att = F.scaled_dot_product_attention(qg, ks, vs, scale=D ** -0.5)
        h = h + att.reshape(B, HQ * D) @ self.o.t()
        return h + self.moe(rms(h, self.post_norm))

    def prefill(self, h, cache):
        P = h.shape[0]
        pos = torch.arange(P, device="cuda")
        x = rms(h, self.in_norm)
        q, k, v, iq, ik = self.project(x, pos)
        cache["k"][0, :P] = k
        cache["v"][0, :P] = v
        cache["ik"][0, :P] = ik
        nblk = P // BLK
        causal = torch.ones(P, P, device="cuda", dtype=torch.bool).tril()
        scores = torch.matmul(iq.transpose(0, 1), ik.t()).float()  # [HI, P, P]
        scores.masked_fill_(~causal, float("-inf"))
        blocks = scores.view(HI, P, nblk, BLK).amax(-1)
        qb = (pos // BLK)[None, :, None].expand(HI, P, 1)
        for j in range(LOCAL):
            blocks.scatter_(2, (qb - j).clamp(min=0), float("inf"))
        sel = torch.topk(blocks, min(TOPK, nblk), dim=-1).indices
        chosen = torch.zeros(HI, P, nblk, device="cuda", dtype=torch.bool)
        chosen.scatter_(2, sel, True)
        mask = chosen.repeat_interleave(BLK, dim=2) & causal  # [HKV, P, P]
        qh = q.view(P, HKV, HQ // HKV, D).permute(1, 2, 0, 3)  # [HKV, 16, P, D]
        kh = k.permute(1, 0, 2)[:, None].expand(HKV, HQ // HKV, P, D)
        vh = v.permute(1, 0, 2)[:, None].expand(HKV, HQ // HKV, P, D)
        att = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask[:, None], scale=D ** -0.5)
        h = h + att.permute(2, 0, 1, 3).reshape(P, HQ * D) @ self.o.t()
        return h + self.moe(rms(h, self.post_norm))


def main():
    a = parse()
    torch.manual_seed(0)
    props = torch.cuda.get_device_properties(0)
    print(f"device: {props.name}; torch {torch.__version__}; grouped_mm "
          f"{'yes' if hasattr(torch, '_grouped_mm') else 'no (per-expert loop)'}")
    layer = Layer()
    out = {}
    P = a.prefill
    dense_params = layer.qkv.numel() + layer.o.numel() + E * H + layer.s_gu.numel() + layer.s_down.numel()
    expert_params = 3 * H * I
    with torch.no_grad():
        if a.context:
            print(f"decode, {a.context}-token context (random KV), median of {a.decode_iters} after {a.warmup}:")
        for B in a.batches if a.context else []:
            ctx = a.context
            cache = {"k": uniform((B, ctx, HKV, D), 1.7), "v": uniform((B, ctx, HKV, D), 1.7),
                     "ik": uniform((B, ctx, DI), 1.7)}
            h = uniform((B, H), 1.0)
            pos = torch.full((B,), ctx - 1, device="cuda", dtype=torch.long)
            ms = median_ms(lambda: layer.decode(h, cache, pos, ctx), a.warmup, a.decode_iters)
            out[f"decode_b{B}_ms"] = ms
            line = f"  batch {B:3d}: eager {ms:.3f} ms"
            try:
                g = torch.cuda.CUDAGraph()
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(2):
                        layer.decode(h, cache, pos, ctx)
                torch.cuda.current_stream().wait_stream(s)
                with torch.cuda.graph(g):
                    layer.decode(h, cache, pos, ctx)
                gms = median_ms(g.replay, a.warmup, a.decode_iters)
                out[f"decode_b{B}_graph_ms"] = gms
                line += f", CUDA graph {gms:.3f} ms"
            except Exception as e:  # capture is best effort: report why it did not work
                line += f", CUDA graph: not capturable ({type(e).__name__}: {str(e)[:120]})"
            print(line, flush=True)
            del cache
            torch.cuda.empty_cache()
        if P:
            cache = {"k": uniform((1, P, HKV, D), 1.7), "v": uniform((1, P, HKV, D), 1.7),
                     "ik": uniform((1, P, DI), 1.7)}
            h = uniform((P, H), 1.0)
            ms = median_ms(lambda: layer.prefill(h, cache), min(a.warmup, 2), a.prefill_iters)
            idx_keys = P * (P + 1) / 2
            att_keys = 0.0
            for i in range(P):
                att_keys += (i + 1) if i // BLK + 1 <= TOPK else (TOPK - 1) * BLK + i % BLK + 1
            flops = 2.0 * P * (dense_params + K * expert_params) + 2.0 * HI * DI * idx_keys + 4.0 * HQ * D * att_keys
            out["prefill_ms"] = ms
            out["prefill_tflops"] = flops / ms / 1e9
            print(f"prefill of one {P}-token prompt: {ms:.2f} ms, {flops / ms / 1e9:.1f} TFLOP/s useful "
                  f"(the same FLOP count as m3-bench-cuda-layer; the masked SDPA computes all causal keys)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f)
    if a.cpp_json:
        with open(a.cpp_json) as f:
            cpp = json.load(f)
        print("side by side (PyTorch time / m3 time; above 1: m3 faster):")
        for key in sorted(out):
            base = key.replace("_graph", "")
            if key.endswith("_ms") and base in cpp:
                print(f"  {key:24s} torch {out[key]:9.3f} ms   m3 {cpp[base]:9.3f} ms   ratio {out[key] / cpp[base]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

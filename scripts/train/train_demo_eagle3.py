#!/usr/bin/env python3
"""Trains the EAGLE-3 draft of the bundled demo model (tests/data/demo-model) on the GPU machine
and writes it in vLLM's llama_eagle3 format (config.json + model.safetensors), the format
engine/spec/eagle3_draft_model.cpp reads: fc fusing the residual stream entering three target
layers (eagle_aux_hidden_state_layer_ids), one Llama decoder layer over
[input_layernorm(embedding); hidden_norm(hidden)], the final norm, a reduced-vocabulary lm_head
and d2t (draft id -> target id offset) / t2d (target ids the draft can propose).

The draft at position t reads the target's hidden states at t and the token at t + 1 and
predicts the target's greedy token at t + 2; its chain feeds its own pre-norm output back as
the next position's hidden state. Training unrolls that chain K steps deep (EAGLE-3's
training-time test): step j's query for base t sits at position t + j and attends to the
step-0 keys at positions <= t and to its own chain's keys of steps 1..j, as the engine's
DraftKv holds them while it proposes. Labels are the target's own greedy tokens (argmax of its
logits, teacher-forced on the demo's answers), so the draft learns what the target would emit.

Examples come from the demo model's own generator (shared/tools/train_demo_model.py: synthetic
pictures of one shape, questions about colour and form, greetings) with seeds other than the
demo's evaluation; the released vision tower is patched in (shared/tools/release_vision.py).

Needs (GPU machine): torch, transformers 5.17 (minimax_m3_vl), safetensors, numpy, Pillow.
Usage: python3 train_demo_eagle3.py MODEL_DIR OUT_DIR [--tools DIR] [--steps N] [--k K]
Prints the training loss and, at the end, the chain's acceptance on held-out examples
(greedy, k drafts per step, measured the way the engine verifies them).
"""
import argparse
import json
import math
import os
import random
import sys
import time

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from safetensors.torch import save_file  # noqa: E402


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


class Draft(torch.nn.Module):
    """The draft layer as eagle3_draft_model.cpp computes it (norm_before_residual false)."""

    def __init__(self, c, embed):
        super().__init__()
        H, Ht, D = c["hidden_size"], c["target_hidden_size"], c["head_dim"]
        nh, nkv, inter = c["num_attention_heads"], c["num_key_value_heads"], c["intermediate_size"]
        self.c = c
        self.embed = torch.nn.Parameter(embed.clone(), requires_grad=False)
        lin = lambda i, o: torch.nn.Parameter(torch.randn(o, i) / math.sqrt(i))  # noqa: E731
        self.fc = lin(3 * Ht, H)
        self.input_norm = torch.nn.Parameter(torch.ones(H))
        self.hidden_norm = torch.nn.Parameter(torch.ones(H))
        self.q, self.k, self.v = lin(2 * H, nh * D), lin(2 * H, nkv * D), lin(2 * H, nkv * D)
        self.o = lin(nh * D, H)
        self.post_norm = torch.nn.Parameter(torch.ones(H))
        self.gate, self.up, self.down = lin(H, inter), lin(H, inter), lin(inter, H)
        self.norm = torch.nn.Parameter(torch.ones(H))
        self.lm_head = lin(H, c["draft_vocab_size"])
        inv = 1.0 / (c["rope_theta"] ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
        self.register_buffer("inv_freq", inv, persistent=False)

    def rope(self, pos):  # pos [B, T] -> cos, sin [B, 1, T, D]
        ang = pos[..., None].float() * self.inv_freq
        ang = torch.cat([ang, ang], -1)[:, None]
        return ang.cos(), ang.sin()

    def qkv(self, tokens, hidden, pos):
        c, eps = self.c, self.c["rms_norm_eps"]
        B, T, _ = hidden.shape
        D, nh, nkv = c["head_dim"], c["num_attention_heads"], c["num_key_value_heads"]
        x = torch.cat([rms_norm(self.embed[tokens], self.input_norm, eps),
                       rms_norm(hidden, self.hidden_norm, eps)], -1)
        q = (x @ self.q.T).view(B, T, nh, D).transpose(1, 2)
        k = (x @ self.k.T).view(B, T, nkv, D).transpose(1, 2)
        v = (x @ self.v.T).view(B, T, nkv, D).transpose(1, 2)
        cos, sin = self.rope(pos)
        return rotate_half(q, cos, sin), rotate_half(k, cos, sin), v

    def rest(self, hidden, att):
        eps = self.c["rms_norm_eps"]
        B, nh, T, D = att.shape
        h = hidden + att.transpose(1, 2).reshape(B, T, nh * D) @ self.o.T
        xn = rms_norm(h, self.post_norm, eps)
        h = h + (F.silu(xn @ self.gate.T) * (xn @ self.up.T)) @ self.down.T
        return h, rms_norm(h, self.norm, eps) @ self.lm_head.T  # pre-norm output, logits

    def unroll(self, aux, ids, mask, steps):
        """Logits of chain steps 0..steps-1 for every base position t (step j predicts the
        token at t + 2 + j from the token at t + 1 + j). aux [B, T, 3Ht], ids [B, T], mask
        [B, T] (real tokens). Returns a list of [B, T, Vd]."""
        c = self.c
        B, T = ids.shape
        rep = c["num_attention_heads"] // c["num_key_value_heads"]
        scale = 1.0 / math.sqrt(c["head_dim"])
        pos = torch.arange(T, device=ids.device)[None].expand(B, T)
        nxt = lambda j: torch.cat([ids[:, 1 + j:], ids.new_zeros(B, 1 + j)], 1)  # noqa: E731
        hidden = aux @ self.fc.T
        q, k0, v0 = self.qkv(nxt(0), hidden, pos)
        k0, v0 = k0.repeat_interleave(rep, 1), v0.repeat_interleave(rep, 1)
        causal = torch.ones(T, T, dtype=torch.bool, device=ids.device).tril()
        keep = causal[None, None] & mask[:, None, None, :].bool()
        out, diag_k, diag_v = [], [], []
        for j in range(steps):
            if j > 0:
                q, kj, vj = self.qkv(nxt(j), hidden, pos + j)
                diag_k.append(kj.repeat_interleave(rep, 1))
                diag_v.append(vj.repeat_interleave(rep, 1))
            s = (q @ k0.transpose(-1, -2)) * scale
            s = s.masked_fill(~keep, float("-inf"))
            if diag_k:
                sd = torch.stack([(q * kd).sum(-1) for kd in diag_k], -1) * scale  # [B, h, T, j]
                p = torch.softmax(torch.cat([s, sd], -1), -1)
                att = p[..., :T] @ v0 + sum(p[..., T + i, None] * vd for i, vd in enumerate(diag_v))
            else:
                att = torch.softmax(s, -1) @ v0
            hidden, logits = self.rest(hidden, att)
            out.append(logits)
        return out

    def tensors(self, d2t, t2d):
        n = "layers.0."
        t = {"embed_tokens.weight": self.embed, "fc.weight": self.fc,
             n + "input_layernorm.weight": self.input_norm, n + "hidden_norm.weight": self.hidden_norm,
             n + "self_attn.q_proj.weight": self.q, n + "self_attn.k_proj.weight": self.k,
             n + "self_attn.v_proj.weight": self.v, n + "self_attn.o_proj.weight": self.o,
             n + "post_attention_layernorm.weight": self.post_norm, n + "mlp.gate_proj.weight": self.gate,
             n + "mlp.up_proj.weight": self.up, n + "mlp.down_proj.weight": self.down,
             "norm.weight": self.norm, "lm_head.weight": self.lm_head}
        t = {k: v.detach().float().contiguous().cpu() for k, v in t.items()}
        t["d2t"] = d2t.cpu()
        t["t2d"] = t2d.cpu()
        return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--tools", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../shared/tools"))
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--aux", default="1,2,3")
    ap.add_argument("--lr", type=float, default=2e-3)
    a = ap.parse_args()
    sys.path.insert(0, os.path.abspath(a.tools))
    import release_vision  # noqa: E402
    from train_demo_model import example  # noqa: E402
    from transformers import MiniMaxM3SparseForConditionalGeneration  # noqa: E402
    from transformers.models.minimax_m3_vl.processing_minimax_m3_vl import MiniMaxM3VLProcessor  # noqa: E402

    torch.manual_seed(0)
    target = MiniMaxM3SparseForConditionalGeneration.from_pretrained(a.model_dir, dtype=torch.bfloat16).cuda().eval()
    for c in (target.config, target.config.text_config, target.config.vision_config):
        c._attn_implementation = "eager"
    release_vision.patch(target, target.config.vision_config.to_dict().get("vision_segment_max_frames") or 4)
    processor = MiniMaxM3VLProcessor.from_pretrained(a.model_dir)
    tok = processor.tokenizer
    tc = target.config.text_config
    think_end = tok.convert_tokens_to_ids("</think>")
    aux_layers = [int(x) for x in a.aux.split(",")]

    def encode(msgs, answer, img):
        prompt = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        enc = processor(text=[prompt + "</think>\n\n" + answer + tok.eos_token], images=[img] if img else None,
                        return_tensors="pt")
        ids = enc["input_ids"][0].tolist()
        first_answer = len(ids) - 1 - ids[::-1].index(think_end)  # the first generated token
        return enc, first_answer

    @torch.no_grad()
    def batch_of(rng, n):
        """Target pass over n examples: aux [B, T, 3H] f32, ids, mask, greedy [B, T] (the
        target's token after each position), answer_from [B]."""
        encs = []
        for _ in range(n):
            msgs, answer, img, _ = example(rng)
            encs.append(encode(msgs, answer, img))
        T = max(e["input_ids"].shape[1] for e, _ in encs)
        pad = tc.pad_token_id
        ids = torch.full((n, T), pad, dtype=torch.long)
        mask = torch.zeros(n, T, dtype=torch.long)
        for i, (e, _) in enumerate(encs):
            L = e["input_ids"].shape[1]
            ids[i, :L], mask[i, :L] = e["input_ids"][0], 1
        pix = [e["pixel_values"] for e, _ in encs if e.get("pixel_values") is not None]
        grid = [e["image_grid_thw"] for e, _ in encs if e.get("image_grid_thw") is not None]
        kw = {"pixel_values": torch.cat(pix).cuda(), "image_grid_thw": torch.cat(grid).cuda()} if pix else {}
        out = target(input_ids=ids.cuda(), attention_mask=mask.cuda(), output_hidden_states=True, **kw)
        aux = torch.cat([out.hidden_states[l].float() for l in aux_layers], -1)
        greedy = out.logits.argmax(-1)
        return aux, ids.cuda(), mask.cuda(), greedy, torch.tensor([f for _, f in encs]).cuda()

    # The draft vocabulary: every token the target emits in its answers (and eos), ascending.
    rng = random.Random(7)
    seen = set([tc.eos_token_id])
    for _ in range(8):
        _, ids, mask, greedy, first = batch_of(rng, 32)
        for i in range(ids.shape[0]):
            L = int(mask[i].sum())
            seen.update(greedy[i, int(first[i]) - 1:L - 1].tolist())
    draft_ids = sorted(seen)
    V, Vd = tc.vocab_size, len(draft_ids)
    t2d = torch.zeros(V, dtype=torch.bool)
    t2d[draft_ids] = True
    d2t = torch.tensor([t - d for d, t in enumerate(draft_ids)], dtype=torch.int64)
    to_draft = torch.full((V,), -100, dtype=torch.long)
    to_draft[draft_ids] = torch.arange(Vd)
    to_draft = to_draft.cuda()
    cfg = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
           "hidden_size": tc.hidden_size, "target_hidden_size": tc.hidden_size,
           "num_attention_heads": tc.num_attention_heads, "num_key_value_heads": tc.num_key_value_heads,
           "head_dim": tc.head_dim, "intermediate_size": 2 * tc.hidden_size, "num_hidden_layers": 1,
           "rms_norm_eps": tc.rms_norm_eps, "rope_theta": 10000.0, "vocab_size": V, "draft_vocab_size": Vd,
           "tie_word_embeddings": False, "norm_before_residual": False,
           "eagle_config": {"eagle_aux_hidden_state_layer_ids": aux_layers}}
    print(f"draft vocabulary {Vd} of {V}; aux layers {aux_layers}", flush=True)
    embed = target.get_input_embeddings().weight.detach().float()
    draft = Draft(cfg, embed).cuda()
    opt = torch.optim.AdamW([p for p in draft.parameters() if p.requires_grad], lr=a.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=a.lr, total_steps=a.steps, pct_start=0.1)

    def labels_of(ids, mask, greedy, first, j):
        """Step j's label at base t: the target's greedy token at t + 2 + j, in the answer."""
        B, T = ids.shape
        lab = torch.full((B, T), -100, dtype=torch.long, device=ids.device)
        pos = torch.arange(T, device=ids.device)[None]
        src = pos + 1 + j  # the target's prediction after position t + 1 + j
        ok = (src < mask.sum(1, keepdim=True) - 1) & (src + 1 >= first[:, None])
        g = torch.gather(greedy, 1, src.clamp(max=T - 1).expand(B, T))
        lab[ok] = to_draft[g[ok]]
        return lab

    rng = random.Random(1234)
    t0 = time.time()
    for step in range(a.steps):
        aux, ids, mask, greedy, first = batch_of(rng, a.batch)
        logits = draft.unroll(aux, ids, mask, a.k)
        loss = 0.0
        for j, lg in enumerate(logits):
            loss = loss + (0.8 ** j) * F.cross_entropy(lg.flatten(0, 1), labels_of(ids, mask, greedy, first, j).flatten(),
                                                       ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 100 == 0 or step == a.steps - 1:
            print(f"step {step} loss {loss.item():.4f} {time.time() - t0:.0f}s", flush=True)

    # Held-out acceptance of the unrolled chain at k: per base position in an answer, the drafts
    # accepted before the first mismatch with the target's greedy tokens.
    rng = random.Random(99)
    proposed = accepted = 0
    with torch.no_grad():
        for _ in range(8):
            aux, ids, mask, greedy, first = batch_of(rng, 32)
            logits = draft.unroll(aux, ids, mask, a.k)
            labs = [labels_of(ids, mask, greedy, first, j) for j in range(a.k)]
            ok_all = torch.ones_like(labs[0], dtype=torch.bool)
            for j in range(a.k):  # the j-th draft counts where it has a label (inside the answer)
                valid = labs[j] != -100
                ok_all = ok_all & (logits[j].argmax(-1) == labs[j]) & valid
                accepted += int(ok_all.sum())
                proposed += int(valid.sum())
    print(f"held-out chain acceptance at k={a.k} (teacher-forced tokens): {accepted / max(1, proposed):.3f}")
    os.makedirs(a.out_dir, exist_ok=True)
    save_file(draft.tensors(d2t, t2d), os.path.join(a.out_dir, "model.safetensors"))
    json.dump(cfg, open(os.path.join(a.out_dir, "config.json"), "w"), indent=2)
    print("wrote", a.out_dir)


if __name__ == "__main__":
    main()

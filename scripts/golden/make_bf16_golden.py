#!/usr/bin/env python3
"""A golden set like make_golden.py's (same spec, same seeds, same cases) whose weights are exactly
bf16-representable: every parameter (and the router's e_score_correction_bias) is rounded to bf16
and back right after the random initialization, before the model is saved (as float32) and before
the float32 reference runs. An engine holding the weights in bf16 then loads them without loss,
and what separates it from the reference is its bf16 activations alone (on the random-weight sets,
rounding the weights alone moved the logits 0.11-0.22 relative L2 and flipped near-tied MSA / MoE
choices). The rotary inv_freq buffers are left alone: they are computed, not loaded.

Also saves, per case, the reference's raw logits of every greedy generate() step
(greedy_logits.safetensors: "<case>.step_logits" [steps, vocab]), so a differing greedy token can
be judged a near-tie or not (tests/cuda/cuda_bf16_golden_compare.cpp).

Run on the GPU machine (transformers 5.17, torch). Usage:
  python3 make_bf16_golden.py TOOLS_DIR SPEC.json OUT_DIR
  TOOLS_DIR  the folder holding make_golden.py and release_vision.py (../shared/tools)
"""
import sys

import torch
from safetensors.torch import save_file


def main():
    tools, spec, out = sys.argv[1:4]
    sys.path.insert(0, tools)
    import make_golden
    from transformers import MiniMaxM3SparseForConditionalGeneration as Model

    randomize = make_golden.randomize_

    def randomize_bf16_(model, seed):
        randomize(model, seed)
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.bfloat16().float())
            for name, b in model.named_buffers():
                if "e_score_correction_bias" in name:
                    b.copy_(b.bfloat16().float())

    make_golden.randomize_ = randomize_bf16_

    steps = []
    generate = Model.generate

    def generate_keeping_logits(self, *args, **kwargs):
        kwargs.update(output_logits=True, return_dict_in_generate=True)
        r = generate(self, *args, **kwargs)
        steps.append(torch.stack([step[0].float() for step in r.logits]).contiguous())
        return r.sequences

    Model.generate = generate_keeping_logits
    sys.argv = ["make_golden.py", spec, out]
    make_golden.main()
    names = ["text", "image", "image2", "video"]  # make_golden.py's generate() calls, in order
    assert len(steps) == len(names), f"{len(steps)} generate() calls, expected {len(names)}"
    save_file({f"{n}.step_logits": s for n, s in zip(names, steps)}, f"{out}/greedy_logits.safetensors")
    print("step logits:", {n: tuple(s.shape) for n, s in zip(names, steps)})


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The chat-e2e conversations as a model-cases file with logits, for comparing an engine's logits
and not only its completions: the model directory (bf16 weights) loaded by from_pretrained in
float32 (exact rotary frequencies, release vision tower), each case of chat_cases.json encoded by
the directory's processor (its prompt_ids must come out), then the prompt's logits and a greedy
generate() of the case's completion length, stopping at EOS, with the raw logits of every step.

Writes OUT_DIR/chat_cases.safetensors: "<case>.input_ids", ".pixel_values", ".image_grid_thw",
".logits" [prompt, vocab], ".greedy_tokens", ".step_logits" [steps, vocab], for
tests/cuda/cuda_bf16_golden_compare.cpp (with --stop-at-eos). Run on the GPU machine.
Usage: python3 chat_e2e_logits_reference.py CHAT_E2E_DIR TOOLS_DIR OUT_DIR
"""
import json
import os
import sys

import torch
from PIL import Image
from safetensors.torch import save_file


def main():
    data, tools, out = sys.argv[1:4]
    sys.path.insert(0, tools)
    import release_vision
    from transformers import MiniMaxM3SparseForConditionalGeneration
    from transformers.models.minimax_m3_vl.processing_minimax_m3_vl import MiniMaxM3VLProcessor

    mdir = os.path.join(data, "model")
    cfg = json.load(open(os.path.join(mdir, "config.json")))
    model = MiniMaxM3SparseForConditionalGeneration.from_pretrained(
        mdir, dtype=torch.float32, attn_implementation="eager").eval()
    for c in (model.config, model.config.text_config, model.config.vision_config):
        c._attn_implementation = "eager"
    release_vision.patch(model, cfg["vision_config"].get("vision_segment_max_frames"))
    proc = MiniMaxM3VLProcessor.from_pretrained(mdir)
    gc = model.generation_config

    tensors = {}
    for case in json.load(open(os.path.join(data, "chat_cases.json"))):
        name = case["name"]
        pics = []
        for m in case["messages"]:
            if isinstance(m["content"], list):
                for part in m["content"]:
                    if part["type"] == "image_url":
                        path = os.path.join(data, "images", os.path.basename(part["image_url"]["url"]))
                        pics.append(Image.open(path).convert("RGB"))
        enc = proc(text=[case["prompt"]], images=pics or None, return_tensors="pt")
        if enc["input_ids"][0].tolist() != case["prompt_ids"]:
            print(f"{name}: the processor's ids differ from chat_cases.json's prompt_ids", flush=True)
        inputs = {k: enc[k] for k in ("input_ids", "attention_mask", "pixel_values", "image_grid_thw") if k in enc}
        with torch.no_grad():
            logits = model(**inputs, use_cache=False).logits[0].float()
            r = model.generate(**inputs, max_new_tokens=max(1, len(case["completion_ids"])), do_sample=False,
                               eos_token_id=gc.eos_token_id, pad_token_id=gc.pad_token_id,
                               output_logits=True, return_dict_in_generate=True)
        tokens = r.sequences[0, enc["input_ids"].shape[1]:]
        tensors[f"{name}.input_ids"] = enc["input_ids"][0].long().contiguous()
        if "pixel_values" in enc:
            tensors[f"{name}.pixel_values"] = enc["pixel_values"].float().contiguous()
            tensors[f"{name}.image_grid_thw"] = enc["image_grid_thw"].long().contiguous()
        tensors[f"{name}.logits"] = logits.contiguous()
        tensors[f"{name}.greedy_tokens"] = tokens.long().contiguous()
        tensors[f"{name}.step_logits"] = torch.stack([s[0].float() for s in r.logits]).contiguous()
        print(f"{name}: prompt {enc['input_ids'].shape[1]} tokens, completion {tokens.tolist()} "
              f"(chat_cases.json: {case['completion_ids']})", flush=True)
    os.makedirs(out, exist_ok=True)
    save_file(tensors, os.path.join(out, "chat_cases.safetensors"))


if __name__ == "__main__":
    main()

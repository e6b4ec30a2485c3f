#!/usr/bin/env python3
"""Trains the m3-agent test model: the chat-e2e architecture (tiny MiniMax-M3: MSA sparse
attention, MoE) with the m3-chat tokenizer and the real MiniMax-M3 template, taught to answer a
few fixed agent conversations with memorized M3 replies: reasoning in `<mm:think>`, then either a
text answer or a namespace-token tool-call block (one invoke; two invokes with array and nested
object parameters; a text answer after a tool result). Unlike the random chat-e2e weights, its
greedy output exercises the reasoning and tool-call parsers and the streamed tool-call deltas of
the whole serving stack with real engine output.

The prompts are rendered with tests/template/render_reference.py (jinja2 configured as
transformers' apply_chat_template), the renderer the gateway's template engine is checked
against, so a request the gateway renders from the same messages and tools gives the same tokens.
Each reply is the template's own rendering of the assistant turn (so the reply sent back in a
later turn renders the same), trained in the thinking modes enabled, disabled (no reasoning) and
unset. Training stops once greedy decoding with the weights rounded to bf16 reproduces every
reply with a logit margin of at least MARGIN at every step.

Needs (GPU machine): torch, transformers 5.17 (minimax_m3_vl), jinja2.
Usage: python3 train_m3_agent_model.py TESTS_DATA OUT_DIR [SECONDS]
  TESTS_DATA  tests/data (chat-e2e/model: the architecture; m3-chat/model: tokenizer, template)
Writes OUT_DIR/model (model.safetensors in bf16; config.json and generation_config.json of
chat-e2e/model; the tokenizer files and chat_template.jinja of m3-chat/model) and
OUT_DIR/eval.json (each case's request, prompt, reply text and ids, expected parse, and margin).
"""
import copy
import json
import os
import shutil
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
for p in (os.path.join(HERE, "../../tests/template"), HERE):
    sys.path.insert(0, p)
import render_reference  # noqa: E402

MARGIN = 6.0
EOS = "[e~["

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather forecast for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
EVENT = {
    "type": "function",
    "function": {
        "name": "create_event",
        "description": "Put an event in the calendar.",
        "parameters": {
            "type": "object",
            "properties": {
                "title": {"type": "string"},
                "attendees": {"type": "array", "items": {"type": "string"}},
                "place": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
                },
            },
            "required": ["title"],
        },
    },
}
TOOLS = [WEATHER, EVENT]

PARIS_Q = "What's the weather in Paris for 3 days?"
PARIS_CALL = {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}
PARIS_REASONING = "The user wants a 3-day forecast for Paris. I will call get_weather."
PICNIC_CALLS = [
    {"name": "get_weather", "arguments": {"city": "Rome", "days": 1}},
    {"name": "create_event",
     "arguments": {"title": "Picnic", "attendees": ["Ana", "Ben"], "place": {"city": "Rome", "country": "Italy"}}},
]


def assistant(reasoning, content, calls):
    m = {"role": "assistant", "content": content}
    if reasoning:
        m["reasoning_content"] = reasoning
    if calls:
        m["tool_calls"] = [{"id": f"call_{i}", "type": "function", "function": copy.deepcopy(c)}
                           for i, c in enumerate(calls)]
    return m


# name, messages, tools, reasoning, content, tool calls
CASES = [
    ("weather", [{"role": "user", "content": PARIS_Q}], TOOLS, PARIS_REASONING, None, [PARIS_CALL]),
    ("picnic", [{"role": "user", "content": "Plan a picnic in Rome tomorrow with Ana and Ben."}], TOOLS,
     "I need the weather in Rome and a calendar event for the picnic.", None, PICNIC_CALLS),
    ("capital", [{"role": "user", "content": "What is the capital of France?"}], None,
     "A simple fact question.", "The capital of France is Paris.", None),
    ("weather_result",
     [{"role": "user", "content": PARIS_Q}, assistant(PARIS_REASONING, None, [PARIS_CALL]),
      {"role": "tool", "tool_call_id": "call_0", "content": "sunny, rain, sunny"}], TOOLS,
     "The tool returned the forecast.", "Paris: sunny, then rain, then sunny.", None),
]
MODES = ["enabled", None, "disabled"]


def render(env, source, messages, tools, mode, gen):
    req = {"messages": messages, "add_generation_prompt": gen}
    if tools:
        req["tools"] = tools
    if mode is not None:
        req["thinking_mode"] = mode
    return render_reference.render(env, source, req)


def build_examples(tok, source):
    env = render_reference.make_env()
    out = []
    for name, msgs, tools, reasoning, content, calls in CASES:
        for mode in MODES:
            r = None if mode == "disabled" else reasoning
            prompt = render(env, source, msgs, tools, mode, True)
            full = render(env, source, msgs + [assistant(r, content, calls)], tools, mode, False)
            assert full.startswith(prompt) and full.endswith(EOS + "\n"), (name, mode)
            reply = full[len(prompt):-1]
            p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
            f_ids = tok(prompt + reply, add_special_tokens=False)["input_ids"]
            assert f_ids[:len(p_ids)] == p_ids, (name, mode)
            out.append({
                "name": name, "thinking_mode": mode,
                "request": {"messages": msgs, **({"tools": tools} if tools else {})},
                "expected": {"reasoning_content": r, "content": content, "tool_calls": calls},
                "prompt": prompt, "reply": reply, "prompt_ids": p_ids, "reply_ids": f_ids[len(p_ids):],
            })
    return out


def reply_logits(model, ex, dev):
    """The logits predicting each reply token (teacher forced) and the reply's ids."""
    ids = torch.tensor([ex["prompt_ids"] + ex["reply_ids"]], device=dev)
    n = len(ex["prompt_ids"])
    return model(input_ids=ids).logits[0, n - 1:-1].float(), torch.tensor(ex["reply_ids"], device=dev)


def margins(lg, tgt):
    """Per reply token: the target's logit minus the best other logit."""
    t = lg.gather(1, tgt[:, None])[:, 0]
    other = lg.scatter(1, tgt[:, None], float("-inf")).max(1).values
    return t - other


def complete_model_dir(data, model_dir):
    """Everything beside the weights. The config is chat-e2e's own: save_pretrained would write
    the float32 training dtype into it, and the architecture is unchanged."""
    for name in ("config.json", "generation_config.json"):
        shutil.copy(os.path.join(data, "chat-e2e", "model", name), model_dir)
    for name in ("chat_template.jinja", "tokenizer.json", "tokenizer_config.json", "processor_config.json"):
        shutil.copy(os.path.join(data, "m3-chat", "model", name), model_dir)


def main():
    data, out = sys.argv[1], sys.argv[2]
    budget = float(sys.argv[3]) if len(sys.argv) > 3 else 300.0
    from transformers import AutoTokenizer, MiniMaxM3SparseForConditionalGeneration
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    m3chat = os.path.join(data, "m3-chat", "model")
    tok = AutoTokenizer.from_pretrained(m3chat)
    source = open(os.path.join(m3chat, "chat_template.jinja"), encoding="utf-8").read()
    examples = build_examples(tok, source)
    print("examples", [(e["name"], e["thinking_mode"], len(e["prompt_ids"]), len(e["reply_ids"])) for e in examples],
          flush=True)
    model = MiniMaxM3SparseForConditionalGeneration.from_pretrained(
        os.path.join(data, "chat-e2e", "model"), dtype=torch.float32, attn_implementation="eager").to(dev)
    # Text only: the vision tower and projector keep chat-e2e's weights.
    for n, p in model.named_parameters():
        p.requires_grad_(not ("vision_tower" in n or "projector" in n))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-3, weight_decay=0.0)

    def rounded_eval():
        saved = [p.detach().clone() for p in model.parameters()]
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.bfloat16().float())
            ms = [margins(*reply_logits(model, e, dev)) for e in examples]
            for p, s in zip(model.parameters(), saved):
                p.copy_(s)
        return ms

    t0 = time.time()
    step = 0
    best = None
    while True:
        model.train()
        opt.zero_grad()
        total = 0.0
        for e in examples:
            lg, tgt = reply_logits(model, e, dev)
            ce = torch.nn.functional.cross_entropy(lg, tgt)
            hinge = torch.relu(MARGIN + 2.0 - margins(lg, tgt)).mean()
            loss = (ce + hinge) / len(examples)
            loss.backward()
            total += loss.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 25 == 0:
            model.eval()
            ms = rounded_eval()
            worst = min(float(m.min()) for m in ms)
            wrong = sum(int((m <= 0).sum()) for m in ms)
            print(f"step {step} loss {total:.4f} worst margin {worst:.2f} wrong {wrong} {time.time() - t0:.0f}s",
                  flush=True)
            if worst >= MARGIN or time.time() - t0 > budget:
                best = ms
                break

    model.eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.bfloat16().float())
        exact = True
        for e, m in zip(examples, best):
            ids = torch.tensor([e["prompt_ids"]], device=dev)
            g = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=len(e["reply_ids"]) + 4,
                               do_sample=False, eos_token_id=2, pad_token_id=0)
            got = g[0, ids.shape[1]:].tolist()
            e["greedy_equal"] = got == e["reply_ids"]
            e["min_margin"] = float(m.min())
            exact &= e["greedy_equal"]
            print(e["name"], e["thinking_mode"], "greedy equal" if e["greedy_equal"] else "DIFFERS",
                  f"margin {e['min_margin']:.2f}", repr(tok.decode(got)), flush=True)
    os.makedirs(os.path.join(out, "model"), exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(os.path.join(out, "model"), safe_serialization=True)
    complete_model_dir(data, os.path.join(out, "model"))
    json.dump({"steps": step, "margin_target": MARGIN, "all_greedy_equal": exact, "cases": examples},
              open(os.path.join(out, "eval.json"), "w"), indent=1, ensure_ascii=False)
    print("all greedy equal:", exact, flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Builds tests/data/m3-chat: a model directory that speaks MiniMax-M3's chat protocol, and the
goldens the M3 chat tests compare against, rendered by Python jinja2 configured as transformers
configures it (tests/template/render_reference.py: ImmutableSandboxedEnvironment, trim_blocks,
lstrip_blocks, and transformers' tojson = json.dumps(x, ensure_ascii=False, indent, separators,
sort_keys)). Deterministic: the same inputs give the same files.

Usage: make_m3_chat_goldens.py [M3_TEMPLATE]   (run from the repository root; default
M3_TEMPLATE: ../shared/golden/chat_templates/MiniMax-M3.jinja, the model's own file)

Writes:
  tests/data/m3-chat/model/        chat_template.jinja (the M3 template, verbatim), the chat-e2e
                                   test model's tokenizer with ids 4, 5 and 10 renamed to
                                   <mm:think>, </mm:think> and ]<]minimax[>[ (special, as in M3's
                                   tokenizer; the ids and vocabulary size stay those of the
                                   chat-e2e weights, so an engine can serve them behind this
                                   directory), its tokenizer_config / config / generation_config /
                                   processor_config.
  tests/data/m3-chat/template_cases.json   [{name, request, rendered}]: conversations over every
                                   thinking mode, root / developer / system roles, tools, tool
                                   calls with nested objects, arrays, booleans, numbers and
                                   omitted nulls, tool results with images, multi-turn reasoning.
  tests/data/m3-chat/parse_cases.json      [{name, model, request, text, expected}]: model
                                   outputs and what parsing them must give back: assistant turns
                                   rendered by the template (random nested arguments typed by
                                   random schemas, several calls, every thinking mode) with the
                                   message they were rendered from, plus the model's quirks.
"""
import copy
import json
import os
import random
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "template"))
import render_reference  # noqa: E402

NS = "]<]minimax[>["
OUT = "tests/data/m3-chat"
BASE_MODEL = "tests/data/chat-e2e/model"
RENAMES = {4: "<mm:think>", 5: "</mm:think>", 10: NS}


def write_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False, indent=1)
        f.write("\n")


def build_model_dir(template_path):
    model = os.path.join(OUT, "model")
    os.makedirs(model, exist_ok=True)
    shutil.copyfile(template_path, os.path.join(model, "chat_template.jinja"))
    with open(os.path.join(BASE_MODEL, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    vocab = tok["model"]["vocab"]
    by_id = {i: s for s, i in vocab.items()}
    for entry in tok["added_tokens"]:
        if entry["id"] in RENAMES:
            new = RENAMES[entry["id"]]
            del vocab[by_id[entry["id"]]]
            vocab[new] = entry["id"]
            entry["content"] = new
            entry["special"] = True
    with open(os.path.join(model, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, separators=(",", ":"))
    for name in ["tokenizer_config.json", "config.json", "generation_config.json",
                 "processor_config.json"]:
        shutil.copyfile(os.path.join(BASE_MODEL, name), os.path.join(model, name))
    return os.path.join(model, "chat_template.jinja")


# ---------------------------------------------------------------------------------------------
# Random tools and arguments

WORDS = ["Seattle", "São Paulo", "北京", "naïve", "emoji 🙂", "a < b", "x > y", "007", "true",
         "null", "3.5", "  padded  ", "line\nbreak", "quote \"q\"", "{\"json\": 1}", "tab\there",
         "", "ünïcödé", "-", "[1, 2]", "C:\\path", "ends with space "]
KEYS = ["city", "max-results", "first name", "unit", "item", "tags", "days", "lat", "lon",
        "options", "nested_obj", "q", "filter-by", "x1", "名前"]
TOOL_NAMES = ["get_weather", "search-docs", "save_file", "run_query", "plan.trip"]


def random_schema(rng, depth):
    kinds = ["string", "integer", "number", "boolean"]
    if depth < 3:
        kinds += ["object", "array"]
    kind = rng.choice(kinds)
    if kind == "object":
        keys = rng.sample(KEYS, rng.randint(1, 4))
        return {"type": "object",
                "properties": {k: random_schema(rng, depth + 1) for k in keys}}
    if kind == "array":
        return {"type": "array", "items": random_schema(rng, depth + 1)}
    return {"type": kind}


def random_value(rng, schema, allow_none=True):
    t = schema["type"]
    if t == "object":
        out = {}
        for k, sub in schema["properties"].items():
            r = rng.random()
            if r < 0.15:
                continue
            out[k] = None if (allow_none and r < 0.25) else random_value(rng, sub)
        return out
    if t == "array":
        return [random_value(rng, schema["items"], allow_none=False)
                for _ in range(rng.randint(0, 3))]
    if t == "string":
        return rng.choice(WORDS)
    if t == "integer":
        return rng.choice([0, 7, -3, 42, 100000, 2 ** 40])
    if t == "number":
        return rng.choice([0.5, -2.25, 3.0, 1e-05, 123456.789, 2.5e20])
    return rng.choice([True, False])


def drop_none(v):
    if isinstance(v, dict):
        return {k: drop_none(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [drop_none(x) for x in v]
    return v


def random_tools(rng):
    tools = []
    for name in rng.sample(TOOL_NAMES, rng.randint(1, 3)):
        keys = rng.sample(KEYS, rng.randint(1, 4))
        tools.append({"type": "function", "function": {
            "name": name, "description": f"The {name} tool.",
            "parameters": {"type": "object",
                           "properties": {k: random_schema(rng, 1) for k in keys}}}})
    return tools


def random_calls(rng, tools):
    calls = []
    for i in range(rng.randint(1, 3)):
        fn = rng.choice(tools)["function"]
        args = random_value(rng, fn["parameters"])
        calls.append({"id": f"call_{i}", "type": "function",
                      "function": {"name": fn["name"], "arguments": args}})
    return calls


REASONINGS = ["The user wants the weather. I should call the tool.",
              "Step 1: read.\nStep 2: think about <tags> & \"quotes\".\n\nDone.",
              "多步推理：先查询，再回答。", " leading and trailing spaces "]
CONTENTS = ["", "Let me check that for you.\n", "Sure! 🙂", "Two calls follow:", "Answer: 42."]

# ---------------------------------------------------------------------------------------------
# Template suite


def template_cases(rng):
    img = {"type": "image"}
    weather = {"type": "function", "function": {
        "name": "get_weather", "description": "Weather for a city. Ünïcödé: 天气",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}, "days": {"type": "integer"},
            "metric": {"type": "boolean"},
            "options": {"type": "object", "properties": {"lang": {"type": "string"},
                                                         "hours": {"type": "array",
                                                                   "items": {"type": "integer"}}}}},
            "required": ["city"]}}}
    nested_call = {"type": "function", "function": {"name": "get_weather", "arguments": {
        "city": "Zürich", "days": 3, "metric": True, "threshold": 2.5, "skip": None,
        "options": {"lang": "de", "hours": [6, 12, 18], "none_inside": None, "flag": False},
        "tags": [{"k": "a", "v": 1}, {"k": "b", "v": None}], "empty": {}, "list": []}}}
    cases = []
    for mode in [None, "enabled", "disabled", "adaptive"]:
        kw = {} if mode is None else {"thinking_mode": mode}
        tag = mode or "undefined"
        cases.append((f"user_only_{tag}",
                      {"messages": [{"role": "user", "content": "Hello"}],
                       "add_generation_prompt": True, **kw}))
        cases.append((f"tools_{tag}",
                      {"messages": [{"role": "system", "content": "Be brief."},
                                    {"role": "user", "content": "Weather in Paris?"}],
                       "tools": [weather], "add_generation_prompt": True, **kw}))
        cases.append((f"tool_round_trip_{tag}", {"messages": [
            {"role": "root", "content": "You are M3, root instructions."},
            {"role": "developer", "content": "Developer rules."},
            {"role": "user", "content": [{"type": "text", "text": "Look: "}, img,
                                         {"type": "text", "text": " what city?"}]},
            {"role": "assistant", "content": "Checking.", "reasoning_content": "Need a call.",
             "tool_calls": [nested_call,
                            {"type": "function", "function": {"name": "get_weather",
                                                              "arguments": {"city": "Oslo"}}}]},
            {"role": "tool", "content": "Sunny, 21C"},
            {"role": "tool", "content": [{"type": "text", "text": "map:"}, img,
                                         {"type": "video"}]},
            {"role": "assistant", "content": "<mm:think>\nIt is sunny.\n</mm:think>\n\nSunny."},
            {"role": "user", "content": "Thanks"}],
            "tools": [weather], "add_generation_prompt": True, **kw}))
    cases.append(("root_only_no_generation_prompt", {"messages": [
        {"role": "root", "content": "Root."}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"}]}))
    cases.append(("system_and_model_identity", {"messages": [
        {"role": "user", "content": "Hi"}], "model_identity": "You are Tester.",
        "add_generation_prompt": True}))
    cases.append(("multi_turn_reasoning", {"messages": [
        {"role": "system", "content": [{"type": "text", "text": "System as parts."}]},
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4", "reasoning_content": "Add them."},
        {"role": "user", "content": "times 3?"},
        {"role": "assistant", "content": "12", "reasoning_content": ""},
        {"role": "user", "content": "and minus 1?"},
        {"role": "assistant", "content": None, "reasoning_content": "Subtract.",
         "tool_calls": [{"type": "function", "function": {"name": "calc", "arguments": {
             "expr": "12-1", "precise": False, "digits": 0}}}]},
        {"role": "tool", "content": "11"}],
        "add_generation_prompt": True, "thinking_mode": "enabled"}))
    cases.append(("tool_without_previous_call_raises", {"messages": [
        {"role": "user", "content": "x"}, {"role": "tool", "content": "y"}]}))
    # Random conversations with tool calls over random schemas.
    for i in range(12):
        tools = random_tools(rng)
        msgs = [{"role": "user", "content": rng.choice(WORDS) or "Go"}]
        for _ in range(rng.randint(1, 2)):
            msgs.append({"role": "assistant", "content": rng.choice(CONTENTS),
                         "reasoning_content": rng.choice(REASONINGS + [""]),
                         "tool_calls": random_calls(rng, tools)})
            msgs.append({"role": "tool", "content": rng.choice(WORDS)})
        mode = rng.choice([None, "enabled", "disabled", "adaptive"])
        req = {"messages": msgs, "tools": tools, "add_generation_prompt": True}
        if mode:
            req["thinking_mode"] = mode
        cases.append((f"random_tools_{i}", req))
    return cases


def render(env, source, request):
    return render_reference.render(env, source, request)


# ---------------------------------------------------------------------------------------------
# Parse suite: assistant turns rendered by the template, inverted


def turn_case(env, source, name, tools, mode, message, rng):
    kw = {} if mode is None else {"thinking_mode": mode}
    user = [{"role": "user", "content": "Please help."}]
    base = render(env, source, {"messages": user, "tools": tools, **kw})
    prompt = render(env, source, {"messages": user, "tools": tools,
                                  "add_generation_prompt": True, **kw})
    full = render(env, source, {"messages": user + [message], "tools": tools, **kw})
    head = base + "]~b]ai\n"
    assert prompt.startswith(head) and full.startswith(head), name
    gen_suffix = prompt[len(head):]
    turn = full[len(head):]
    assert turn.endswith("[e~[\n") and turn.startswith(gen_suffix), name
    text = turn[len(gen_suffix):-len("[e~[\n")] + "[e~[" + rng.choice(["", "ignored after eos"])
    calls = [{"name": c["function"]["name"], "arguments": drop_none(c["function"]["arguments"])}
             for c in message.get("tool_calls", [])]
    request = {"tools": tools}
    if kw:
        request["chat_template_kwargs"] = kw
    return {"name": name, "model": "m3-chat", "request": request, "text": text,
            "expected": {"content": message.get("content") or "",
                         "reasoning_content": message.get("reasoning_content") or "",
                         "tool_calls": calls,
                         "finish_reason": "tool_calls" if calls else "stop"}}


def parse_cases(env, source, rng):
    cases = []
    for i in range(40):
        tools = random_tools(rng)
        mode = [None, "enabled", "disabled", "adaptive"][i % 4]
        msg = {"role": "assistant", "content": rng.choice(CONTENTS)}
        if mode != "disabled" and (mode == "enabled" or rng.random() < 0.6):
            msg["reasoning_content"] = rng.choice(REASONINGS)
        if rng.random() < 0.85:
            msg["tool_calls"] = random_calls(rng, tools)
        cases.append(turn_case(env, source, f"rendered_{i}_{mode or 'undefined'}", tools, mode,
                               msg, rng))

    weather = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                                         "code": {"type": "string"}}}}},
               {"type": "function", "function": {"name": "save_file", "parameters": {
                   "type": "object", "properties": {"filename": {"type": "string"},
                                                    "content": {"type": "string"}}}}},
               {"type": "function", "function": {"name": "search-docs", "parameters": {
                   "type": "object", "properties": {"max-results": {"type": "integer"},
                                                    "query-text": {"type": "string"}}}}}]

    def quirk(name, text, content, reasoning, calls, mode="adaptive", skip=True, model="m3-chat",
              tools=weather, extra=None):
        request = {"tools": tools, **(extra or {})}
        if mode:
            request["chat_template_kwargs"] = {"thinking_mode": mode}
        if not skip:
            request["skip_special_tokens"] = False
        cases.append({"name": name, "model": model, "request": request, "text": text,
                      "expected": {"content": content, "reasoning_content": reasoning,
                                   "tool_calls": calls,
                                   "finish_reason": "tool_calls" if calls else "stop"}})

    call = lambda n, a: {"name": n, "arguments": a}  # noqa: E731
    quirk("missing_first_parameter_open_tag",
          f"</mm:think>{NS}<tool_call>\n{NS}<invoke name=\"save_file\">{NS}offerta.docx"
          f"{NS}</filename>{NS}<content>ciao{NS}</content>{NS}</invoke>\n{NS}</tool_call>[e~[",
          "", "", [call("save_file", {"filename": "offerta.docx", "content": "ciao"})])
    quirk("missing_open_tag_without_namespace_token",
          f"{NS}<tool_call>\n{NS}<invoke name=\"save_file\">a.txt{NS}</filename>{NS}</invoke>\n"
          f"{NS}</tool_call>[e~[", "", "", [call("save_file", {"filename": "a.txt"})])
    quirk("hyphenated_names",
          f"<mm:think>Search.</mm:think>{NS}<tool_call>\n{NS}<invoke name=\"search-docs\">"
          f"{NS}<max-results>5{NS}</max-results>{NS}<query-text>m3 docs{NS}</query-text>"
          f"{NS}</invoke>\n{NS}</tool_call>[e~[",
          "", "Search.", [call("search-docs", {"max-results": 5, "query-text": "m3 docs"})])
    quirk("whitespace_after_namespace_token",
          f"{NS} <tool_call>\n{NS}\n<invoke name=\"get_weather\">{NS} <city>Paris{NS}  </city>"
          f"{NS}\t<days>2{NS} </days>{NS} </invoke>\n{NS} </tool_call>[e~[",
          "", "", [call("get_weather", {"city": "Paris", "days": 2})])
    quirk("text_before_block_and_several_invokes",
          f"</mm:think>Let me check both.\n{NS}<tool_call>\n{NS}<invoke name=\"get_weather\">"
          f"{NS}<city>Paris{NS}</city>{NS}</invoke>\n{NS}<invoke name=\"get_weather\">"
          f"{NS}<city>Rome{NS}</city>{NS}<code>007{NS}</code>{NS}</invoke>\n{NS}</tool_call>[e~[",
          "Let me check both.\n", "",
          [call("get_weather", {"city": "Paris"}),
           call("get_weather", {"city": "Rome", "code": "007"})])
    malformed = (f"{NS}<tool_call>\n{NS}<invoke name=\"get_weather\">{NS}<city>A{NS}</city>"
                 f"{NS}</invoke>\n{NS}<invoke nam=\"broken\">{NS}<x>1{NS}</x>{NS}</invoke>\n"
                 f"{NS}<invoke name=\"get_weather\">{NS}<city>B{NS}</city>{NS}</invoke>\n"
                 f"{NS}</tool_call>[e~[")
    quirk("malformed_invoke_keeps_later_calls", malformed,
          "<invoke nam=\"broken\"><x>1</x></invoke>", "",
          [call("get_weather", {"city": "A"}), call("get_weather", {"city": "B"})])
    quirk("malformed_invoke_special_tokens_kept", malformed,
          f"{NS}<invoke nam=\"broken\">{NS}<x>1{NS}</x>{NS}</invoke>", "",
          [call("get_weather", {"city": "A"}), call("get_weather", {"city": "B"})], skip=False)
    quirk("malformed_parameter_ends_its_call",
          f"{NS}<tool_call>\n{NS}<invoke name=\"get_weather\">{NS}<city>A{NS}</city>"
          f"{NS}<days>3{NS}</oops>{NS}</invoke>\n{NS}<invoke name=\"save_file\">"
          f"{NS}<filename>b{NS}</filename>{NS}</invoke>\n{NS}</tool_call>[e~[",
          "<days>3</oops></invoke>", "",
          [call("get_weather", {"city": "A"}), call("save_file", {"filename": "b"})])
    quirk("leading_bare_end_tag_dropped", "</mm:think>Hello there.[e~[", "Hello there.", "", [])
    quirk("later_unmatched_end_tag_is_content", "Hello </mm:think>world[e~[",
          "Hello world", "", [])
    quirk("later_unmatched_end_tag_visible_without_skipping",
          "</mm:think>Hello </mm:think>world[e~[", "Hello </mm:think>world", "", [], skip=False)
    quirk("disabled_with_redundant_end_tag", "</mm:think>Direct answer.[e~[",
          "Direct answer.", "", [], mode="disabled")
    quirk("enabled_with_repeated_open_tag", "<mm:think>Think.</mm:think>Answer.[e~[",
          "Answer.", "Think.", [], mode="enabled")
    quirk("undefined_mode_thinks", "<mm:think>Hmm.\n</mm:think>\nOK[e~[", "\nOK", "Hmm.\n", [],
          mode=None)
    quirk("no_schema_json_literals",
          f"{NS}<tool_call>\n{NS}<invoke name=\"unknown_tool\">{NS}<n>7{NS}</n>{NS}<z>007{NS}</z>"
          f"{NS}<s>hello{NS}</s>{NS}<l>[1, 2]{NS}</l>{NS}<o>{NS}<a>1{NS}</a>{NS}<b>x{NS}</b>"
          f"{NS}</o>{NS}<arr>{NS}<item>true{NS}</item>{NS}<item>z{NS}</item>{NS}</arr>"
          f"{NS}</invoke>\n{NS}</tool_call>[e~[", "", "",
          [call("unknown_tool", {"n": 7, "z": "007", "s": "hello", "l": [1, 2], "o": {"a": 1, "b": "x"},
                                 "arr": [True, "z"]})])
    quirk("missing_invoke_close",
          f"{NS}<tool_call>\n{NS}<invoke name=\"get_weather\">{NS}<city>A{NS}</city>\n"
          f"{NS}<invoke name=\"get_weather\">{NS}<city>B{NS}</city>\n{NS}</tool_call>[e~[",
          "", "", [call("get_weather", {"city": "A"}), call("get_weather", {"city": "B"})])
    quirk("tool_choice_none_leaves_markup_as_text",
          f"Answer.{NS}<tool_call>\n{NS}<invoke name=\"get_weather\">{NS}<city>A{NS}</city>"
          f"{NS}</invoke>\n{NS}</tool_call>[e~[",
          "Answer.<tool_call>\n<invoke name=\"get_weather\"><city>A</city></invoke>\n</tool_call>",
          "", [], extra={"tool_choice": "none"})
    quirk("angle_brackets_in_plain_text", "a <b> c</b> <tool_call> x[e~[",
          "a <b> c</b> <tool_call> x", "", [])
    m2_tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"},
                                         "days": {"type": "integer"}}}}}]
    quirk("m2_format_still_parsed",
          "Need weather.</think>\n\nChecking.\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n"
          "<parameter name=\"city\">São Paulo</parameter>\n<parameter name=\"days\">3</parameter>\n"
          "</invoke>\n</minimax:tool_call>[e~[",
          "Checking.\n", "Need weather.",
          [call("get_weather", {"city": "São Paulo", "days": 3})], mode=None, model="chat-e2e",
          tools=m2_tools)
    return cases


def main():
    template = sys.argv[1] if len(sys.argv) > 1 else "../shared/golden/chat_templates/MiniMax-M3.jinja"
    path = build_model_dir(template)
    with open(path, encoding="utf-8") as f:
        source = f.read()
    env = render_reference.make_env()
    rng = random.Random(35)
    out = []
    for name, request in template_cases(rng):
        try:
            out.append({"name": name, "request": request, "ok": True,
                        "rendered": render(env, source, copy.deepcopy(request))})
        except Exception as e:  # the C++ renderer must raise too
            out.append({"name": name, "request": request, "ok": False,
                        "error": f"{type(e).__name__}: {e}"})
    write_json(os.path.join(OUT, "template_cases.json"), out)
    write_json(os.path.join(OUT, "parse_cases.json"), parse_cases(env, source, random.Random(3535)))
    print(f"{len(out)} template cases, parse cases written to {OUT}")


if __name__ == "__main__":
    main()

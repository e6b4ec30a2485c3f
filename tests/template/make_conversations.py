#!/usr/bin/env python3
"""Writes tests/data/chat_templates/conversations.json: the request matrix the template
parity test renders with every fixture template (system or not, multi-turn, tools, tool calls
with mapping and string arguments, tool results, reasoning_content, content parts, unicode,
requests some templates refuse with raise_exception)."""
import json
import os

weather = {"type": "function", "function": {"name": "get_weather", "description": "Get the current weather for a city.", "parameters": {"type": "object", "properties": {"location": {"type": "string", "description": "City name, e.g. \"Paris\""}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit", "default": "celsius"}}, "required": ["location"]}}}
search = {"type": "function", "function": {"name": "search_docs", "description": "Search the knowledge base.", "parameters": {"type": "object", "properties": {"query": {"type": "string", "description": "  Search text  "}, "top_k": {"type": "integer", "description": "How many results", "default": 5}, "threshold": {"type": "number", "description": "Minimum score", "default": 0.5}, "tags": {"type": "array", "items": {"type": "string"}, "description": "Filter tags"}, "exact": {"type": ["boolean", "null"], "description": "Exact match"}}, "required": ["query"]}}}
noparams = {"type": "function", "function": {"name": "get_time", "description": "Current time (UTC).", "parameters": {"type": "object", "properties": {}}}}
tools = [weather, search]
BOS = {"bos_token": "<s>", "eos_token": "</s>"}


def req(msgs, gen=True, **kw):
    r = {"messages": msgs, "add_generation_prompt": gen}
    r.update(BOS)
    r.update(kw)
    return r


call_map = {"id": "call12345", "type": "function", "function": {"name": "get_weather", "arguments": {"location": "Paris", "unit": "celsius"}}}
call_str = {"id": "call67890", "type": "function", "function": {"name": "get_weather", "arguments": "{\"location\": \"Tokyo\"}"}}
call_search = {"id": "callABCDE", "type": "function", "function": {"name": "search_docs", "arguments": {"query": "jinja whitespace", "top_k": 3, "threshold": 0.25, "tags": ["docs", "templates"], "exact": None}}}

convs = [
    ("user_only", req([{"role": "user", "content": "Hello!"}])),
    ("user_only_no_gen", req([{"role": "user", "content": "Hello!"}], gen=False)),
    ("system_user", req([{"role": "system", "content": "You are a terse assistant."}, {"role": "user", "content": "What is 2+2?"}])),
    ("multi_turn", req([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! How can I help?"}, {"role": "user", "content": "Tell me a joke."}])),
    ("multi_turn_ends_assistant", req([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}], gen=False)),
    ("tools_available", req([{"role": "system", "content": "You can use tools."}, {"role": "user", "content": "Weather in Paris?"}], tools=tools)),
    ("tools_no_system", req([{"role": "user", "content": "Find docs about jinja."}], tools=[search, noparams])),
    ("tool_call_mapping_args", req([{"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": None, "tool_calls": [call_map]}, {"role": "tool", "tool_call_id": "call12345", "name": "get_weather", "content": "{\"temperature\": 21, \"condition\": \"sunny\"}"}], tools=tools)),
    ("tool_call_string_args", req([{"role": "system", "content": "Use tools when needed."}, {"role": "user", "content": "Weather in Tokyo?"}, {"role": "assistant", "content": "", "tool_calls": [call_str]}, {"role": "tool", "tool_call_id": "call67890", "content": "Rainy, 18C"}, {"role": "assistant", "content": "It is rainy and 18C in Tokyo."}, {"role": "user", "content": "Thanks!"}], tools=tools)),
    ("parallel_tool_calls", req([{"role": "user", "content": "Weather in Paris and docs on jinja."}, {"role": "assistant", "content": "Let me check both.", "tool_calls": [call_map, call_search]}, {"role": "tool", "tool_call_id": "call12345", "content": "Sunny"}, {"role": "tool", "tool_call_id": "callABCDE", "content": "3 results"}], tools=tools)),
    ("single_tool_call_then_answer", req([{"role": "user", "content": "Search please"}, {"role": "assistant", "content": "Searching.", "tool_calls": [call_search]}, {"role": "tool", "tool_call_id": "callABCDE", "content": "found: 3"}, {"role": "assistant", "content": "Found three documents."}], gen=False, tools=tools)),
    ("reasoning_content", req([{"role": "user", "content": "What is 17*3?"}, {"role": "assistant", "reasoning_content": "17*3 = 51.", "content": "51"}, {"role": "user", "content": "And 17*4?"}])),
    ("reasoning_last_turn", req([{"role": "user", "content": "Think about 2+2"}, {"role": "assistant", "reasoning_content": "\nSimple arithmetic.\n", "content": "\n4"}], gen=False)),
    ("think_in_content", req([{"role": "user", "content": "Greet me"}, {"role": "assistant", "content": "<think>\nThe user wants a greeting.\n</think>\n\nHello there!"}, {"role": "user", "content": "Again"}])),
    ("content_parts", req([{"role": "user", "content": [{"type": "text", "text": "Describe this image:"}, {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}, {"type": "text", "text": " Be precise."}]}])),
    ("content_parts_video", req([{"role": "system", "content": [{"type": "text", "text": "You watch videos."}]}, {"role": "user", "content": [{"type": "video_url", "video_url": {"url": "file:///tmp/clip.mp4"}}, {"type": "text", "text": "What happens?"}]}, {"role": "assistant", "content": [{"type": "text", "text": "A cat jumps."}]}, {"role": "user", "content": "Then?"}])),
    ("unicode_and_quotes", req([{"role": "system", "content": "Réponds en français. «Guillemets» and \"quotes\" and 'single'."}, {"role": "user", "content": "héllo 世界 🎉\ttab\\backslash"}, {"role": "assistant", "content": None, "tool_calls": [{"id": "callUNI01", "type": "function", "function": {"name": "get_weather", "arguments": {"location": "Zürich", "note": "naïve \"q\" é世 🎉 <tag> & \u0001\u007f"}}}]}, {"role": "tool", "tool_call_id": "callUNI01", "content": "Zürich: 12°C"}], tools=[weather])),
    ("whitespace_content", req([{"role": "system", "content": "  padded system  \n"}, {"role": "user", "content": "\n\n  leading and trailing  \n\n"}, {"role": "assistant", "content": "  spaced answer \n"}, {"role": "user", "content": "\tok\t"}])),
    ("empty_system", req([{"role": "system", "content": ""}, {"role": "user", "content": "Hi"}])),
    ("tool_without_call", req([{"role": "user", "content": "Hi"}, {"role": "tool", "tool_call_id": "call12345", "content": "orphan result"}])),
    ("assistant_first", req([{"role": "assistant", "content": "I start."}, {"role": "user", "content": "Ok"}])),
    ("two_users_in_a_row", req([{"role": "user", "content": "One"}, {"role": "user", "content": "Two"}])),
    ("extra_kwargs", req([{"role": "user", "content": "Solve x+1=2"}], enable_thinking=False, thinking=True, date_string="01 Jan 2025", reasoning_effort="high", model_identity="You are M3.")),
    ("no_special_tokens", {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}], "add_generation_prompt": True}),
    ("numbers_in_args", req([{"role": "user", "content": "Compute"}, {"role": "assistant", "content": None, "tool_calls": [{"id": "callNUM01", "type": "function", "function": {"name": "search_docs", "arguments": {"query": "x", "top_k": 10, "threshold": 1.0, "big": 12345678901234, "small": 1e-07, "neg": -2.5, "list": [1, 2.5, True, False, None], "nested": {"a": {"b": []}, "c": {}}}}}]}, {"role": "tool", "tool_call_id": "callNUM01", "content": "done"}], tools=[search])),
]

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "data", "chat_templates", "conversations.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump([{"name": n, "request": r} for n, r in convs], f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(convs)} conversations -> {os.path.normpath(path)}")

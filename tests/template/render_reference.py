#!/usr/bin/env python3
"""Reference renderer for the chat-template tests: Python jinja2 configured the way
transformers' apply_chat_template configures it (ImmutableSandboxedEnvironment with
trim_blocks/lstrip_blocks and loopcontrols, the tojson override, raise_exception and
strftime_now, and a no-op {% generation %} block).

Single mode:  render_reference.py --template T.jinja --request R.json
  prints the rendered prompt (no added newline); exit 3 when the template raised
  (raise_exception or any template error), message on stderr.
Batch mode:   render_reference.py --batch manifest.json
  manifest = [{"template": path, "request": {...}}, ...]; prints a JSON list of
  {"ok": true, "output": str} or {"ok": false, "error": str}.
"""
import argparse
import json
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment


class GenerationBlock(Extension):
    """transformers' AssistantTracker minus the index bookkeeping: renders the body in place."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                       extensions=[GenerationBlock, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def context_from_request(request):
    """The variables apply_chat_template passes: tools/documents default to None,
    add_generation_prompt to False; every other request key is passed through."""
    ctx = dict(request)
    ctx.setdefault("tools", None)
    ctx.setdefault("documents", None)
    ctx.setdefault("add_generation_prompt", False)
    return ctx


def render(env, source, request):
    return env.from_string(source).render(**context_from_request(request))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--template")
    ap.add_argument("--request")
    ap.add_argument("--batch")
    args = ap.parse_args()
    env = make_env()
    if args.batch:
        with open(args.batch, encoding="utf-8") as f:
            manifest = json.load(f)
        cache = {}
        results = []
        for item in manifest:
            path = item["template"]
            if path not in cache:
                with open(path, encoding="utf-8") as f:
                    cache[path] = f.read()
            try:
                results.append({"ok": True, "output": render(env, cache[path], item["request"])})
            except Exception as e:  # the C++ side must fail for the same pair
                results.append({"ok": False, "error": f"{type(e).__name__}: {e}"})
        sys.stdout.write(json.dumps(results, ensure_ascii=False))
        return 0
    with open(args.template, encoding="utf-8") as f:
        source = f.read()
    with open(args.request, encoding="utf-8") as f:
        request = json.load(f)
    try:
        sys.stdout.write(render(env, source, request))
    except Exception as e:
        sys.stderr.write(f"{type(e).__name__}: {e}\n")
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())

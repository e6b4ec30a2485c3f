#!/usr/bin/env python3
"""Hostile request bodies near the size limit against a running gateway, timed.

Issue 39's bound: any body up to the gateway's size limit is answered (200 or 4xx) within
1.5 s, whatever its shape. This sends bodies of many shapes (deep nesting, wide objects, long
and duplicate keys, huge arrays of numbers / strings / nulls / empty objects, long strings of
escapes and surrogates, invalid UTF-8, a NUL, huge numbers, truncated text, many messages,
content parts, tools, stop strings, gzip, chunked and slowly sent bodies) to every JSON endpoint
and prints a table of each one's status and time. A 5xx, a hang or a time over the bound is a
failure (exit status 1).

The time is from the first byte sent to the answer's last byte, except for slowly sent bodies
(from the last byte sent: the client's own pace is not the server's cost). The gateway's CPU
seconds over the same span are shown beside it (from /proc; --pid for a gateway already
running): on a machine shared with other work the wall time is mostly waiting for a core, and
the CPU time is what the body itself cost.

Usage:
  scripts/body_sweep.py --build build                 # starts m3-engine and m3-gateway itself
  scripts/body_sweep.py --port 8000 --model-name m    # a gateway already running
  scripts/body_sweep.py --port 8000 --pid 1234          # ... and its CPU time per request
Options: --size BYTES (default: the gateway's limit, 64 MiB, less 4 KiB), --bound SECONDS,
--only REGEX (shape/endpoint), --markdown FILE (the table as Markdown too).
The CI part of this check is tests/api/body_sweep_test.cpp (a few shapes, smaller bodies).
"""

import argparse
import base64
import gzip
import os
import re
import select
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ENDPOINTS = {
    "chat": "/v1/chat/completions",
    "completions": "/v1/completions",
    "tokenize": "/tokenize",
    "detokenize": "/detokenize",
    "messages": "/v1/messages",
    "count_tokens": "/v1/messages/count_tokens",
    "preprocess": "/v1/preprocess",
}


def png_data_uri():
    path = os.path.join(ROOT, "tests/data/demo-model/samples/sample1.png")
    with open(path, "rb") as f:
        return "data:image/png;base64," + base64.b64encode(f.read()).decode()


def envelope(endpoint, model):
    """A valid request of the endpoint as (head, tail): a field goes between them."""
    m = '"model":"%s"' % model
    hi = '"messages":[{"role":"user","content":"Hi"}]'
    if endpoint == "chat":
        return "{%s,\"max_tokens\":1,%s," % (m, hi), "}"
    if endpoint == "completions":
        return "{%s,\"max_tokens\":1,\"prompt\":\"Hi\"," % m, "}"
    if endpoint == "tokenize":
        return "{%s,\"prompt\":\"Hi\"," % m, "}"
    if endpoint == "detokenize":
        return "{%s,\"tokens\":[1,2]," % m, "}"
    if endpoint == "messages":
        return "{%s,\"max_tokens\":1,%s," % (m, hi), "}"
    if endpoint == "count_tokens":
        return "{%s,%s," % (m, hi), "}"
    if endpoint == "preprocess":
        return ('{"content":[{"type":"image_url","image_url":{"url":"%s"}}],' % png_data_uri(),
                "}")
    raise ValueError(endpoint)


def repeat_to(item, n, sep=","):
    """item, sep, item, ... to about n bytes."""
    count = max(1, n // (len(item) + len(sep)))
    return sep.join([item] * count)


# Values of about n bytes, placed in an unknown field of a valid request ("x": VALUE).
def v_deep_over(n):
    return "[" * n


def v_deep_many(n):
    sub = "[" * 62 + "1" + "]" * 62
    return "[" + repeat_to(sub, n - 2) + "]"


def v_wide_keys(n):
    parts, i, size = [], 0, 1
    while size < n:
        p = '"k%d":0' % i
        parts.append(p)
        size += len(p) + 1
        i += 1
    return "{" + ",".join(parts) + "}"


def v_wide_objects_under_limit(n):
    obj = "{" + ",".join('"k%d":0' % i for i in range(16000)) + "}"
    return "[" + repeat_to(obj, n - 2) + "]"


def v_long_keys(n):
    key_len = 4000
    count = n // (key_len + 6)
    return "{" + ",".join('"%s%06d":0' % ("k" * (key_len - 6), i) for i in range(count)) + "}"


def v_long_keys_over(n):
    return '{"' + "k" * (n - 10) + '":0}'


def v_dup_keys(n):
    return "{" + repeat_to('"a":0', n - 2) + "}"


def v_dup_keys_nested(n):
    return "[" + repeat_to('{"a":1,"a":2,"a":{"a":3}}', n - 2) + "]"


def v_numbers(n):
    return "[" + repeat_to("1", n - 2) + "]"


def v_floats(n):
    return "[" + repeat_to("-1.2345678901234567e-300", n - 2) + "]"


def v_strings(n):
    return "[" + repeat_to('"ab"', n - 2) + "]"


def v_nulls(n):
    return "[" + repeat_to("null", n - 2) + "]"


def v_empty_objects(n):
    return "[" + repeat_to("{}", n - 2) + "]"


def v_empty_arrays(n):
    return "[" + repeat_to("[]", n - 2) + "]"


def v_string_surrogates(n):
    return '"' + "\\ud83d\\ude00" * ((n - 2) // 12) + '"'


def v_string_escapes(n):
    return '"' + "\\n\\t\\\"\\\\\\/\\u0041\\u00e9" * ((n - 2) // 26) + '"'


def v_string_invalid_surrogate_end(n):
    return '"' + "a" * (n - 10) + '\\ud800"'


def v_string_lone_low_surrogate(n):
    return '"' + "\\udc00" * ((n - 2) // 6) + '"'


def v_string_utf8(n):
    return '"' + "\u00e9\u4e2d\U0001f600" * ((n - 2) // 9) + '"'


def v_string_plain(n):
    return '"' + "a" * (n - 2) + '"'


def v_number_digits(n):
    return "1" * n


def v_number_fraction(n):
    return "0." + "1" * (n - 2)


def v_number_exponent(n):
    return "1e" + "9" * (n - 2)


def v_number_overflow(n):
    return "[" + repeat_to("1e400", n - 2) + "]"


GENERIC = {
    "deep_nesting_over_limit": v_deep_over,
    "deep_nesting_many_subtrees": v_deep_many,
    "wide_object_many_keys": v_wide_keys,
    "wide_objects_16k_keys_each": v_wide_objects_under_limit,
    "long_keys_4k": v_long_keys,
    "one_key_over_limit": v_long_keys_over,
    "duplicate_keys": v_dup_keys,
    "duplicate_keys_nested": v_dup_keys_nested,
    "array_of_numbers": v_numbers,
    "array_of_floats": v_floats,
    "array_of_strings": v_strings,
    "array_of_nulls": v_nulls,
    "array_of_empty_objects": v_empty_objects,
    "array_of_empty_arrays": v_empty_arrays,
    "string_surrogate_pairs": v_string_surrogates,
    "string_escapes": v_string_escapes,
    "string_invalid_surrogate_at_end": v_string_invalid_surrogate_end,
    "string_lone_low_surrogates": v_string_lone_low_surrogate,
    "string_multibyte_utf8": v_string_utf8,
    "string_plain": v_string_plain,
    "number_many_digits": v_number_digits,
    "number_long_fraction": v_number_fraction,
    "number_long_exponent": v_number_exponent,
    "numbers_overflow": v_number_overflow,
}


def text_of(n):
    return ("hello world, the quick brown fox jumps. " * (n // 40 + 1))[:n]


# Bodies aimed at what an endpoint reads (not an unknown field): each returns the whole body
# or None when the shape does not apply to the endpoint.
def b_long_prompt(ep, model, n):
    t = text_of(n - 200)
    m = '"model":"%s"' % model
    if ep == "chat":
        return '{%s,"max_tokens":1,"messages":[{"role":"user","content":"%s"}]}' % (m, t)
    if ep in ("completions", "tokenize"):
        return '{%s,"max_tokens":1,"prompt":"%s"}' % (m, t)
    if ep == "messages":
        return '{%s,"max_tokens":1,"messages":[{"role":"user","content":"%s"}]}' % (m, t)
    if ep == "count_tokens":
        return '{%s,"messages":[{"role":"user","content":"%s"}]}' % (m, t)
    return None


def b_many_messages(ep, model, n):
    if ep not in ("chat", "messages", "count_tokens", "tokenize", "preprocess"):
        return None
    m = '"model":"%s",' % model
    msgs = repeat_to('{"role":"user","content":"x"},{"role":"assistant","content":"y"}', n - 200)
    if ep == "preprocess":
        m = ""
    extra = '"max_tokens":1,' if ep in ("chat", "messages") else ""
    return '{%s%s"messages":[%s]}' % (m, extra, msgs)


def b_many_long_messages(ep, model, n):
    if ep not in ("chat", "messages", "count_tokens", "tokenize"):
        return None
    # 2,000 pairs: under the message count limit (4,096), the text as long as the body allows.
    msg = '{"role":"user","content":"%s"},{"role":"assistant","content":"ok"}' % text_of(
        (n - 200) // 2000 - 60)
    extra = '"max_tokens":1,' if ep in ("chat", "messages") else ""
    return '{"model":"%s",%s"messages":[%s]}' % (model, extra, repeat_to(msg, n - 200))


def b_many_content_parts(ep, model, n):
    if ep not in ("chat", "messages", "count_tokens", "tokenize", "preprocess"):
        return None
    parts = repeat_to('{"type":"text","text":"x"}', n - 200)
    if ep == "preprocess":
        return '{"content":[%s]}' % parts
    extra = '"max_tokens":1,' if ep in ("chat", "messages") else ""
    return '{"model":"%s",%s"messages":[{"role":"user","content":[%s]}]}' % (model, extra, parts)


def b_many_image_parts(ep, model, n):
    if ep not in ("chat", "messages", "preprocess"):
        return None
    if ep == "messages":
        part = '{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}}'
    else:
        part = '{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}'
    parts = repeat_to(part, n - 200)
    if ep == "preprocess":
        return '{"content":[%s]}' % parts
    return '{"model":"%s","max_tokens":1,"messages":[{"role":"user","content":[%s]}]}' % (model,
                                                                                       parts)


def tool_schema(i, props):
    p = ",".join('"p%d":{"type":"string","description":"%s","enum":["a","b","c"]}' % (j, "d" * 40)
                 for j in range(props))
    return ('{"type":"function","function":{"name":"tool_%d","description":"a tool",'
            '"parameters":{"type":"object","properties":{%s},"required":["p0"]}}}' % (i, p))


def anthropic_tool(i, props):
    p = ",".join('"p%d":{"type":"string","description":"%s"}' % (j, "d" * 40) for j in range(props))
    return ('{"name":"tool_%d","description":"a tool","input_schema":{"type":"object",'
            '"properties":{%s}}}' % (i, p))


def b_many_tools(ep, model, n):
    if ep not in ("chat", "messages", "count_tokens", "tokenize"):
        return None
    make = anthropic_tool if ep in ("messages", "count_tokens") else tool_schema
    tools, size, i = [], 0, 0
    while size < n - 300:
        t = make(i, 50)
        tools.append(t)
        size += len(t) + 1
        i += 1
    extra = '"max_tokens":1,' if ep in ("chat", "messages") else ""
    return '{"model":"%s",%s"messages":[{"role":"user","content":"Hi"}],"tools":[%s]}' % (
        model, extra, ",".join(tools))


def b_tools_at_limit(ep, model, n):
    # 512 tools (the most a request may have), their descriptions as long as the body allows.
    if ep not in ("chat", "messages", "count_tokens", "tokenize"):
        return None
    desc = text_of((n - 300) // 512 - 400)
    if ep in ("messages", "count_tokens"):
        tool = ('{"name":"tool_%d","description":"%s","input_schema":{"type":"object",'
                '"properties":{"a":{"type":"string"}}}}')
    else:
        tool = ('{"type":"function","function":{"name":"tool_%d","description":"%s",'
                '"parameters":{"type":"object","properties":{"a":{"type":"string"}}}}}')
    tools = ",".join(tool % (i, desc) for i in range(512))
    extra = '"max_tokens":1,' if ep in ("chat", "messages") else ""
    return '{"model":"%s",%s"messages":[{"role":"user","content":"Hi"}],"tools":[%s]}' % (
        model, extra, tools)


def b_many_stop_strings(ep, model, n):
    if ep not in ("chat", "completions", "messages"):
        return None
    key = "stop_sequences" if ep == "messages" else "stop"
    head, tail = envelope(ep, model)
    return head + '"%s":[%s]' % (key, repeat_to('"stop"', n - 300)) + tail


def b_long_token_array(ep, model, n):
    if ep not in ("completions", "detokenize", "tokenize"):
        return None
    key = "tokens" if ep == "detokenize" else "prompt"
    toks = repeat_to("1", n - 200)
    return '{"model":"%s","max_tokens":1,"%s":[%s]}' % (model, key, toks)


def b_many_prompts(ep, model, n):
    if ep != "completions":
        return None
    return '{"model":"%s","max_tokens":1,"prompt":[%s]}' % (model, repeat_to('"hi there"',
                                                                              n - 200))


def b_logit_bias(ep, model, n):
    if ep not in ("chat", "completions"):
        return None
    head, tail = envelope(ep, model)
    bias, size, i = [], 0, 0
    while size < n - 300:
        b = '"%d":1' % i
        bias.append(b)
        size += len(b) + 1
        i += 1
    return head + '"logit_bias":{%s}' % ",".join(bias) + tail


def b_kwargs(ep, model, n):
    if ep not in ("chat", "tokenize"):
        return None
    head, tail = envelope(ep, model)
    if ep == "tokenize":
        head = '{"model":"%s","messages":[{"role":"user","content":"Hi"}],' % model
    return head + '"chat_template_kwargs":{"x":%s}' % v_strings(n - 300) + tail


SPECIFIC = {
    "long_prompt_text": b_long_prompt,
    "many_messages": b_many_messages,
    "many_long_messages": b_many_long_messages,
    "many_content_parts": b_many_content_parts,
    "many_image_parts": b_many_image_parts,
    "many_tools_big_schemas": b_many_tools,
    "tools_512_long_descriptions": b_tools_at_limit,
    "many_stop_strings": b_many_stop_strings,
    "long_token_array": b_long_token_array,
    "many_prompts": b_many_prompts,
    "logit_bias_many_keys": b_logit_bias,
    "chat_template_kwargs_big": b_kwargs,
}


class Reply:
    def __init__(self):
        self.status = 0
        self.body = b""
        self.error = ""


def read_reply(sock, deadline):
    """Reads one response (Content-Length, chunked or to EOF) until the deadline."""
    buf = b""
    reply = Reply()
    head_end = -1
    while True:
        if head_end < 0:
            head_end = buf.find(b"\r\n\r\n")
        if head_end >= 0:
            head = buf[:head_end].decode("latin-1")
            m = re.match(r"HTTP/1\.[01] (\d+)", head)
            reply.status = int(m.group(1)) if m else -1
            if reply.status == 100:
                buf = buf[head_end + 4:]
                head_end = -1
                reply.status = 0
                continue
            body = buf[head_end + 4:]
            cl = re.search(r"(?im)^content-length:\s*(\d+)", head)
            if cl and len(body) >= int(cl.group(1)):
                reply.body = body[:int(cl.group(1))]
                return reply
            if re.search(r"(?im)^transfer-encoding:\s*chunked", head) and body.endswith(
                    b"0\r\n\r\n"):
                reply.body = body
                return reply
        left = deadline - time.monotonic()
        if left <= 0:
            reply.error = "timeout"
            reply.status = 0
            return reply
        r, _, _ = select.select([sock], [], [], left)
        if not r:
            continue
        try:
            data = sock.recv(1 << 20)
        except ConnectionError as e:
            data = b""
            reply.error = str(e)
        if not data:
            if head_end >= 0:
                reply.body = buf[head_end + 4:]
                return reply
            reply.error = reply.error or "closed without an answer"
            reply.status = 0
            return reply
        buf += data


def cpu_seconds(pid):
    """The process's user + system CPU seconds so far (None without a pid)."""
    if not pid:
        return None
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def send_request(port, path, body, mode, timeout, headers=()):
    """Sends one request; returns (Reply, seconds). mode: whole, chunked, slow, gzip."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    extra = "".join("%s: %s\r\n" % h for h in headers)
    if mode == "gzip":
        body = gzip.compress(body, 1)
        extra += "Content-Encoding: gzip\r\n"
    if mode == "chunked":
        head = ("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                "Transfer-Encoding: chunked\r\nConnection: close\r\n%s\r\n" % (path, extra))
    else:
        head = ("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                "Content-Length: %d\r\nConnection: close\r\n%s\r\n" % (path, len(body), extra))
    t0 = time.monotonic()
    deadline = t0 + timeout
    try:
        sock.sendall(head.encode())
        if mode == "chunked":
            step = 1 << 20
            for i in range(0, len(body), step):
                piece = body[i:i + step]
                sock.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
            sock.sendall(b"0\r\n\r\n")
        elif mode == "slow":
            # The body in 20 pieces over ~4 s: well within the read timeout.
            pieces = 20
            step = max(1, len(body) // pieces)
            for i in range(0, len(body), step):
                if i > 0:
                    time.sleep(0.2)
                sock.sendall(body[i:i + step])
            t0 = time.monotonic()
            deadline = t0 + timeout
        else:
            sock.sendall(body)
    except (BrokenPipeError, ConnectionResetError):
        pass  # refused before the whole body was read: the answer is still there to read
    reply = read_reply(sock, deadline)
    seconds = time.monotonic() - t0
    sock.close()
    return reply, seconds


def start_stack(build, model_dir, model_name):
    procs = []

    def wait_line(proc, regex, what, limit=120):
        end = time.monotonic() + limit
        while time.monotonic() < end:
            line = proc.stdout.readline()
            if not line:
                if proc.poll() is not None:
                    sys.exit("body_sweep: %s exited" % what)
                continue
            m = re.search(regex, line)
            if m:
                return m.group(1)
        sys.exit("body_sweep: %s did not start" % what)

    engine = subprocess.Popen(
        [os.path.join(build, "bin/m3-engine"), "serve", "--model", model_dir, "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    procs.append(engine)
    eport = wait_line(engine, r"listening on port (\d+)", "m3-engine")
    gateway = subprocess.Popen(
        [os.path.join(build, "bin/m3-gateway"), "serve", "--model", model_dir, "--port", "0",
         "--engine", "127.0.0.1:" + eport, "--served-model-name", model_name],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    procs.append(gateway)
    gport = int(wait_line(gateway, r"http=[^ ]*:(\d+)", "m3-gateway"))
    return gport, procs, gateway.pid


def cases(model, size):
    """(shape, endpoint, mode, body) for every case."""
    for ep in ENDPOINTS:
        head, tail = envelope(ep, model)
        room = size - len(head) - len(tail) - 8
        for name, make in GENERIC.items():
            yield name, ep, "whole", (head + '"x":' + make(room) + tail).encode()
        for name, make in SPECIFIC.items():
            body = make(ep, model, size)
            if body is not None:
                yield name, ep, "whole", body.encode()
        big = (head + '"x":' + v_string_plain(room) + tail).encode()
        yield "invalid_utf8_in_string", ep, "whole", (head + '"x":"' + "a" * (room - 8)).encode(
            "latin-1") + b'\xff\xfe"' + tail.encode()
        yield "nul_byte_at_end", ep, "whole", big[:-1] + b"\x00" + big[-1:]
        yield "truncated_text", ep, "whole", big[:-2]
        yield "chunked_transfer", ep, "chunked", big
        yield "gzip_encoded", ep, "gzip", big
        yield "slow_body_4s", ep, "slow", (head + '"x":' + v_string_escapes(8 << 20) + tail).encode()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--model", default=os.path.join(ROOT, "tests/data/chat-e2e/model"))
    ap.add_argument("--model-name", default="chat-e2e")
    ap.add_argument("--size", type=int, default=(64 << 20) - 4096)
    ap.add_argument("--bound", type=float, default=1.5)
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--only", default="")
    ap.add_argument("--markdown", default="")
    ap.add_argument("--pid", type=int, default=0, help="the gateway's pid, for its CPU time")
    args = ap.parse_args()

    procs = []
    port, pid = args.port, args.pid
    if port is None:
        port, procs, pid = start_stack(args.build, args.model, args.model_name)
    rows, failures = [], 0
    try:
        for shape, ep, mode, body in cases(args.model_name, args.size):
            if args.only and not re.search(args.only, shape + "/" + ep):
                continue
            cpu0 = cpu_seconds(pid)
            reply, seconds = send_request(port, ENDPOINTS[ep], body, mode, args.timeout)
            cpu = cpu_seconds(pid) - cpu0 if pid else float("nan")
            code = ""
            m = re.search(rb'"code":"([a-z_]+)"', reply.body[:2000])
            if m:
                code = m.group(1).decode()
            elif re.search(rb'"type":"error"', reply.body[:2000]):
                m = re.search(rb'"error":\{"type":"([a-z_]+)"', reply.body[:2000])
                code = m.group(1).decode() if m else ""
            bad = reply.status == 0 or reply.status >= 500 or seconds > args.bound
            failures += bad
            row = (shape, ep, len(body), reply.status, seconds, cpu, code or reply.error, bad)
            rows.append(row)
            print("%-34s %-13s %10d  %3d  %7.3f s  cpu %6.3f s  %-24s %s" %
                  (shape, ep, len(body), reply.status, seconds, cpu, code or reply.error,
                   "FAIL" if bad else ""), flush=True)
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("| shape | endpoint | bytes | status | seconds | gateway CPU s | code |\n")
            f.write("|---|---|---:|---:|---:|---:|---|\n")
            for shape, ep, n, status, s, cpu, code, bad in rows:
                f.write("| %s | %s | %d | %d | %.3f%s | %.2f | %s |\n" %
                        (shape, ep, n, status, s, " **over**" if bad else "", cpu, code))
    worst = max(rows, key=lambda r: r[4]) if rows else None
    print("%d cases, %d over the bound / 5xx / unanswered%s" %
          (len(rows), failures,
           "; slowest: %s on %s, %.3f s" % (worst[0], worst[1], worst[4]) if worst else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

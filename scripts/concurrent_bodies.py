#!/usr/bin/env python3
"""Eight (--count) ~40 MB (--size) chat bodies sent to m3-gateway at once: the gateway's peak and
settled resident memory (VmHWM / VmRSS from /proc) and each answer's status and time (issue 39:
peak under 1 GB, under 400 MB after). Two shapes: one long string per body, and many tiny
content-part objects per body. Starts its own engine and gateway on the demo model (--build).
Usage: scripts/concurrent_bodies.py --build build [--count 8] [--size 40000000]
"""
import argparse
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import body_sweep  # noqa: E402


def mib(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024.0
    return -1.0


def bodies(model, size, shape):
    if shape == "string":
        text = "a" * (size - 200)
        msg = {"role": "user", "content": text}
    else:
        part = {"type": "text", "text": "a"}
        n = (size - 200) // len(json.dumps(part) + ",")
        msg = {"role": "user", "content": [part] * n}
    return json.dumps({"model": model, "max_tokens": 4, "messages": [msg]}).encode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--model", default="tests/data/demo-model/model")
    ap.add_argument("--count", type=int, default=8)
    ap.add_argument("--size", type=int, default=40_000_000)
    a = ap.parse_args()
    for shape in ("string", "tiny_objects"):  # a fresh gateway each: VmHWM is the process's
        port, procs, pid = body_sweep.start_stack(a.build, a.model, "m")
        try:
            body = bodies("m", a.size, shape)
            results = [None] * a.count

            def one(i):
                t0 = time.monotonic()
                reply = body_sweep.send_request(port, "/v1/chat/completions", body, "whole", 120)[0]
                results[i] = (getattr(reply, "status", reply), time.monotonic() - t0)

            base = mib(pid, "VmRSS")
            threads = [threading.Thread(target=one, args=(i,)) for i in range(a.count)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            time.sleep(2)
            print("%s: %d bodies of %.1f MB: statuses %s, slowest %.2f s; gateway before %.0f MiB, "
                  "peak %.0f MiB, after %.0f MiB" % (
                      shape, a.count, len(body) / 1e6, sorted(r[0] for r in results),
                      max(r[1] for r in results), base, mib(pid, "VmHWM"), mib(pid, "VmRSS")),
                  flush=True)
        finally:
            for p in procs:
                p.kill()


if __name__ == "__main__":
    main()

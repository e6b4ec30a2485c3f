#!/usr/bin/env bash
# Structured outputs on the GPU: time per output token with a JSON schema against unconstrained
# (issue 38's goal: at most 1.05x) at 1, 16 and 64 concurrent requests, through m3-gateway.
# The full-size MiniMax-M3 (vocabulary 200064) with --load-format dummy on two GPUs
# (nvidia-h200-x2, --tensor-parallel 2, NVFP4 by default), one device call of at most 10
# minutes. For each concurrency C and each mode (none | schema | json_object), C streamed
# /v1/completions at once with distinct random 1K-token prompts (token ids), OUTPUT output tokens
# (ignore_eos; the schema is an unbounded array of objects, so the grammar never forces the end
# early), temperature 1; per request the time per output token from the SSE events' arrival
# after the first (median over requests) and the time to first token. The engine fills the
# constrained rows' masks on the CPU before each step (engine/runtime/grammar_rows.h) and the
# CUDA sampler applies them; the table shows the ratio to unconstrained.
# Binaries: the GPU bundle (scripts/device/pack_gpu_bundle.sh with EXTRA_BINS="m3-gateway"),
# carried at BUNDLE (default build-device/gpu-bundle.tar.xz).
# Usage (repo root): bash scripts/device/structured_bench.sh [FORMAT]
#   FORMAT: nvfp4 (default) | mixed
#   env: CONC ("1 16 64"), PROMPT (1024), OUTPUT (256), MODES ("none schema json_object"),
#   BIN (binaries already unpacked), DEVICE (cuda), GPUS (2), LOAD_S (200), EXTRA_SERVE_ARGS
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/structured_bench_out}"
FORMAT="${1:-nvfp4}"
BUNDLE="${BUNDLE:-build-device/gpu-bundle.tar.xz}"
CONC="${CONC:-1 16 64}"
PROMPT="${PROMPT:-1024}"
OUTPUT="${OUTPUT:-256}"
MODES="${MODES:-none schema json_object}"
GPUS="${GPUS:-2}"
mkdir -p "$OUT"
step() { echo "== $* ($(date +%T))"; }
. scripts/device/nccl_dir.sh
{
  nvidia-smi --query-gpu=index,name,memory.total,memory.used --format=csv 2>&1
  if [ -z "${BIN:-}" ]; then
    step "unpacking $BUNDLE"
    mkdir -p /tmp/gpu-bundle && tar -C /tmp/gpu-bundle -xJf "$BUNDLE"
    BIN=/tmp/gpu-bundle/bin
  fi
  export NCCL_NVLS_ENABLE=0
  export LD_LIBRARY_PATH="/tmp/gpu-bundle/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:$(nccl_dir):${LD_LIBRARY_PATH:-}"
  MODEL=/tmp/m3-full-structured-$FORMAT
  rm -rf "$MODEL" && mkdir -p "$MODEL"
  if [ "$FORMAT" = mixed ]; then
    tar -C /tmp -xJf tests/data/minimax-m3-full/mixed.tar.xz && cp /tmp/mixed/* "$MODEL/"
  else
    cp tests/data/minimax-m3-full/"$FORMAT"/*.json "$MODEL/"
  fi
  for f in tokenizer_config.json chat_template.jinja processor_config.json; do
    cp -L tests/data/m3-chat/model/$f "$MODEL/"
  done
  # The M3 chat tokenizer padded to the model's 200064 ids: the grammar's vocabulary has the
  # real size, so every mask covers 200064 tokens.
  python3 - "$MODEL" <<'EOF'
import json, sys
d = sys.argv[1]
tok = json.load(open("tests/data/m3-chat/model/tokenizer.json"))
vocab = json.load(open(d + "/config.json"))["text_config"]["vocab_size"]
v = tok["model"]["vocab"]
n = max(max(v.values()), max(a["id"] for a in tok["added_tokens"])) + 1
for i in range(n, vocab):
    v["<|m3_unused_%d|>" % i] = i
json.dump(tok, open(d + "/tokenizer.json", "w"))
print("tokenizer padded from %d to %d ids" % (n, vocab))
EOF
  port=50171
  gw_port=8171
  log="$OUT/serve.log"
  par="--tensor-parallel $GPUS"
  [ "$GPUS" = 1 ] && par=""
  step "m3-engine serve $FORMAT $par --load-format dummy"
  mem="--gpu-memory-fraction 0.95"
  [ "${DEVICE:-cuda}" = cpu ] && mem=""
  "$BIN/m3-engine" serve --model "$MODEL" --device "${DEVICE:-cuda}" --port $port --host 127.0.0.1 \
    $par --load-format dummy --kv-cache-dtype fp8 --max-num-seqs 64 --max-batched-tokens 8192 \
    $mem ${EXTRA_SERVE_ARGS:-} >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 1 $((2 * ${LOAD_S:-200}))); do
    grep -q "listening on port" "$log" 2>/dev/null && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.5
  done
  grep -q "listening on port" "$log" || { tail -20 "$log"; exit 1; }
  "$BIN/m3-gateway" serve --model "$MODEL" --engine 127.0.0.1:$port --port $gw_port \
    --host 127.0.0.1 --served-model-name m3 --max-concurrent-requests 256 >"$OUT/gateway.log" 2>&1 &
  gpid=$!
  for _ in $(seq 1 60); do
    curl -sf "127.0.0.1:$gw_port/ready" >/dev/null && break
    sleep 0.5
  done
  step "streamed /v1/completions: $PROMPT-token prompts, $OUTPUT output tokens, C in $CONC, modes $MODES"
  python3 - "$gw_port" "$PROMPT" "$OUTPUT" "$CONC" "$MODES" <<'PY' | tee "$OUT/results.txt"
import http.client, json, random, statistics, sys, threading, time
port, prompt, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
concs = [int(c) for c in sys.argv[4].split()]
modes = sys.argv[5].split()
schema = {"type": "object", "properties": {"items": {"type": "array", "items": {
    "type": "object", "properties": {"name": {"type": "string"}, "score": {"type": "integer"},
    "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["name", "score", "tags"], "additionalProperties": False}}},
    "required": ["items"], "additionalProperties": False}

def run(mode, conc):
    res = [None] * conc
    def one(i):
        rng = random.Random(1000 * conc + i)
        body = {"model": "m3", "prompt": [rng.randrange(10, 30000) for _ in range(prompt)],
                "max_tokens": n, "ignore_eos": True, "temperature": 1.0, "seed": i, "stream": True}
        if mode == "schema":
            body["guided_json"] = schema
        elif mode == "json_object":
            body["response_format"] = {"type": "json_object"}
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        t0 = time.time()
        c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        times, err = [], None
        for line in r:
            line = line.strip()
            if not line.startswith(b"data:") or line == b"data: [DONE]":
                continue
            ev = json.loads(line[5:])
            if "error" in ev:
                err = ev["error"]
                break
            if ev.get("choices"):
                times.append(time.time())
        res[i] = (err or (None if r.status == 200 else r.status), t0, times)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(conc)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    bad = [x for x in res if x is None or x[0] or len(x[2]) < 2]
    if bad:
        return None, "failed: %s" % (bad[:2],)
    ttft = statistics.median(1e3 * (t[0] - t0) for _, t0, t in res)
    tpot = statistics.median(1e3 * (t[-1] - t[0]) / (len(t) - 1) for _, _, t in res)
    events = statistics.median(len(t) for _, _, t in res)
    return (tpot, ttft, events), ""

table = {}
for conc in concs:
    for mode in modes:
        r, why = run(mode, conc)
        table[(mode, conc)] = r
        if r:
            print("%-12s c%-3d: %.2f ms per output token, TTFT %.0f ms, %d events (medians)" % (mode, conc, r[0], r[1], r[2]), flush=True)
        else:
            print("%-12s c%-3d: %s" % (mode, conc, why), flush=True)
print()
print("| concurrent | " + " | ".join("%s ms/token" % m for m in modes) + " | " + " | ".join("%s / none" % m for m in modes if m != "none") + " |")
print("| --- " * (1 + len(modes) + len([m for m in modes if m != "none"])) + "|")
for conc in concs:
    base = table.get(("none", conc))
    cells = ["%.2f" % table[(m, conc)][0] if table.get((m, conc)) else "-" for m in modes]
    ratios = ["%.3fx" % (table[(m, conc)][0] / base[0]) if base and table.get((m, conc)) else "-" for m in modes if m != "none"]
    print("| %d | %s | %s |" % (conc, " | ".join(cells), " | ".join(ratios)))
PY
  kill $gpid $pid 2>/dev/null
  wait $gpid $pid 2>/dev/null
  grep -E "grammar|structured" "$log" | sort | uniq -c | head -10
  step "done"
} 2>&1 | tee "$OUT/structured_bench.log"

#!/usr/bin/env bash
# The full-size MiniMax-M3 (60 layers, 128 experts, vocabulary 200064) served on two GPUs
# (nvidia-h200-x2), timed, in one device call of at most 10 minutes: `m3-engine serve` on a
# full-size model directory (tests/data/minimax-m3-full/FORMAT: config.json only, no weights)
# with --load-format dummy (every tensor drawn on the GPUs in its checkpoint format: seconds),
# --kv-cache-dtype fp8, --tensor-parallel 2 (MODE tp) or --expert-parallel 2 (MODE ep), and
# m3-gateway serve in front of it. Measured:
#  - m3-bench-serve over gRPC (the engine): at each concurrency C (default 1, 4, 16, 32), C
#    requests with distinct random 1K-token prompts decode OUTPUT tokens each (default 1024;
#    ignore_eos, greedy). Reported: time per output token (median over requests), output
#    tokens/s per GPU (all output tokens over the wall time, prefill included, / 2) and the
#    steady decode rate per GPU (while every request decodes);
#  - the gateway path: streamed /v1/completions of 1K-token prompts (token ids) through
#    m3-gateway at GATEWAY_CONC concurrent (default 1 and 4), 128 output tokens: time to first
#    token and per output token from the arrival of each event, against the same over gRPC. The dummy model samples ids across its 200064-entry vocabulary;
#    the directory's tokenizer (the M3 chat tokenizer, 32000 ids) is padded with placeholder
#    entries up to 200064 in a copy, so the gateway can detokenize every id.
# Prints a markdown table beside vLLM's published figure (MXFP8, TP8 on 8 x H200, 1K in / 1K out,
# 4 concurrent: 113 output tok/s per GPU, 8.4 ms per output token). The memory lines the engine
# logs at load (weights and KV per GPU) are printed too.
# Binaries: the GPU bundle (scripts/device/pack_gpu_bundle.sh with
# EXTRA_BINS="m3-bench-serve m3-gateway"), carried at BUNDLE (default build-device/gpu-bundle.tar.xz).
# Usage (repo root): bash scripts/device/full_size_bench.sh [FORMAT] [MODE]
#   FORMAT: nvfp4 (default) | mixed | mxfp8 | bf16 (bf16 and mxfp8 do not fit two H200s: the
#   engine refuses them at load with the numbers; that refusal is itself a check)
#   MODE: tp (default) | ep | both (both: two loads; shrink OUTPUT to stay in 10 minutes)
#   env: CONC (1,4,16,32), PROMPT (1024), OUTPUT (1024), SERVE_S bounds each m3-bench-serve
#   (seconds), LOAD_S bounds the load, GATEWAY=0 skips the gateway, GATEWAY_CONC, EXTRA_SERVE_ARGS,
#   for a dry run of the script itself: BIN (binaries already unpacked), DEVICE (cuda),
#   MODEL_DIR (another config directory), KV_ARGS (--kv-cache-dtype fp8), GPU_MEMORY_FRACTION (0.95: the NVFP4 weights take ~123 GiB per GPU at TP 2, ~129 at EP 2)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/full_size_bench_out}"
FORMAT="${1:-nvfp4}"
MODE="${2:-tp}"
BUNDLE="${BUNDLE:-build-device/gpu-bundle.tar.xz}"
CONC="${CONC:-1,4,16,32}"
PROMPT="${PROMPT:-1024}"
OUTPUT="${OUTPUT:-1024}"
GPUS=2
mkdir -p "$OUT"
step() { echo "== $* ($(date +%T))"; }
. scripts/device/nccl_dir.sh
case "$FORMAT" in bf16 | mxfp8 | nvfp4 | mixed) ;; *)
  echo "FORMAT must be bf16, mxfp8, nvfp4 or mixed, not '$FORMAT'" >&2
  exit 2
  ;;
esac
case "$MODE" in tp) MODES="tp" ;; ep) MODES="ep" ;; both) MODES="tp ep" ;; *)
  echo "MODE must be tp, ep or both, not '$MODE'" >&2
  exit 2
  ;;
esac
{
  nvidia-smi --query-gpu=index,name,memory.total,memory.used --format=csv 2>&1
  if [ -z "${BIN:-}" ]; then
    step "unpacking $BUNDLE"
    mkdir -p /tmp/gpu-bundle && tar -C /tmp/gpu-bundle -xJf "$BUNDLE"
    BIN=/tmp/gpu-bundle/bin
  fi
  export NCCL_NVLS_ENABLE=0
  export LD_LIBRARY_PATH="/tmp/gpu-bundle/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:$(nccl_dir):${LD_LIBRARY_PATH:-}"
  ldd "$BIN/m3-engine" "$BIN/m3-bench-serve" | grep "not found"

  # The model directory: the repo's (mixed is packed: its quantized_layers names every module).
  MODEL=/tmp/m3-full-$FORMAT
  rm -rf "$MODEL" && mkdir -p "$MODEL"
  if [ -n "${MODEL_DIR:-}" ]; then
    cp "$MODEL_DIR"/*.json "$MODEL/" && rm -f "$MODEL/tokenizer.json"
  elif [ "$FORMAT" = mixed ]; then
    tar -C /tmp -xJf tests/data/minimax-m3-full/mixed.tar.xz && cp /tmp/mixed/* "$MODEL/"
  else
    cp tests/data/minimax-m3-full/"$FORMAT"/*.json "$MODEL/"
  fi
  for f in tokenizer_config.json chat_template.jinja processor_config.json; do
    cp -L tests/data/m3-chat/model/$f "$MODEL/"
  done
  # Placeholder vocabulary entries up to the model's 200064 ids (decoded as their text).
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
  free -g | head -2

  port=50161
  gw_port=8161
  RESULTS="$OUT/results.jsonl"
  : >"$RESULTS"
  for mode in $MODES; do
    par="--tensor-parallel $GPUS"
    [ "$mode" = ep ] && par="--expert-parallel $GPUS"
    log="$OUT/serve-$FORMAT-$mode.log"
    step "m3-engine serve $FORMAT $par --load-format dummy ${KV_ARGS---kv-cache-dtype fp8}"
    start=$(date +%s)
    mem="--gpu-memory-fraction ${GPU_MEMORY_FRACTION:-0.95}"
    [ "${DEVICE:-cuda}" = cpu ] && mem=""
    "$BIN/m3-engine" serve --model "$MODEL" --device "${DEVICE:-cuda}" --port $port \
      --host 127.0.0.1 $par --load-format dummy ${KV_ARGS---kv-cache-dtype fp8} \
      --max-num-seqs 64 --max-batched-tokens 8192 $mem ${EXTRA_SERVE_ARGS:-} >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 1 $((2 * ${LOAD_S:-200}))); do
      grep -q "listening on port" "$log" 2>/dev/null && break
      kill -0 $pid 2>/dev/null || break
      sleep 0.5
    done
    echo "load: $(($(date +%s) - start)) s"
    grep -E "memory|weights|KV|workspace|rank|error|Error|refus|exhaust" "$log" | grep -v "^$" | head -30
    nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv
    if grep -q "listening on port" "$log"; then
      step "m3-bench-serve: $PROMPT-token prompts, $OUTPUT output tokens, concurrency $CONC"
      timeout "${SERVE_S:-300}" "$BIN/m3-bench-serve" --address 127.0.0.1:$port --prompt "$PROMPT" \
        --output "$OUTPUT" --conc "$CONC" --label "$FORMAT $mode" 2>&1 | tee -a "$OUT/bench.log" |
        grep '^{' >>"$RESULTS"
      echo "m3-bench-serve rc=${PIPESTATUS[0]}"
      if [ "${GATEWAY:-1}" = 1 ] && [ -x "$BIN/m3-gateway" ]; then
        step "the gateway path: streamed /v1/completions at ${GATEWAY_CONC:-1 4} concurrent"
        "$BIN/m3-gateway" serve --model "$MODEL" --engine 127.0.0.1:$port --port $gw_port \
          --host 127.0.0.1 --served-model-name m3 >"$OUT/gateway-$mode.log" 2>&1 &
        gpid=$!
        for _ in $(seq 1 60); do
          curl -sf "127.0.0.1:$gw_port/ready" >/dev/null && break
          sleep 0.5
        done
        n=128
        # C streamed requests at once (threads of python3's standard library): time to the
        # first token and per output token after it, from each SSE event's arrival.
        for c in ${GATEWAY_CONC:-1 4}; do
          python3 - "$gw_port" "$PROMPT" "$n" "$c" "$FORMAT $mode" <<'PY' | tee -a "$OUT/gateway.txt"
import http.client, json, random, statistics, sys, threading, time
port, prompt, n, conc, label = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
ids = int(sys.argv[6]) if len(sys.argv) > 6 else 30000  # prompt ids below this (the tokenizer's)
res = [None] * conc
def one(i):
    rng = random.Random(100 + i)
    body = json.dumps({"model": "m3", "prompt": [rng.randrange(10, ids) for _ in range(prompt)],
                       "max_tokens": n, "ignore_eos": True, "temperature": 0, "stream": True})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    t0 = time.time()
    c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    first = last = None
    err = None
    for line in r:
        line = line.strip()
        if not line.startswith(b"data:") or line == b"data: [DONE]":
            continue
        ev = json.loads(line[5:])
        if "error" in ev:
            err = ev["error"]
            break
        if any(ch.get("text") for ch in ev.get("choices", [])):
            now = time.time()
            first = first or now
            last = now
    res[i] = (err, r.status, t0, first, last)
threads = [threading.Thread(target=one, args=(i,)) for i in range(conc)]
[t.start() for t in threads]
[t.join() for t in threads]
bad = [x for x in res if x is None or x[0] or x[3] is None]
if bad:
    print("gateway %s c%d: failed: %s" % (label, conc, bad[:2]))
else:
    ttft = statistics.median(1e3 * (f - t0) for _, _, t0, f, _ in res)
    tpot = statistics.median(1e3 * (l - f) / (n - 1) for _, _, _, f, l in res)
    print("gateway %s c%d: %d-token prompts, %d output tokens: TTFT %.0f ms, %.2f ms per output token (medians)" % (label, conc, prompt, n, ttft, tpot))
PY
        done
        timeout 120 "$BIN/m3-bench-serve" --address 127.0.0.1:$port --prompt "$PROMPT" \
          --output $n --conc 1 --label "$FORMAT $mode grpc c1 $n" 2>/dev/null | tee -a "$OUT/gateway.txt"
        kill $gpid 2>/dev/null
        wait $gpid 2>/dev/null
      fi
    fi
    kill $pid 2>/dev/null
    wait $pid 2>/dev/null
    grep -E "WARN|warn" "$log" | sort | uniq -c | head -10
    port=$((port + 1))
    gw_port=$((gw_port + 1))
  done

  step "results ($PROMPT-token prompts, $OUTPUT output tokens per request, $GPUS GPUs)"
  python3 - "$RESULTS" "$GPUS" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
gpus = int(sys.argv[2])
print("| config | concurrent | ms per output token | output tok/s per GPU | steady decode tok/s per GPU | steady step ms | TTFT ms |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for r in rows:
    print("| %s, %d x H200 | %d | %.2f | %.1f | %.1f | %.2f | %.0f |" % (
        r["label"], gpus, r["concurrency"], r["tpot_ms"], r["output_tok_s"] / gpus,
        r["steady_tok_s"] / gpus, r["steady_step_ms"], r["ttft_ms"]))
print("| vLLM MXFP8 TP8, 8 x H200 (published) | 4 | 8.4 | 113 | | | |")
EOF
  step "done"
} 2>&1 | tee "$OUT/full_size_bench.log"
